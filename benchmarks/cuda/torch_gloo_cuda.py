"""The peer for chorus-bench --device cuda: PyTorch's Gloo backend allreducing
CUDA tensors (it copies through pinned host memory and TCP), with N processes
sharing one GPU, the way chorus-bench runs them. Prints the same columns as
chorus-bench so the two tables line up (scripts/gpu-test.sh runs both in one
job on the GPU machine; torch is not needed anywhere else).

    python3 benchmarks/cuda/torch_gloo_cuda.py --ranks 4 --min-bytes 8 --max-bytes 64M

busbw is nccl-tests' allreduce bus bandwidth: algbw * 2 (N-1) / N.
"""

import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def rank_main(rank, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank % torch.cuda.device_count())
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    size = args.min_bytes
    if rank == 0:
        print(f"# torch {torch.__version__} gloo allreduce of CUDA float32 tensors, {args.ranks} ranks sharing "
              f"{torch.cuda.get_device_name()}")
        print(f"#{'size(B)':>13} {'count':>13} {'time(us)':>12} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12} "
              f"{'#wrong':>8}")
    while size <= args.max_bytes:
        count = max(size // 4, 1)
        tensor = torch.full((count,), float(rank + 1), device="cuda")
        dist.all_reduce(tensor)
        expected = float(args.ranks * (args.ranks + 1) // 2)
        wrong = int((tensor != expected).sum().item())
        for _ in range(args.warmup):
            dist.all_reduce(tensor)
        torch.cuda.synchronize()
        samples = []
        for _ in range(args.rounds):
            dist.barrier()
            started = time.perf_counter()
            for _ in range(args.iters):
                dist.all_reduce(tensor)
            torch.cuda.synchronize()
            elapsed = torch.tensor([time.perf_counter() - started], dtype=torch.float64)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            samples.append(elapsed.item() / args.iters)
        seconds = statistics.median(samples)
        algbw = count * 4 / seconds / 1e9
        busbw = algbw * 2 * (args.ranks - 1) / args.ranks
        if rank == 0:
            print(f"{count * 4:14d} {count:13d} {seconds * 1e6:12.2f} {algbw:12.3f} {busbw:12.3f} {wrong:8d}",
                  flush=True)
        size *= args.step_factor
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--min-bytes", type=parse_bytes, default=8)
    parser.add_argument("--max-bytes", type=parse_bytes, default=64 << 20)
    parser.add_argument("--step-factor", type=int, default=8)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=29611)
    args = parser.parse_args()
    mp.spawn(rank_main, args=(args, args.port), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
