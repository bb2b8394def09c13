"""Runs rank scripts (ranks/*.py) as real multi-process jobs under chorus-run, with the TensorFlow of
the Python running pytest (the torch 2.x environment, scripts/torch2-env.sh).

The Meson test sets CHORUS_RUN and PYTHONPATH; by hand:
    PYTHONPATH=build-torch2/python CHORUS_RUN=build-torch2/tools/chorus-run \\
        build-torch2/venv/bin/python -m pytest test/tensorflow
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

RANKS = Path(__file__).parent / "ranks"


@pytest.fixture
def run_job():
    """run_job(script, ranks, env=None, launcher_args=()): (exit status, output) of the job."""
    def run(script, ranks, env=None, launcher_args=(), timeout=300):
        launcher = os.environ.get("CHORUS_RUN")
        if not launcher:
            pytest.fail("CHORUS_RUN must name build-torch2/tools/chorus-run")
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(RANKS), environment.get("PYTHONPATH")]))
        for name in ("CHORUS_RANK", "CHORUS_SIZE", "CHORUS_STORE", "CHORUS_JOB_ID", "RANK", "WORLD_SIZE"):
            environment.pop(name, None)
        environment.update(env or {})
        command = [launcher, "-n", str(ranks), *launcher_args, "--", sys.executable, str(RANKS / script)]
        completed = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=timeout)
        return completed.returncode, completed.stdout + completed.stderr
    return run


def oks(output, name):
    return [line for line in output.splitlines() if f"{name} OK" in line]
