#!/usr/bin/env python3
"""Names every test that failed in Meson test logs, with why it failed.

    scripts/failed-tests.py LOG.json...

CI keeps only the last ~12 KB of a long run's output, and `meson test
--print-errorlogs` prints a failed test's log where it fails, long before
that tail: a run whose summary says "Fail: 1" must also say, at the end,
which test it was and how it failed. Per failed test this prints, within a
fixed budget and most important last: the end of its stdout, the end of its
stderr (repeated warnings folded into one line with a count), and every
failure a test framework reported (Catch2's "FAILED:" blocks, pytest's "E "
lines and its short summary, assertion messages), each cut short, the first first. Prints
nothing when every test passed; the exit status is always 0 (the caller
decides what a failure means).
"""
import json
import re
import sys

PASSED = {"OK", "SKIP", "EXPECTEDFAIL"}
STDOUT_BUDGET = 2500     # characters of each failed test's stdout tail
STDERR_BUDGET = 1200     # characters of its stderr tail, repeats folded
FAILURES_BUDGET = 5000   # characters of the failures a framework reported
LINE_LIMIT = 400         # one line never takes more than this
FAILURE_LINES = 14       # lines kept of one Catch2 "FAILED:" block

ANSI_CODES = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
TIMESTAMP = re.compile(r"^\S*\d{4}-\d\d-\d\dT[\d:.]+Z\s*")


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


def cut(line):
    return line if len(line) <= LINE_LIMIT else line[:LINE_LIMIT] + " [...]"


def tail(lines, budget):
    """The last lines that fit in `budget` characters, oldest first."""
    kept, used = [], 0
    for line in reversed(lines):
        line = cut(line)
        if used + len(line) + 1 > budget:
            kept.append(f"[... {len(lines) - len(kept)} earlier lines]")
            break
        kept.append(line)
        used += len(line) + 1
    return list(reversed(kept))


def fold_repeats(lines):
    """Lines equal but for a leading timestamp become one, with a count."""
    order, counts = [], {}
    for line in lines:
        key = TIMESTAMP.sub("", line)
        if key not in counts:
            order.append(key)
            counts[key] = 0
        counts[key] += 1
    return [key if counts[key] == 1 else f"{key}  [x{counts[key]}]" for key in order]


def reported_failures(lines):
    """The failures a test framework spelled out, each a few lines long."""
    blocks = []
    for index, line in enumerate(lines):
        if re.search(r":\s*FAILED:\s*$", line):  # Catch2: "file:line: FAILED:" then the check and its expansion
            block = lines[max(0, index - 1):index + FAILURE_LINES]
            blocks.append([cut(text) for text in block])
        elif re.match(r"^(E\s{2,}|FAILED |ERROR |AssertionError|Traceback)", line):  # pytest and Python
            blocks.append([cut(line)])
    return blocks


def report(test, path):
    # Catch2 colours its output where it believes a terminal reads it (the
    # Soft-RoCE VM's console): the codes would defeat the patterns below.
    stdout = ANSI_CODES.sub("", test.get("stdout") or "").rstrip("\n").splitlines()
    stderr = ANSI_CODES.sub("", test.get("stderr") or "").rstrip("\n").splitlines()
    title = (f"{test.get('name')} ({test.get('result')}, exit {test.get('returncode')}, "
             f"{test.get('duration', 0):.1f} s; from {path})")
    print(f"=== FAILED: {title}")
    if stdout:
        print("--- the end of its stdout:")
        for line in tail(stdout, STDOUT_BUDGET):
            print("    " + line)
    if stderr:
        print("--- the end of its stderr (repeats folded):")
        for line in tail(fold_repeats(stderr), STDERR_BUDGET):
            print("    " + line)
    blocks = reported_failures(stdout + stderr)
    if blocks:
        print(f"--- the {len(blocks)} failure(s) it reported (the first that fit):")
        kept, used = [], 0
        for block in blocks:
            size = sum(len(line) + 1 for line in block)
            if used + size > FAILURES_BUDGET:
                break
            kept.append(block)
            used += size
        for block in kept:
            for line in block:
                print("    " + line)
            print("    ..")
    print(f"=== that was: {title}")


def main(paths):
    for path in paths:
        for test in failed_tests(path):
            report(test, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
