#!/usr/bin/env python3
"""Names every test that failed in Meson test logs, with the end of its output.

    scripts/failed-tests.py LOG.json...

CI keeps only the tail of a long run's output, and `meson test
--print-errorlogs` prints a failed test's log where it fails, long before
that tail: a run whose summary says "Fail: 1" must also say, at the end,
which test it was and how it failed. Prints nothing when every test passed;
the exit status is always 0 (the caller decides what a failure means).
"""
import json
import sys

PASSED = {"OK", "SKIP", "EXPECTEDFAIL"}
TAIL_LINES = 60


def failed_tests(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as log:
            for line in log:
                line = line.strip()
                if not line:
                    continue
                try:
                    test = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if test.get("result") not in PASSED:
                    yield test
    except OSError as error:
        print(f"failed-tests.py: cannot read {path}: {error}")


def main(paths):
    for path in paths:
        for test in failed_tests(path):
            output = (test.get("stdout") or "") + (test.get("stderr") or "")
            lines = output.rstrip("\n").splitlines()
            print(f"=== FAILED: {test.get('name')} ({test.get('result')}, exit {test.get('returncode')}, "
                  f"{test.get('duration', 0):.1f} s; from {path})")
            if len(lines) > TAIL_LINES:
                print(f"... ({len(lines) - TAIL_LINES} earlier lines in the log above)")
            for line in lines[-TAIL_LINES:]:
                print("    " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
