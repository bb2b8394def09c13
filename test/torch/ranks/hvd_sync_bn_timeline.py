"""hvd.SyncBatchNorm against one BatchNorm over the whole batch (outputs,
input gradients, the weight's and bias's gradients summed over ranks, running
statistics: floating point computed in another order, so within 1e-5), and
the timeline: start_timeline/stop_timeline's Chrome trace, parsed (rank 0
writes it). argv[1]: a directory for the timeline files."""

import json
import os
import sys

import torch

import chorus.torch.hvd as hvd
from common import Checker

torch.set_num_threads(1)
hvd.init("chorus", timeout=30)
rank, size = hvd.rank(), hvd.size()
check = Checker(rank)


def close(got, expected, what):
    check(got.shape == expected.shape and torch.allclose(got, expected, rtol=1e-5, atol=1e-5),
          f"{what}: largest difference {(got - expected).abs().max().item()}")


# Each rank normalizes its 2 (or 3) samples of a batch every rank can build;
# the reference is torch's BatchNorm over the whole batch, in one process.
for shape, reference_class, momentum in [((2, 3), torch.nn.BatchNorm1d, 0.1), ((2, 3, 5), torch.nn.BatchNorm1d, None),
                                         ((3, 2, 4, 3), torch.nn.BatchNorm2d, 0.3)]:
    per_rank = shape[0]
    whole = torch.randn((per_rank * size,) + shape[1:], generator=torch.Generator().manual_seed(11)) * 3 + 1
    upstream = torch.randn(whole.shape, generator=torch.Generator().manual_seed(12))
    sync_bn = hvd.SyncBatchNorm(shape[1], momentum=momentum)
    reference = reference_class(shape[1], momentum=momentum)
    with torch.no_grad():
        for module in (sync_bn, reference):
            module.weight.copy_(torch.arange(1.0, shape[1] + 1))
            module.bias.copy_(torch.arange(shape[1]) * 0.5)
    mine = whole[rank * per_rank:(rank + 1) * per_rank].clone().requires_grad_()
    everything = whole.clone().requires_grad_()
    for step in range(2):  # twice: running statistics move twice (momentum None: their plain average)
        mine.grad = everything.grad = None
        sync_bn.zero_grad()
        reference.zero_grad()
        out = sync_bn(mine)
        expected = reference(everything)
        close(out, expected[rank * per_rank:(rank + 1) * per_rank], f"{shape} output, step {step}")
        (out * upstream[rank * per_rank:(rank + 1) * per_rank]).sum().backward()
        (expected * upstream).sum().backward()
        close(mine.grad, everything.grad[rank * per_rank:(rank + 1) * per_rank], f"{shape} input gradient")
        close(hvd.allreduce(sync_bn.weight.grad, op=hvd.Sum), reference.weight.grad, f"{shape} weight gradient")
        close(hvd.allreduce(sync_bn.bias.grad, op=hvd.Sum), reference.bias.grad, f"{shape} bias gradient")
        close(sync_bn.running_mean, reference.running_mean, f"{shape} running mean")
        close(sync_bn.running_var, reference.running_var, f"{shape} running variance")
    check(not torch.equal(sync_bn.running_mean, torch.zeros(shape[1])), "the running mean moved")
    sync_bn.eval()
    reference.eval()
    check.equal(sync_bn(mine).detach(), torch.nn.functional.batch_norm(
        mine, sync_bn.running_mean, sync_bn.running_var, sync_bn.weight, sync_bn.bias, False, 0.0, 1e-5).detach(),
        f"{shape} evaluation: the running statistics, locally")
# One rank's BatchNorm would differ: the test can tell.
lonely = torch.nn.BatchNorm1d(3)(torch.arange(6.0).view(2, 3) + rank)
check(size == 1 or not torch.allclose(lonely, hvd.SyncBatchNorm(3)(torch.arange(6.0).view(2, 3) + rank)),
      "synchronized statistics differ from one rank's")
try:
    hvd.SyncBatchNorm(3)(torch.ones(3))
    check(False, "a 1-D input must fail")
except ValueError as error:
    check("2D" in str(error), f"the error says why: {error}")

# The timeline.
directory = sys.argv[1]


def read_timeline(path):
    with open(path) as timeline:
        return json.load(timeline)


def phases(events, name):
    """The phases written on the tensor name's track, in order: ("B", "NEGOTIATE_ALLREDUCE"), ("E", None), ..."""
    pids = [e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name" and e["args"].get("name") == name]
    check(len(pids) == 1, f"one track named {name}: {pids}")
    track = [e for e in events if e["pid"] == pids[0] and e["ph"] != "M"]
    check(all(a["ts"] <= b["ts"] for a, b in zip(track, track[1:])), f"{name}: time goes forward")
    return [(e["ph"], e.get("name")) for e in track]


call = [("B", "NEGOTIATE_ALLREDUCE"), ("E", None), ("B", "ALLREDUCE"), ("E", None)]
for index, mark_cycles in enumerate([True, False]):
    path = os.path.join(directory, f"timeline{index}.rank{rank}.json")  # (each its own: rank 0's alone appears)
    hvd.start_timeline(path, mark_cycles=mark_cycles)
    hvd.allreduce(torch.ones(3), name="test_allreduce")
    if rank == 0:
        check(phases(read_timeline(path), "allreduce.test_allreduce") == call, "valid JSON while it runs")
    handle = hvd.allreduce_async(torch.ones(3))
    gathered = hvd.allgather(torch.ones(1, 2))
    hvd.broadcast_(torch.ones(2), root_rank=0, name="weights")
    hvd.synchronize(handle)
    hvd.allreduce(torch.ones(3), name="test_allreduce")
    hvd.stop_timeline()
    hvd.allreduce(torch.ones(3), name="after_stop")
    if rank == 0:
        events = read_timeline(path)
        check(events[0]["args"]["start_time_since_epoch_in_micros"] > 0, "the start time, as Horovod's")
        check(phases(events, "allreduce.test_allreduce") == call + call, "two calls of one name: one track")
        check(phases(events, "allreduce.noname.0") == call, "an async call ends at synchronize")
        check(phases(events, "allgather.noname.0") == [(p, n and n.replace("ALLREDUCE", "ALLGATHER")) for p, n in call],
              "allgather")
        check(phases(events, "broadcast.weights")[2] == ("B", "BROADCAST"), "broadcast")
        check("after_stop" not in json.dumps(events), "nothing after stop_timeline")
        cycles = [e for e in events if e.get("name") == "CYCLE_START"]
        check(len(cycles) == (5 if mark_cycles else 0), f"CYCLE_START before each call with mark_cycles: {cycles}")
    else:
        check(not os.path.exists(path), "only rank 0 writes (as Horovod)")
hvd.stop_timeline()  # stopping twice is harmless
hvd.shutdown()
print(f"hvd_sync_bn_timeline OK {check.count}", flush=True)
