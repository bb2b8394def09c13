#!/usr/bin/python3
"""Plots busbw against message size, one line per library/algorithm, from the
tables compare.sh saves (OUT/LIB.OP.txt in chorus-bench's row format; files
with several tables, like Gloo's per-algorithm ones, give one line each).

    /usr/bin/python3 benchmarks/peers/plot.py OUT_DIR allreduce PNG_FILE ["title"]   # Debian python3-matplotlib
"""
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_tables(path):
    """Yields (label, [(bytes, busbw)]) for each table in a saved output."""
    label, rows = None, []
    for line in path.read_text().splitlines():
        if line.startswith("# ") and "algorithm" in line:
            if label and rows:
                yield label, rows
            algorithm = line.split("algorithm", 1)[1].split(",")[0].strip()
            label, rows = f"{path.name.split('.')[0]} {algorithm}", []
        elif line and not line.startswith("#"):
            fields = line.split()
            if len(fields) >= 8 and fields[5] != "unsupported" and int(fields[0]) > 0:
                rows.append((int(fields[0]), float(fields[7])))
    if label and rows:
        yield label, rows


def main():
    out_dir, operation, png = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    figure, axes = plt.subplots(figsize=(8, 5))
    for path in sorted(out_dir.glob(f"*.{operation}.txt")):
        for label, rows in read_tables(path):
            sizes, busbw = zip(*rows)
            axes.plot(sizes, busbw, marker="o", markersize=3, label=label,
                      linewidth=2.5 if label.startswith("chorus") else 1.2)
    axes.set_xscale("log", base=2)
    axes.set_xlabel("message size (bytes)")
    axes.set_ylabel("busbw (GB/s)")
    title = sys.argv[4] if len(sys.argv) > 4 else out_dir.name
    axes.set_title(f"{operation}: busbw vs size, {title}")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(png, dpi=110)


if __name__ == "__main__":
    main()
