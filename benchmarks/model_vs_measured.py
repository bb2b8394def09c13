#!/usr/bin/python3
"""Scores the cost model against measured times without measuring again.

Reads one or more `chorus-bench --algo all` runs (the tables, and rank 0's
CHORUS_LOG=debug lines with the link models the job measured), asks
chorus-project what `auto` would choose with each run's own link model
(the library's formulas, `--method formula`), and prints per size the
choice, its measured time over the best fixed algorithm's of the same run,
and the worst over all runs. A change to a cost formula is checked against
every recorded run by rebuilding chorus-project and running this again.

    CHORUS_LOG=debug chorus-bench --ranks 4 --op allreduce --algo all ... > run1.txt 2> run1.log
    benchmarks/model_vs_measured.py --ranks-per-host 4 run1.txt run1.log [run2.txt run2.log ...]
"""
import argparse
import csv
import io
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from auto_vs_best import tables  # noqa: E402

LINK_MODELS = re.compile(r"link models: local ([0-9.e+-]+) us, ([0-9.e+-]+) GB/s \([^)]*\); "
                         r"remote ([0-9.e+-]+) us, ([0-9.e+-]+) GB/s")


def link_models(log_path):
    for line in open(log_path, errors="replace"):
        match = LINK_MODELS.search(line)
        if match:
            return [float(value) for value in match.groups()]
    sys.exit(f"{log_path}: no 'link models:' line (run with CHORUS_LOG=debug or info)")


def predictions(project, args, models, sizes, op):
    local_alpha, local_gbps, remote_alpha, remote_gbps = models
    command = [project, "--hosts", str(args.hosts), "--ranks-per-host", str(args.ranks_per_host),
               "--local", f"alpha_us={local_alpha},gbps={local_gbps}",
               "--remote", f"alpha_us={remote_alpha},gbps={remote_gbps}",
               "--gamma-gbps", str(args.gamma_gbps), "--op", op, "--method", "formula", "--csv", "--sizes", ",".join(str(size) for size in sizes)]
    if args.step_us is not None:
        command += ["--step-us", args.step_us]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    chosen, predicted = {}, {}
    for row in csv.DictReader(io.StringIO(output)):
        size = int(row["bytes"])
        predicted.setdefault(size, {})[row["algorithm"]] = float(row["seconds"]) * 1e6
        if "auto" in row["mark"]:
            chosen[size] = row["algorithm"]
    return chosen, predicted


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--project", default="build/tools/chorus-project")
    parser.add_argument("--hosts", type=int, default=1)
    parser.add_argument("--ranks-per-host", type=int, required=True)
    parser.add_argument("--op", default="allreduce")
    # What the library's auto assumes (CostModel::gamma_seconds_per_byte in
    # algorithms/model/cost_model.h); chorus-project's own default models a rank
    # with a core to itself.
    parser.add_argument("--gamma-gbps", type=float, default=5.0)
    parser.add_argument("--step-us", help="the executor's step (chorus-project's --step-us; default: the library's)")
    parser.add_argument("--show-predicted", action="store_true", help="also print each algorithm's predicted time")
    parser.add_argument("runs", nargs="+", help="pairs of chorus-bench output and its CHORUS_LOG=debug log")
    args = parser.parse_args()
    if len(args.runs) % 2:
        sys.exit("give runs as pairs: OUTPUT LOG")
    worst = {}
    for index in range(0, len(args.runs), 2):
        out_path, log_path = args.runs[index], args.runs[index + 1]
        measured = tables(out_path)
        measured.pop("auto", None)
        sizes = sorted({size for times in measured.values() for size in times})
        models = link_models(log_path)
        chosen, predicted = predictions(args.project, args, models, sizes, args.op)
        print(f"# {out_path}: local {models[0]:.2f} us, {models[1]:.2f} GB/s; remote {models[2]:.2f} us, "
              f"{models[3]:.2f} GB/s")
        print(f"{'size(B)':>10} {'best fixed':>20} {'time(us)':>10} {'model chose':>20} {'chosen/best':>11}")
        for size in sizes:
            candidates = [(times[size], name) for name, times in measured.items() if size in times]
            best_time, best_name = min(candidates)
            choice = chosen.get(size, "?")
            ratio = measured.get(choice, {}).get(size, float("nan")) / best_time
            worst[size] = max(worst.get(size, 0.0), ratio)
            line = f"{size:>10} {best_name:>20} {best_time:>10.2f} {choice:>20} {ratio:>11.2f}"
            if args.show_predicted:
                line += "  " + " ".join(f"{name}={us:.1f}" for name, us in sorted(predicted.get(size, {}).items()))
            print(line)
    print("# worst chosen/best per size over all runs:")
    print("  " + ", ".join(f"{size}: {ratio:.2f}" for size, ratio in sorted(worst.items())))
    print(f"# worst overall: {max(worst.values()):.2f}; sizes over 1.05: "
          f"{sum(1 for ratio in worst.values() if ratio > 1.05)} of {len(worst)}")


if __name__ == "__main__":
    main()
