"""Runs rank scripts (ranks/*.py) as real multi-process jobs under chorus-run.

The Meson test sets CHORUS_RUN (the launcher) and PYTHONPATH (the package
assembled in the build directory); by hand:
    PYTHONPATH=build/python CHORUS_RUN=build/tools/chorus-run python3 -m pytest test/python
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

RANKS = Path(__file__).parent / "ranks"


@pytest.fixture
def run_job():
    def run(script, ranks, *, transport=None, timeout=300, args=(), env_extra=None):
        launcher = os.environ.get("CHORUS_RUN")
        if not launcher:
            pytest.fail("CHORUS_RUN must name build/tools/chorus-run")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(RANKS), env.get("PYTHONPATH")]))
        if transport:
            env["CHORUS_TRANSPORT"] = transport
        env.update(env_extra or {})
        completed = subprocess.run([launcher, "-n", str(ranks), "--", sys.executable, str(RANKS / script), *args],
                                   env=env, capture_output=True, text=True, timeout=timeout)
        output = completed.stdout + completed.stderr
        assert completed.returncode == 0, f"{script} at {ranks} ranks failed:\n{output}"
        return output
    return run


def oks(output, word):
    """Lines in which a rank reported `word OK`."""
    return [line for line in output.splitlines() if f"{word} OK" in line]
