#!/usr/bin/python3
"""Joins the runs of benchmarks/scale/measure.sh with chorus-project's
projections for the same layouts and prints, per algorithm and size, the
measured time, the projected time and the error (projected / measured - 1),
then the median and worst error per layout (docs/scale.md).

The model network's numbers are fitted from the 2-rank runs in the same
directory: a 2-rank ring allgather of S bytes is one message of S/2 bytes
each way, so alpha is the time at the smallest size and beta the slope to
the largest.

    benchmarks/scale/compare.py /tmp/chorus-scale [build/tools/chorus-project]
"""
import statistics
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from auto_vs_best import tables  # noqa: E402  (chorus-bench's tables, parsed once)

LAYOUTS = {"r2": (2, 1), "h22": (2, 2), "h44": (2, 4), "h4444": (4, 4)}
GAMMA_GBPS = 14  # chorus-reduce-bench, float32 sum at 1-8 MiB on this machine


def fit(path):
    """alpha_us, GB/s of one link from a 2-rank ring allgather."""
    (times,) = tables(path).values()
    small, large = min(times), max(times)
    alpha_us = times[small]
    seconds_per_byte = (times[large] - times[small]) * 1e-6 / (large / 2 - small / 2)
    return alpha_us, 1e-9 / seconds_per_byte


def project(tool, op, layout, sizes, local, remote):
    hosts, per_host = LAYOUTS[layout]
    command = [tool, "--hosts", str(hosts), "--ranks-per-host", str(per_host), "--op", op, "--csv",
               "--local", "alpha_us=%g,gbps=%g" % local, "--remote", "alpha_us=%g,gbps=%g" % remote,
               "--gamma-gbps", str(GAMMA_GBPS), "--sizes", ",".join(str(s) for s in sizes)]
    rows = subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()[1:]
    result = {}
    for row in rows:
        size, algorithm, seconds, _busbw, method, _mark = row.split(",")
        result[(algorithm, int(size))] = (float(seconds) * 1e6, method)
    return result, " ".join(command)


def main(directory, tool):
    local, remote = fit(f"{directory}/fit_local.txt"), fit(f"{directory}/fit_remote.txt")
    print(f"model: local alpha {local[0]:.2f} us, {local[1]:.2f} GB/s; remote alpha {remote[0]:.2f} us, "
          f"{remote[1]:.4f} GB/s; gamma {GAMMA_GBPS} GB/s")
    summary = []
    for op in ("allreduce", "broadcast"):
        for layout in LAYOUTS:
            try:
                measured = tables(f"{directory}/{op}_{layout}.txt")
            except FileNotFoundError:
                continue
            measured.pop("auto", None)
            sizes = sorted({size for times in measured.values() for size in times})
            projected, command = project(tool, op, layout, sizes, local, remote)
            print(f"\n## {op}, {layout} ({LAYOUTS[layout][0]} hosts x {LAYOUTS[layout][1]} ranks)\n# {command}")
            print(f"{'algorithm':>20} {'size(B)':>10} {'measured(us)':>13} {'projected(us)':>14} {'error':>7}")
            errors, large_errors = [], []
            for algorithm, times in measured.items():
                for size, measured_us in sorted(times.items()):
                    if (algorithm, size) not in projected:
                        continue
                    projected_us, method = projected[(algorithm, size)]
                    error = projected_us / measured_us - 1
                    errors.append(abs(error))
                    if size >= 32768:
                        large_errors.append(abs(error))
                    print(f"{algorithm:>20} {size:>10} {measured_us:>13.1f} {projected_us:>14.1f} {error:>+7.0%}"
                          f"{'' if method == 'simulated' else '  (' + method + ')'}")
            summary.append((op, layout, errors, large_errors))
    print("\n## |error| per layout: all sizes, and sizes >= 32 KiB")
    print(f"{'op':>10} {'layout':>7} {'n':>4} {'median':>7} {'worst':>7} {'within25%':>9}   {'n':>4} {'median':>7} "
          f"{'worst':>7} {'within25%':>9}")
    for op, layout, errors, large in summary:
        def cells(values):
            if not values:
                return f"{0:>4} {'-':>7} {'-':>7} {'-':>9}"
            inside = sum(1 for value in values if value <= 0.25) / len(values)
            return (f"{len(values):>4} {statistics.median(values):>7.0%} {max(values):>7.0%} {inside:>9.0%}")
        print(f"{op:>10} {layout:>7} {cells(errors)}   {cells(large)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/chorus-scale",
         sys.argv[2] if len(sys.argv) > 2 else "build/tools/chorus-project")
