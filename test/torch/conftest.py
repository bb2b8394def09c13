"""Runs rank scripts (ranks/*.py) as real multi-process jobs, under chorus-run
or torchrun, with Debian's torch.

The Meson test sets CHORUS_RUN (the launcher) and PYTHONPATH (the package
assembled in the build directory); by hand:
    PYTHONPATH=build/python CHORUS_RUN=build/tools/chorus-run /usr/bin/python3 -m pytest test/torch
"""

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

RANKS = Path(__file__).parent / "ranks"


def _environment(extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(RANKS), env.get("PYTHONPATH")]))
    # A launcher's variables from outside (a CI job under torchrun) must not leak into ours.
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "CHORUS_RANK", "CHORUS_SIZE",
                 "CHORUS_STORE", "CHORUS_JOB_ID"):
        env.pop(name, None)
    env.update(extra or {})
    return env


def _run(command, env, what, timeout):
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, f"{what} failed (exit {completed.returncode}):\n{output}"
    return output


@pytest.fixture
def run_job():
    """run_job(script, ranks, *args, env=None, launcher_args=()): the job's output; fails the test unless
    every rank exits 0. launcher_args: chorus-run's options (--fake-hosts 2,1)."""
    def run(script, ranks, *args, env=None, timeout=600, launcher_args=()):
        launcher = os.environ.get("CHORUS_RUN")
        if not launcher:
            pytest.fail("CHORUS_RUN must name build/tools/chorus-run")
        command = [launcher, "-n", str(ranks), *launcher_args, "--", sys.executable, str(RANKS / script), *args]
        return _run(command, _environment(env), f"{script} {' '.join(args)} at {ranks} ranks", timeout)
    return run


@pytest.fixture
def run_torchrun():
    def run(script, ranks, timeout=300):
        # --redirects 1 --tee 1: torch 1.13's parsing of the default ("0")
        # breaks under Python 3.11 (an IntFlag's zero member no longer
        # iterates); stdout through a log file and teed back works.
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}",
                   "--redirects", "1", "--tee", "1", str(RANKS / script)]
        return _run(command, _environment({}), f"torchrun {script} at {ranks} ranks", timeout)
    return run


@pytest.fixture
def run_mpirun():
    def run(script, ranks, timeout=300):
        mpirun = shutil.which("mpirun")
        if not mpirun:
            pytest.skip("no mpirun (openmpi-bin)")
        # A free port for the store rank 0 hosts (chorus's tcp://, not torch's).
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        env = _environment({"CHORUS_STORE": f"tcp://127.0.0.1:{port}"})
        command = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks), "-x", "PYTHONPATH", "-x",
                   "CHORUS_STORE", sys.executable, str(RANKS / script)]
        return _run(command, env, f"mpirun {script} at {ranks} ranks", timeout)
    return run


def oks(output, word):
    """Each report `word OK ...` of a rank, with the line's prefix ("[rank N] ") kept on the first.

    mpirun and torchrun forward the ranks' output through pipes of their own, and two ranks' lines
    can arrive run together ("mpirun OK 2mpirun OK 2"), so reports are split at each `word OK`."""
    reports = []
    for line in output.splitlines():
        pieces = re.split(f"(?={re.escape(word)} OK)", line)
        for index, piece in enumerate(pieces[1:], start=1):
            reports.append(pieces[0] + piece if index == 1 else piece)
    return reports


def per_rank(output, word):
    """{rank: [the words after `word` on each of that rank's lines]} from chorus-run's "[rank N] " prefixes."""
    found = {}
    for line in output.splitlines():
        if not line.startswith("[rank "):
            continue
        prefix, _, text = line.partition("] ")
        fields = text.split()
        if fields and fields[0] == word:
            found.setdefault(int(prefix[len("[rank "):]), []).append(fields[1:])
    return found
