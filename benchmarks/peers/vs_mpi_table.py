#!/usr/bin/python3
"""Prints the tables of a vs_mpi.sh run from the directory it saved them in.

vs_mpi.sh appends every run of every library to RANKS.OP.LIBRARY.txt (rows in
chorus-bench's format) and writes its settings to `settings`. Per rank count
and collective this prints one markdown table: each library's time per call
(µs; the best of its interleaved runs, each the median of the rounds) and
chorus / best MPI (< 1: chorus faster), then the wrong elements and failed
runs, if any.

    benchmarks/peers/vs_mpi_table.py DIR
"""
import collections
import glob
import math
import os
import re
import sys

NAMES = {"chorus": "chorus", "openmpi": "Open MPI", "mpich": "MPICH", "impi": "Intel MPI"}
OPS = ["allreduce", "allreduce_in_place", "broadcast", "allgather", "reduce_scatter", "alltoall", "barrier"]
DESCRIPTION = {
    "allreduce": "allreduce float32 sum, out of place",
    "allreduce_in_place": "allreduce float32 sum, in place (chorus-bench --in-place; MPI_IN_PLACE)",
    "broadcast": "broadcast float32, root 0",
    "allgather": "allgather float32 (size: the gathered total)",
    "reduce_scatter": "reduce_scatter float32 sum (MPI_Reduce_scatter_block; size: the whole input)",
    "alltoall": "alltoall float32 (size: one rank's whole buffer)",
    "barrier": "barrier",
}


class Runs:
    def __init__(self):
        self.best = {}  # bytes -> µs, the best over the runs
        self.wrong = 0
        self.failed = 0
        self.library = ""  # the MPI library's version line


def read(path):
    runs = Runs()
    for line in open(path, errors="replace"):
        if line.startswith("# MPI library:"):
            runs.library = " ".join(line.split(":", 1)[1].split())
        elif line.startswith("# FAILED"):
            runs.failed += 1
        fields = line.split()
        if not fields or line.startswith("#") or not fields[0].isdigit() or len(fields) < 6:
            continue
        if fields[5] == "unsupported":
            continue
        size, time_us = int(fields[0]), float(fields[5])
        if len(fields) >= 9 and fields[8].isdigit():
            runs.wrong += int(fields[8])
        runs.best[size] = min(time_us, runs.best.get(size, math.inf))
    return runs


def size_text(size):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def time_text(us):
    return f"{us:,.0f}" if us >= 1000 else f"{us:.2f}" if us < 100 else f"{us:.1f}"


def main(directory):
    settings = {}
    settings_path = os.path.join(directory, "settings")
    if os.path.exists(settings_path):
        for line in open(settings_path):
            key, _, value = line.rstrip("\n").partition("=")
            settings[key] = value
    tables = collections.defaultdict(dict)  # (ranks, op) -> library -> Runs
    for path in glob.glob(os.path.join(directory, "*.*.*.txt")):
        ranks, op, library, _ = os.path.basename(path).split(".")
        tables[(int(ranks), op)][library] = read(path)
    if not tables:
        sys.exit(f"vs_mpi_table.py: no tables in {directory}")
    order = [name for name in settings.get("libraries", "chorus openmpi mpich impi").split() if name in NAMES]
    mpis = [name for name in order if name != "chorus"]

    versions = {}
    for runs_by_library in tables.values():
        for library, runs in runs_by_library.items():
            if runs.library:
                versions.setdefault(library, runs.library)
    timing = ("each call alone, after a barrier (--barrier)" if settings.get("barrier") == "1"
              else "calls back to back, no barrier between them")
    if settings.get("rewrite_input") == "1":
        timing += ", each call's input written afresh before it (--rewrite-input, timed)"
    print(f"# chorus: {settings.get('chorus_version', '?')}; "
          + "; ".join(f"{NAMES[m]}: {versions.get(m, '?')}" for m in mpis))
    print(f"# Time per call in µs, timed {timing}: the median of {settings.get('rounds', '?')} rounds of the "
          f"slowest rank's mean, the best of {settings.get('repeats', '?')} runs interleaved per "
          f"{settings.get('interleave', '?')}; every run --check'ed. chorus / best MPI < 1: chorus faster.")
    problems = 0
    for ranks, op in sorted(tables, key=lambda key: (key[0], OPS.index(key[1]) if key[1] in OPS else 99)):
        libraries = tables[(ranks, op)]
        chorus = libraries.get("chorus", Runs())
        present = [m for m in mpis if m in libraries]
        print(f"\n## {DESCRIPTION.get(op, op)}, {ranks} ranks, one host\n")
        sizes = sorted(set(chorus.best).union(*(libraries[m].best for m in present)))
        if not any(size or op == "barrier" for size in sizes):
            print(f"(no rows: no size gave each of the {ranks} ranks a block of at least 4 bytes)")
            continue
        print("| size | " + " | ".join(NAMES[name] for name in ["chorus"] + present) + " | best MPI | chorus / best MPI |")
        print("|---:|" + "---:|" * (len(present) + 1) + "---|---:|")
        ratios = []
        for size in sizes:
            if size == 0 and op != "barrier":
                continue  # a block of nothing (allgather of 8 B over 4 ranks, say)
            cells = [time_text(libraries[name].best[size]) if size in libraries[name].best else "-"
                     for name in ["chorus"] + present]
            measured = [(libraries[m].best[size], m) for m in present if size in libraries[m].best]
            best_cell = ratio_cell = "-"
            if measured:
                best_time, best_name = min(measured)
                best_cell = NAMES[best_name]
                if size in chorus.best and best_time > 0:
                    ratio = chorus.best[size] / best_time
                    ratios.append(ratio)
                    ratio_cell = f"{ratio:.2f}"
            label = "-" if op == "barrier" else size_text(size)
            print(f"| {label} | " + " | ".join(cells) + f" | {best_cell} | {ratio_cell} |")
        if ratios:
            print(f"\nchorus / best MPI: {min(ratios):.2f}-{max(ratios):.2f}, geometric mean "
                  f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f} over {len(ratios)} sizes")
        for name in ["chorus"] + present:
            runs = libraries[name]
            if runs.wrong or runs.failed:
                problems += 1
                print(f"**{NAMES[name]}: {runs.wrong} wrong elements, {runs.failed} failed runs**")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
