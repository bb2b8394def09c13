"""The console script chorus-run of a wheel (pip install): it becomes the
chorus-run program the wheel carries beside this file, with the same
arguments, so its exit status is the command's.

A Meson install has no such copy: its chorus-run is <prefix>/bin/chorus-run.
"""

import os
import sys

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chorus-run")


def main():
    if not os.access(PROGRAM, os.X_OK):
        sys.exit(f"chorus-run: {PROGRAM} is missing: this chorus was not installed from a wheel "
                 "(a Meson install has <prefix>/bin/chorus-run)")
    # Flushed first: exec drops what Python still buffers.
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(PROGRAM, [PROGRAM, *sys.argv[1:]])
