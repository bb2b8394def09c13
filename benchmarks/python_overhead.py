"""Python-call overhead of a small allreduce: the same in-place 8-byte
allreduce timed from a Python loop (ctx.allreduce) and from a C++ loop
(chorus::allreduce, via chorus._chorus._allreduce_loop_cpp), alternating on
one Context in one run, so machine noise hits both alike.

    PYTHONPATH=build/python build/tools/chorus-run -n 2 -- python3 benchmarks/python_overhead.py

Rank 0 prints each round and the medians (µs per call): C++, Python, their
difference and ratio. Options: --rounds, --iterations, --bytes, --dtype.
"""

import argparse
import statistics
import time

import numpy as np

import chorus
from chorus import _chorus


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--bytes", type=int, default=8)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()

    with chorus.init() as ctx:
        data = np.ones(max(1, args.bytes // np.dtype(args.dtype).itemsize), args.dtype)
        allreduce = ctx.allreduce
        for _ in range(200):  # warm up both paths
            allreduce(data)
        _chorus._allreduce_loop_cpp(ctx, data, 200)

        cpp, python = [], []
        for round_number in range(args.rounds):
            ctx.barrier()
            seconds = _chorus._allreduce_loop_cpp(ctx, data, args.iterations)
            cpp.append(seconds / args.iterations * 1e6)
            ctx.barrier()
            start = time.perf_counter()
            for _ in range(args.iterations):
                allreduce(data)
            python.append((time.perf_counter() - start) / args.iterations * 1e6)
            if ctx.rank == 0:
                print(f"round {round_number:2d}: C++ {cpp[-1]:8.2f} us  Python {python[-1]:8.2f} us  "
                      f"difference {python[-1] - cpp[-1]:7.2f} us", flush=True)

        if ctx.rank == 0:
            cpp_median, python_median = statistics.median(cpp), statistics.median(python)
            differences = [p - c for p, c in zip(python, cpp)]
            print(f"{ctx.size} ranks, {data.nbytes} B {args.dtype} allreduce (sum, in place), "
                  f"{args.rounds} rounds x {args.iterations} calls")
            print(f"median per call: C++ {cpp_median:.2f} us, Python {python_median:.2f} us, "
                  f"difference {python_median - cpp_median:.2f} us (median of per-round differences "
                  f"{statistics.median(differences):.2f} us), ratio {python_median / cpp_median:.3f}")
            print(f"fastest round: C++ {min(cpp):.2f} us, Python {min(python):.2f} us, "
                  f"difference {min(python) - min(cpp):.2f} us")


if __name__ == "__main__":
    main()
