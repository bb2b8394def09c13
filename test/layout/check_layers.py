#!/usr/bin/env python3
"""Fails when a file of algorithms/ includes a header of a part above its own.

algorithms/ is layered, bottom to top (docs/architecture.md):
  model/          the call, the Plan and its steps, the cost model
  plans/          flat Plans, a folder per collective
  composition/    Plans made of Plans (hierarchical)
  execution/      the Communicator, the Executor, waiting, the candidate seam, wrappers
  shared_memory/  the board and the mapped allreduce: candidates of their own
  selection/      the Plan table, the candidate registry, choosing
  run.h, run.cc   the layer's entry point
A file may include its own part and any part below it, never one above.
Usage: check_layers.py SOURCE_ROOT
"""
import pathlib
import re
import sys

LAYERS = ["model", "plans", "composition", "execution", "shared_memory", "selection", ""]
INCLUDE = re.compile(r'^\s*#\s*include\s+"algorithms/([^"]+)"', re.M)


def layer_of(relative: str) -> int:
    parts = relative.split("/")
    folder = parts[0] if len(parts) > 1 else ""
    if folder not in LAYERS:
        raise SystemExit(f"algorithms/{relative}: in a folder no layer names ({folder}); add it to {__file__}")
    return LAYERS.index(folder)


def main() -> int:
    root = pathlib.Path(sys.argv[1]) / "algorithms"
    upward = []
    files = sorted(p for p in root.rglob("*") if p.suffix in (".h", ".cc"))
    for path in files:
        relative = path.relative_to(root).as_posix()
        own = layer_of(relative)
        for included in INCLUDE.findall(path.read_text()):
            if layer_of(included) > own:
                upward.append(f"algorithms/{relative} includes algorithms/{included}, a part above its own")
    for line in upward:
        print(line)
    print(f"{len(files)} files of algorithms/ read, {len(upward)} upward includes")
    return 1 if upward else 0


if __name__ == "__main__":
    sys.exit(main())
