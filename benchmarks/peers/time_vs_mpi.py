#!/usr/bin/env python3
"""Collective time, chorus against Open MPI's default (shared memory), side by side.

Runs chorus-bench (default transports) and mpi-bench (mpirun's default: ob1 +
vader on one host) alternately, --rounds times each, on the same sizes, and
prints a markdown table: the best time of each per size and the ratio
chorus / Open MPI (< 1: chorus faster). Alternating, and taking the best of
the rounds, is what keeps a shared, noisy machine's drift out of the ratio.

    benchmarks/peers/time_vs_mpi.py --ranks 4 -b 8 -e 64M -f 4 --rounds 2
    benchmarks/peers/time_vs_mpi.py --op broadcast --ranks 4 -b 8 -e 64K   # or allgather (sizes: the whole output)
    CHORUS_BOARD_BYTES=0 benchmarks/peers/time_vs_mpi.py ...   # chorus without its board
    CHORUS_TRANSPORT=tcp OMPI_MCA_btl=self,tcp benchmarks/peers/time_vs_mpi.py ...   # both over TCP

Needs build/benchmarks/chorus-bench (or --chorus-bench) and build-peers/mpi-bench
(benchmarks/peers/build.sh).
"""
import argparse
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def rows(output):
    """{bytes: time_us} from a bench table (nccl-tests style rows)."""
    times = {}
    for line in output.splitlines():
        fields = line.split()
        if not fields or line.startswith("#") or not fields[0].isdigit():
            continue
        times[int(fields[0])] = float(fields[5])
    return times


def run(command, env=None):
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    if result.returncode != 0:
        sys.exit(f"time_vs_mpi: {' '.join(command)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return rows(result.stdout)


def size_text(size):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size // scale} {unit}"
    return f"{size} B"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", default="allreduce", choices=["allreduce", "broadcast", "allgather"])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("-b", default="8")
    parser.add_argument("-e", default="64M")
    parser.add_argument("-f", default="4")
    parser.add_argument("--rounds", type=int, default=2, help="alternating runs of each (best is kept)")
    parser.add_argument("--chorus-bench", default=str(ROOT / "build/benchmarks/chorus-bench"))
    parser.add_argument("--mpi-bench", default=str(ROOT / "build-peers/mpi-bench"))
    args = parser.parse_args()
    if args.ranks < 2 or args.rounds < 1:
        parser.error("--ranks must be at least 2 and --rounds at least 1")
    sizes = ["-b", args.b, "-e", args.e, "-f", args.f]
    chorus = [args.chorus_bench, "--ranks", str(args.ranks), "--op", args.op, *sizes, "--rounds", "3"]
    mpi = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(args.ranks), args.mpi_bench, "--op", args.op,
           *sizes, "--rounds", "3"]
    best = {"chorus": {}, "mpi": {}}
    for _ in range(args.rounds):
        for name, command in (("chorus", chorus), ("mpi", mpi)):
            for size, time in run(command, os.environ.copy()).items():
                best[name][size] = min(time, best[name].get(size, float("inf")))
    print(f"{args.op} float32{' sum' if args.op == 'allreduce' else ''}, {args.ranks} ranks, best of {args.rounds} alternating runs "
          f"(each the median of 3 rounds); CHORUS_BOARD_BYTES={os.environ.get('CHORUS_BOARD_BYTES', 'default')}, "
          f"CHORUS_TRANSPORT={os.environ.get('CHORUS_TRANSPORT', 'default')}, "
          f"OMPI_MCA_btl={os.environ.get('OMPI_MCA_btl', 'default')}")
    print()
    mpi_path = "shm" if "OMPI_MCA_btl" not in os.environ else os.environ["OMPI_MCA_btl"]
    print(f"| size | chorus (µs) | Open MPI {mpi_path} (µs) | chorus / Open MPI |")
    print("|---:|---:|---:|---:|")
    worst = 0.0
    for size in sorted(best["chorus"]):
        if size not in best["mpi"]:
            continue
        ratio = best["chorus"][size] / best["mpi"][size]
        worst = max(worst, ratio)
        print(f"| {size_text(size)} | {best['chorus'][size]:.2f} | {best['mpi'][size]:.2f} | {ratio:.2f} |")
    print()
    print(f"worst ratio: {worst:.2f}")


if __name__ == "__main__":
    main()
