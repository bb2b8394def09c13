#!/usr/bin/python3
"""Reads a `chorus-bench --algo all` output (one table per algorithm, then
`auto`) and prints, per size, the fastest fixed algorithm, what auto took,
and auto's time over the best (1.00 = auto picked the best; the issue 5
target is <= 1.05).

    chorus-bench --ranks 4 --op allreduce --algo all --rounds 5 > out.txt
    benchmarks/auto_vs_best.py out.txt

With rank 0's CHORUS_LOG=debug lines as a second file, it also prints the
fixed algorithm auto chose per size and that algorithm's time (from its own
fixed table, measured interleaved with the others) over the best: the
choice's quality without the second dose of noise that auto's own row adds.

    CHORUS_LOG=debug chorus-bench ... --algo all > out.txt 2> log.txt
    benchmarks/auto_vs_best.py out.txt log.txt
"""
import re
import sys


def tables(path):
    """{algorithm: {size: time_us}}"""
    result, current = {}, None
    for line in open(path):
        if line.startswith("# chorus-bench:") and "algorithm" in line:
            current = line.split("algorithm", 1)[1].split(",")[0].strip()
            result[current] = {}
        elif current and line.strip() and not line.startswith("#"):
            fields = line.split()
            if len(fields) >= 8 and fields[5] != "unsupported":
                result[current][int(fields[0])] = float(fields[5])
    return result


def choices(log_path):
    """{size: algorithm auto chose}, from rank 0's debug log."""
    found = {}
    pattern = re.compile(r"rank 0 DEBUG\] \w+: auto chose (\w+) for (\d+) bytes")
    for line in open(log_path, errors="replace"):
        match = pattern.search(line)
        if match:
            found.setdefault(int(match.group(2)), match.group(1))
    return found


def main(path, log_path=None):
    found = tables(path)
    auto = found.pop("auto", None)
    if not auto or not found:
        sys.exit(f"{path}: needs the tables of --algo all (fixed algorithms and auto)")
    chosen = choices(log_path) if log_path else {}
    header = f"{'size(B)':>10} {'best fixed':>20} {'time(us)':>10} {'auto(us)':>10} {'auto/best':>9}"
    if chosen:
        header += f" {'auto chose':>20} {'chosen/best':>11}"
    print(header)
    worst = worst_choice = 0.0
    for size in sorted(auto):
        candidates = [(times[size], name) for name, times in found.items() if size in times]
        if not candidates:
            continue
        best_time, best_name = min(candidates)
        ratio = auto[size] / best_time if best_time > 0 else 1.0
        worst = max(worst, ratio)
        row = f"{size:>10} {best_name:>20} {best_time:>10.1f} {auto[size]:>10.1f} {ratio:>9.2f}"
        name = chosen.get(size)
        if name in found and size in found[name]:
            choice_ratio = found[name][size] / best_time if best_time > 0 else 1.0
            worst_choice = max(worst_choice, choice_ratio)
            row += f" {name:>20} {choice_ratio:>11.2f}"
        print(row)
    print(f"worst auto/best: {worst:.2f}")
    if chosen:
        print(f"worst chosen/best: {worst_choice:.2f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/dev/stdin", sys.argv[2] if len(sys.argv) > 2 else None)
