"""The PyTorch backend against Gloo, in one job: a "chorus" and a "gloo"
process group over the same ranks, measured in alternating rounds so that
machine noise hits both alike (issue 10's targets).

    PYTHONPATH=build/python build/tools/chorus-run -n 2 -- /usr/bin/python3 benchmarks/torch_vs_gloo.py

Two measurements, each a median over rounds:
- small allreduce: blocking dist.all_reduce of --elements float32 in a loop
  (calls per second; the target is chorus >= 5 x gloo);
- DDP step: forward, backward (DDP's bucketed allreduces) and an SGD step of
  an MLP (--width, --layers) on a fixed batch (ms per step; the target is
  chorus <= 0.9 x gloo);
- the same step through chorus.torch.hvd's DistributedOptimizer on the
  chorus group instead of DDP ("hvd").
Rank 0 prints each round and the medians with their ratios, and how long the
chorus group's collectives ran per DDP step (Context statistics:
time_in_collectives, overlapping the backward pass or not).
"""

import argparse
import statistics
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import chorus.torch  # noqa: F401  (registers the backend)
import chorus.torch.hvd as hvd


def allreduce_rate(group, tensor, iterations):
    dist.barrier(group=group)
    started = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(tensor, group=group)
    return iterations / (time.perf_counter() - started)


def make_trainer(group, args):
    """One training step of the MLP: through DDP on `group`, or through hvd's DistributedOptimizer ("hvd")."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(args.width, args.width) for _ in range(args.layers)]
    model = torch.nn.Sequential(*[m for layer in layers for m in (layer, torch.nn.ReLU())])
    if group == "hvd":
        optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1e-3),
                                             named_parameters=model.named_parameters())
    else:
        model = DistributedDataParallel(model, process_group=group)
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    inputs = torch.randn(args.batch, args.width)

    def step():
        loss = model(inputs).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return step


def step_time(group, step, steps):
    dist.barrier(group=group)
    started = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - started) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iterations", type=int, default=2000, help="allreduce calls per round")
    parser.add_argument("--elements", type=int, default=2, help="float32 elements per small allreduce")
    parser.add_argument("--steps", type=int, default=20, help="DDP steps per round")
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    dist.init_process_group("chorus")
    hvd.init()  # on the group just made (its launcher thread and process sets)
    rank = dist.get_rank()
    groups = {"chorus": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    tensor = torch.ones(args.elements)
    trainers = {name: make_trainer(group, args) for name, group in groups.items()}
    trainers["hvd"] = make_trainer("hvd", args)
    trainer_groups = dict(groups, hvd=dist.group.WORLD)
    for name, group in groups.items():  # warm up
        allreduce_rate(group, tensor, 200)
    for name, group in trainer_groups.items():
        step_time(group, trainers[name], 3)
    chorus_backend = hvd._job._chorus_backend()  # noqa: SLF001  (the WORLD group's counters)

    rates = {name: [] for name in groups}
    steps = {name: [] for name in trainer_groups}
    running = []  # ms per chorus DDP step that chorus's collectives ran
    for round_number in range(args.rounds):
        for name, group in groups.items():
            rates[name].append(allreduce_rate(group, tensor, args.iterations))
        for name, group in trainer_groups.items():
            before = chorus_backend.statistics()["time_in_collectives"] if name == "chorus" else 0
            steps[name].append(step_time(group, trainers[name], args.steps))
            if name == "chorus":
                ran = chorus_backend.statistics()["time_in_collectives"] - before
                running.append(ran / args.steps)
        if rank == 0:
            print(f"round {round_number}: " + "  ".join(
                f"{name} {rates[name][-1]:.0f} allreduce/s" for name in groups) + "  " + "  ".join(
                f"{name} {steps[name][-1] * 1e3:.2f} ms/step" for name in trainer_groups), flush=True)

    if rank == 0:
        rate = {name: statistics.median(values) for name, values in rates.items()}
        step = {name: statistics.median(values) for name, values in steps.items()}
        print(f"small allreduce ({args.elements} float32): chorus {rate['chorus']:.0f}/s, gloo {rate['gloo']:.0f}/s, "
              f"ratio {rate['chorus'] / rate['gloo']:.2f} (target >= 5)")
        print(f"DDP step ({args.layers} x {args.width} MLP, batch {args.batch}): chorus {step['chorus'] * 1e3:.2f} ms, "
              f"gloo {step['gloo'] * 1e3:.2f} ms, ratio {step['chorus'] / step['gloo']:.2f} (target <= 0.9)")
        print(f"hvd.DistributedOptimizer step on chorus: {step['hvd'] * 1e3:.2f} ms, ratio to DDP on gloo "
              f"{step['hvd'] / step['gloo']:.2f}")
        print(f"chorus's collectives ran {statistics.median(running) * 1e3:.2f} ms per chorus DDP step "
              f"(rank 0, median of rounds)")
    hvd.shutdown()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
