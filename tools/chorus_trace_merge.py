#!/usr/bin/env python3
"""chorus-trace-merge: the Chrome traces of a job's ranks as one timeline.

    chorus-trace-merge trace.rank*.json -o trace.json

Each rank writes its own file (CHORUS_TRACE, docs/trace.md), with the rank as
the process id and wall-clock timestamps, so merging is putting their events
in one array. A file whose rank was killed may lack its closing bracket or
end in a line cut short: every whole event is kept, the partial line is
dropped and counted.
"""

import argparse
import json
import os
import sys

VERSION = "@VERSION@"  # meson.build writes the release in


def events_of(path):
    """The events of one chorus trace file, and how many lines were unreadable."""
    events, damaged = [], 0
    with open(path, encoding="utf-8") as trace:
        for line in trace:
            line = line.strip()
            if not line.startswith("{"):
                continue  # the array's brackets
            try:
                events.append(json.loads(line.rstrip(",")))
            except json.JSONDecodeError:
                damaged += 1
    return events, damaged


def main(argv=None):
    parser = argparse.ArgumentParser(description="Merge the per-rank Chrome traces of a chorus job into one.")
    parser.add_argument("traces", nargs="+", help="per-rank trace files (CHORUS_TRACE's .rank<N> files)")
    parser.add_argument("-o", "--output", required=True, help="the merged trace to write")
    parser.add_argument("--version", action="version", version=f"chorus-trace-merge {VERSION}")
    args = parser.parse_args(argv)
    # The output's directory is checked before any input is read: a merge of
    # large traces should not end in a traceback about where it could not go.
    directory = os.path.dirname(args.output) or "."
    if os.path.isdir(args.output) or not os.path.isdir(directory) or not os.access(directory, os.W_OK):
        print(f"chorus-trace-merge: -o/--output {args.output}: cannot write a file there", file=sys.stderr)
        return 2
    merged, ranks = [], set()
    for path in args.traces:
        try:
            events, damaged = events_of(path)
        except (OSError, UnicodeDecodeError) as error:
            print(f"chorus-trace-merge: cannot read the trace {path}: {error}", file=sys.stderr)
            return 2
        if not events:
            print(f"chorus-trace-merge: {path} holds no trace events", file=sys.stderr)
            return 1
        if damaged:
            print(f"chorus-trace-merge: {path}: dropped {damaged} unreadable line(s) (a rank killed mid-write?)",
                  file=sys.stderr)
        ranks.update(event.get("pid") for event in events)
        merged.extend(events)
    try:
        with open(args.output, "w", encoding="utf-8") as out:
            json.dump({"traceEvents": merged, "displayTimeUnit": "ms"}, out)
    except OSError as error:
        print(f"chorus-trace-merge: -o/--output {args.output}: {error}", file=sys.stderr)
        return 2
    print(f"chorus-trace-merge: {len(merged)} events of {len(ranks)} rank(s) written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
