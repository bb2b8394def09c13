"""chorus.torch on CUDA tensors, beside Gloo, in one job of 2 (or --ranks)
processes sharing one GPU (every rank on cuda:0): scripts/gpu-test.sh's
part "torch" runs it at 2 and 4 on the GPU machine with the package
scripts/gpu-torch.sh built there.

  collectives  every collective and send/recv, bit-exact on small integers:
               small (staged through host memory) and large (run on the
               device) tensors, async with wait() and with the Future's
               then(), a non-contiguous tensor, work queued on a side
               stream after an async call seeing the result, tensors on two
               devices refused; over chorus's default transports (cuda_ipc
               between the processes) and over shm (host staging)
  ddp          the same model trained with DDP over gloo, over chorus, and
               over chorus with the Python allreduce comm hook (the Future's
               then() on CUDA tensors): a sum of two gradients is exact in
               either order, so the losses must be EQUAL step for step. Past
               2 ranks, ranks 2 and up train with their loss weighted 0:
               they run every step and every collective, and their zero
               gradients keep each sum exact whatever order Gloo and
               chorus add in. Then each backend's median step time.
  timing       all_reduce of float32 at 8 B, 1 MiB and 64 MiB, chorus
               against gloo (median of a few, the slowest rank's time)

    PYTHONPATH=gpu-torch python3 test/cuda/torch_cuda.py [--device cuda|cpu] [--ranks N]
        [--parts collectives,ddp,timing]

--device cpu runs the same harness on CPU tensors (no GPU needed; the
stream and two-device checks are left out), which is how it is checked
before it goes to the GPU machine. Exit status 0: every check passed.
"""

import argparse
import datetime
import faulthandler
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

SIZE = 2  # ranks (--ranks, even: send/recv pairs rank r with r ^ 1)
# Elements: under chorus's 256 KiB device-plan threshold, and above it.
COUNTS = (5, 300_000)
DDP_STEPS = 20
TIMED_BYTES = (8, 1 << 20, 64 << 20)


class Failed(Exception):
    pass


checked = 0  # comparisons made by this rank


def check_equal(got, expected, what):
    """Bit-exact: same dtype, shape and values (small integers, exact in every dtype used)."""
    global checked
    checked += 1
    if got.dtype != expected.dtype or got.shape != expected.shape or not torch.equal(got.cpu(), expected.cpu()):
        raise Failed(f"{what}: got {got.flatten()[:8].tolist()} ({got.dtype}, {tuple(got.shape)}), expected "
                     f"{expected.flatten()[:8].tolist()} ({expected.dtype}, {tuple(expected.shape)})")


def total():
    """The sum over ranks of rank + 1."""
    return SIZE * (SIZE + 1) // 2


def check_collectives(group, rank, device, label):
    def full(count, value, dtype=torch.float32):
        return torch.full((count,), float(value), dtype=dtype, device=device)

    for count in COUNTS:
        where = f"{label}, {count} elements"
        for dtype in (torch.float32, torch.int64, torch.bfloat16):
            tensor = full(count, rank + 1, dtype)
            dist.all_reduce(tensor, group=group)
            check_equal(tensor, full(count, total(), dtype), f"all_reduce SUM {dtype} ({where})")
        tensor = full(count, 2 * (rank + 1))
        dist.all_reduce(tensor, op=dist.ReduceOp.AVG, group=group)
        check_equal(tensor, full(count, SIZE + 1), f"all_reduce AVG ({where})")
        tensor = full(count, rank + 1)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=group)
        check_equal(tensor, full(count, SIZE), f"all_reduce MAX ({where})")

        tensor = full(count, rank + 10)
        dist.broadcast(tensor, src=1, group=group)
        check_equal(tensor, full(count, 11), f"broadcast ({where})")

        gathered = [full(count, -1) for _ in range(SIZE)]
        dist.all_gather(gathered, full(count, rank + 1), group=group)
        for peer in range(SIZE):
            check_equal(gathered[peer], full(count, peer + 1), f"all_gather block {peer} ({where})")
        flat = full(SIZE * count, -1)
        dist.all_gather_into_tensor(flat, full(count, rank + 1), group=group)
        check_equal(flat, torch.cat([full(count, peer + 1) for peer in range(SIZE)]), f"all_gather_into_tensor ({where})")

        # Block j of rank q's input is (q + 1) * (j + 1): rank r receives (r + 1) * total().
        blocks = [full(count, (rank + 1) * (block + 1)) for block in range(SIZE)]
        output = full(count, -1)
        dist.reduce_scatter(output, blocks, group=group)
        check_equal(output, full(count, (rank + 1) * total()), f"reduce_scatter ({where})")
        output = full(count, -1)
        dist.reduce_scatter_tensor(output, torch.cat(blocks), group=group)
        check_equal(output, full(count, (rank + 1) * total()), f"reduce_scatter_tensor ({where})")

        # Rank r sends 10 r + j to rank j.
        outputs = [full(count, -1) for _ in range(SIZE)]
        dist.all_to_all(outputs, [full(count, 10 * rank + peer) for peer in range(SIZE)], group=group)
        for peer in range(SIZE):
            check_equal(outputs[peer], full(count, 10 * peer + rank), f"all_to_all from {peer} ({where})")
        output = full(SIZE * count, -1)
        dist.all_to_all_single(output, torch.cat([full(count, 10 * rank + peer) for peer in range(SIZE)]),
                               group=group)
        check_equal(output, torch.cat([full(count, 10 * peer + rank) for peer in range(SIZE)]),
                    f"all_to_all_single ({where})")

        # Point to point both ways, blocking then async.
        message = torch.arange(count, dtype=torch.float32, device=device) + 100 * (rank + 1)
        received = full(count, -1)
        other = rank ^ 1
        peer_message = torch.arange(count, dtype=torch.float32, device=device) + 100 * (other + 1)
        if rank % 2 == 0:
            dist.send(message, dst=other, group=group)
            dist.recv(received, src=other, group=group)
        else:
            dist.recv(received, src=other, group=group)
            dist.send(message, dst=other, group=group)
        check_equal(received, peer_message, f"send/recv ({where})")
        received = full(count, -1)
        works = [dist.isend(message, dst=other, group=group), dist.irecv(received, src=other, group=group)]
        for work in works:
            work.wait()
        check_equal(received, peer_message, f"isend/irecv ({where})")

        # Async: wait(), and a value through the Future's then().
        tensor = full(count, rank + 1)
        work = dist.all_reduce(tensor, async_op=True, group=group)
        work.wait()
        check_equal(tensor, full(count, total()), f"async all_reduce, wait() ({where})")
        tensor = full(count, rank + 1)
        future = dist.all_reduce(tensor, async_op=True, group=group).get_future().then(lambda done: done.value()[0] * 2)
        check_equal(future.wait(), full(count, 2 * total()), f"async all_reduce, then() ({where})")

        # Non-contiguous: a transposed view, reduced and broadcast in place.
        base = torch.full((4, count), float(rank + 1), device=device)
        view = base.t()
        dist.all_reduce(view, group=group)
        check_equal(base, torch.full((4, count), float(total()), device=device),
                    f"all_reduce of a transposed view ({where})")
        view.fill_(rank + 20)
        dist.broadcast(view, src=0, group=group)
        check_equal(base, torch.full((4, count), 20.0, device=device), f"broadcast of a transposed view ({where})")
        dist.barrier(group=group)

    empty = torch.empty(0, device=device)
    dist.all_reduce(empty, group=group)
    check_equal(empty, torch.empty(0, device=device), f"all_reduce of an empty tensor ({label})")
    flat = torch.empty(0, device=device)
    dist.all_gather_into_tensor(flat, empty, group=group)
    check_equal(flat, torch.empty(0, device=device), f"all_gather_into_tensor of empty tensors ({label})")

    if device.type == "cuda":
        check_stream_order(group, rank, device, label)
        check_two_devices_refused(group, rank, device, label)


def check_stream_order(group, rank, device, label):
    """As NCCL's: the collective reads its input after the work queued on the
    caller's stream before the call, and wait() makes the current stream wait
    for the result, the issuing stream and any other. (Work queued on the
    stream after an async call but before wait() may run first, with NCCL too.)"""
    side = torch.cuda.Stream(device=device)
    side.wait_stream(torch.cuda.current_stream(device))
    count = COUNTS[-1]
    with torch.cuda.stream(side):
        tensor = torch.full((count,), float(rank + 1), device=device)
        tensor.mul_(1)  # queued on the side stream before the call: the collective must read after it
        work = dist.all_reduce(tensor, async_op=True, group=group)
        work.wait()
        doubled = tensor * 2  # queued after wait(), with no host synchronize
    side.synchronize()
    check_equal(doubled, torch.full((count,), 2.0 * total(), device=device),
                f"work on the caller's stream after wait() ({label})")

    # A non-contiguous tensor is copied back on the stream of the call;
    # wait() on another stream must order that stream after the copy.
    base = torch.full((4, count), float(rank + 1), device=device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        work = dist.all_reduce(base.t(), async_op=True, group=group)
    work.wait()
    snapshot = base.clone()  # on the default stream, no synchronize
    check_equal(snapshot, torch.full((4, count), float(total()), device=device),
                f"a transposed view reduced on a side stream, read on the default one after wait() ({label})")


def check_two_devices_refused(group, rank, device, label):
    output = torch.empty(SIZE * 4)  # on the CPU
    try:
        dist.all_gather_into_tensor(output, torch.ones(4, device=device), group=group)
    except Exception as error:  # noqa: BLE001  (judged by its words)
        words = [f"rank {rank}", "one device", "cpu", "cuda"]
        if "chorus.torch" not in str(error):
            # torch itself may refuse the mix before any backend sees it.
            print(f"rank {rank}: tensors on two devices refused by torch before chorus: {error}", flush=True)
        elif not all(word in str(error) for word in words):
            raise Failed(f"{label}: tensors on two devices: the error {error!r} does not name {words}") from error
    else:
        raise Failed(f"{label}: tensors on the CPU and {device} were not refused")
    tensor = torch.full((4,), float(rank + 1), device=device)
    dist.all_reduce(tensor, group=group)
    check_equal(tensor, torch.full((4,), float(total()), device=device),
                f"the group works after a refused call ({label})")


def train(group, rank, device, hook):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(100 + rank)  # different weights per rank: DDP's broadcast of rank 0's must make them one
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 8)).to(device)
    ddp = DistributedDataParallel(model, process_group=group,
                                  device_ids=[device.index] if device.type == "cuda" else None,
                                  bucket_cap_mb=0.01)  # several buckets, so several collectives per step
    if hook:
        ddp.register_comm_hook(group, default_hooks.allreduce_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(1000 + rank)
    weight = 1.0 if rank < 2 else 0.0  # past 2 ranks: zero gradients, every sum exact (module docstring)
    losses = []
    step_seconds = []
    for _ in range(DDP_STEPS):
        inputs = torch.randn(16, 32, generator=data).to(device)
        targets = torch.randn(16, 8, generator=data).to(device)
        started = time.perf_counter()
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(inputs), targets)
        (loss * weight).backward()
        optimizer.step()
        losses.append(loss.item())  # the host waits for the step here
        step_seconds.append(time.perf_counter() - started)
    weights = torch.cat([parameter.detach().flatten() for parameter in model.parameters()]).cpu()
    # The first steps build DDP's buckets and warm the caches.
    return losses, weights, statistics.median(step_seconds[3:])


def check_ddp(groups, rank, device):
    runs = {"gloo": train(groups["gloo"], rank, device, hook=False),
            "chorus": train(groups["chorus"], rank, device, hook=False),
            "chorus+allreduce_hook": train(groups["chorus"], rank, device, hook=True)}
    for name, (losses, _, _) in runs.items():
        print(f"rank {rank} ddp {name:>22}: {' '.join(f'{loss:.9g}' for loss in losses)}", flush=True)
    reference_losses, reference_weights, _ = runs["gloo"]
    for name, (losses, weights, _) in runs.items():
        differing = [step for step, (a, b) in enumerate(zip(losses, reference_losses)) if a != b]
        if differing:
            raise Failed(f"ddp over {name}: losses differ from gloo's at steps {differing}")
        check_equal(weights, reference_weights, f"ddp over {name}: final weights against gloo's")
    # Every rank ends with the same weights.
    gathered = [torch.empty_like(reference_weights) for _ in range(SIZE)]
    dist.all_gather(gathered, reference_weights, group=groups["gloo_cpu"])
    for peer in range(1, SIZE):
        check_equal(gathered[peer], gathered[0], f"ddp: rank {peer}'s final weights against rank 0's")
    # Each backend's median step, the slowest rank's.
    steps = torch.tensor([runs[name][2] for name in runs], dtype=torch.float64)
    dist.all_reduce(steps, op=dist.ReduceOp.MAX, group=groups["gloo_cpu"])
    if rank == 0:
        times = dict(zip(runs, steps.tolist()))
        print(f"# ddp step at {SIZE} ranks, median ms (slowest rank): " +
              ", ".join(f"{name} {seconds * 1e3:.3f}" for name, seconds in times.items()) +
              f"; chorus / gloo {times['chorus'] / times['gloo']:.2f}", flush=True)


def time_all_reduce(groups, rank, device):
    rows = []
    for size in TIMED_BYTES:
        tensor = torch.ones(max(size // 4, 1), device=device)
        row = [size]
        for name in ("chorus", "gloo"):
            repeats = 3 if size >= (64 << 20) else 7
            samples = []
            for repeat in range(repeats + 1):
                dist.barrier(group=groups["gloo_cpu"])
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                started = time.perf_counter()
                dist.all_reduce(tensor, group=groups[name])
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                elapsed = torch.tensor([time.perf_counter() - started], dtype=torch.float64)
                dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=groups["gloo_cpu"])
                if repeat > 0:  # the first is a warm-up
                    samples.append(elapsed.item())
            row.append(statistics.median(samples) * 1e6)
        rows.append(row)
    if rank == 0:
        print(f"# all_reduce of {device.type} float32 at {SIZE} ranks, median us (slowest rank)")
        print(f"# {'bytes':>10} {'chorus':>12} {'gloo':>12}")
        for size, chorus_us, gloo_us in rows:
            print(f"  {size:>10} {chorus_us:>12.1f} {gloo_us:>12.1f}", flush=True)


def rank_main(rank, args, init_method):
    global SIZE
    SIZE = args.ranks
    faulthandler.dump_traceback_later(args.rank_timeout, exit=True)  # a hang ends this rank, with its stack
    import chorus.torch  # noqa: F401  (registers the backend "chorus")

    torch.set_num_threads(1)
    if args.device == "cuda":
        torch.cuda.set_device(0)
        torch.zeros(1, device="cuda")  # CUDA in use before chorus connects: cuda_ipc is offered
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    timeout = datetime.timedelta(seconds=60)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=SIZE, timeout=timeout)
    groups = {"gloo": dist.group.WORLD, "gloo_cpu": dist.new_group(backend="gloo", timeout=timeout),
              "chorus": dist.new_group(backend="chorus", timeout=timeout)}
    # A second chorus group over one host transport only: device memory
    # through pinned host memory (host_staging) instead of cuda_ipc.
    staged_transport = "shm" if args.device == "cuda" else "tcp"
    os.environ["CHORUS_TRANSPORT"] = staged_transport
    groups["chorus_staged"] = dist.new_group(backend="chorus", timeout=timeout)
    del os.environ["CHORUS_TRANSPORT"]
    started = time.monotonic()
    try:
        if "collectives" in args.parts:
            check_collectives(groups["chorus"], rank, device, "chorus")
            check_collectives(groups["chorus_staged"], rank, device, f"chorus over {staged_transport}")
            print(f"rank {rank}: collectives OK ({checked} checks, {time.monotonic() - started:.1f} s)", flush=True)
        if "ddp" in args.parts:
            check_ddp(groups, rank, device)
            print(f"rank {rank}: ddp OK, losses and weights equal to gloo's for {DDP_STEPS} steps", flush=True)
        if "timing" in args.parts:
            time_all_reduce(groups, rank, device)
    except Failed as failure:
        print(f"rank {rank}: FAILED: {failure}", flush=True)
        sys.exit(1)
    dist.barrier(group=groups["gloo_cpu"])
    dist.destroy_process_group()
    print(f"rank {rank}: all OK in {time.monotonic() - started:.1f} s", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--parts", default="collectives,ddp,timing")
    parser.add_argument("--ranks", type=int, default=2, help="processes (even)")
    parser.add_argument("--rank-timeout", type=float, default=80, help="seconds before a rank gives up")
    args = parser.parse_args()
    if args.ranks < 2 or args.ranks % 2:
        parser.error("--ranks takes an even number of at least 2 (send/recv pairs rank r with r ^ 1)")
    global SIZE
    SIZE = args.ranks
    args.parts = args.parts.split(",")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_cuda.py: torch sees no GPU (--device cpu runs the harness on CPU tensors)")
    # cuBLAS picks the same kernels run after run only with a fixed workspace.
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        init_method = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    started = time.monotonic()
    print(f"torch_cuda.py: torch {torch.__version__}, {args.device}, {SIZE} ranks, parts {','.join(args.parts)}",
          flush=True)
    mp.start_processes(rank_main, args=(args, init_method), nprocs=SIZE, start_method="spawn")
    print(f"torch_cuda.py: passed in {time.monotonic() - started:.1f} s")


if __name__ == "__main__":
    main()
