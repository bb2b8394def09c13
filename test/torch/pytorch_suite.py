"""Runs PyTorch's own distributed test suite, as installed with torch, against
one backend, and writes each test's outcome to a JSON file.

    python pytorch_suite.py --backend chorus --world-size 2 --out chorus-2.json [-k PATTERN ...] [--only FILE]

The suite is torch.testing._internal.distributed.distributed_test's
DistributedTest._DistTestBase: nothing of it is copied here. It reads the
backend's name once, at import, from the BACKEND variable, and gates its
tests on that name ("Only gloo backend supports timeouts"). To judge chorus
as a drop-in for gloo on the CPU, the suite is imported with BACKEND=gloo,
so it runs exactly the tests (and expects exactly the behaviour) it would
for gloo, and every process group it asks for under the name gloo is
created by chorus instead (`--backend chorus`). With `--backend gloo` the
same run uses the real gloo: that is the baseline test_pytorch_suite.py
compares against, measured in the same run.

Each test is one job of WORLD_SIZE processes forked from this one (the
suite's own runner spawns them, which imports torch afresh for every rank
of every test: minutes more on two cores), rendezvousing through a file
(init_method file://).
"""

import argparse
import json
import os
import sys
import tempfile
import time
import unittest


def _parse():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["chorus", "gloo"], required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--out", required=True, help="JSON file: {test name: [outcome, detail]}")
    parser.add_argument("-k", action="append", default=[], help="only tests whose name contains this")
    parser.add_argument("--only", help="only the tests named in this file, one per line")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test (the suite's default is 300)")
    return parser.parse_args()


# Set before torch's testing modules are imported: they read them at import.
if __name__ == "__main__":
    _ARGS = _parse()
    _TEMP = tempfile.mkdtemp(prefix="chorus-pytorch-suite-")
    os.environ.update({
        "BACKEND": "gloo",
        "WORLD_SIZE": str(_ARGS.world_size),
        "TEMP_DIR": _TEMP,
        "INIT_METHOD": f"file://{_TEMP}/init",
        "DISTRIBUTED_TESTS_DEFAULT_TIMEOUT": str(_ARGS.timeout),
        "CHORUS_SUITE_BACKEND": _ARGS.backend,
    })

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing  # noqa: E402

if os.environ.get("CHORUS_SUITE_BACKEND") == "chorus":
    import chorus.torch  # noqa: E402,F401  (registers the backend "chorus")

    def _as_chorus(backend):
        # The suite names gloo (or leaves the default); chorus answers.
        if backend is None:
            return backend
        if str(backend).lower() == "gloo":
            return "chorus"
        return backend

    _init_process_group = dist.init_process_group
    _new_group = dist.new_group

    def _init_as_chorus(*args, **kwargs):
        if args:
            args = (_as_chorus(args[0]),) + tuple(args[1:])
        if "backend" in kwargs:
            kwargs["backend"] = _as_chorus(kwargs["backend"])
        return _init_process_group(*args, **kwargs)

    def _new_group_as_chorus(*args, **kwargs):
        if len(args) >= 3:
            args = tuple(args[:2]) + (_as_chorus(args[2]),) + tuple(args[3:])
        if "backend" in kwargs:
            kwargs["backend"] = _as_chorus(kwargs["backend"])
        return _new_group(*args, **kwargs)

    dist.init_process_group = _init_as_chorus
    dist.new_group = _new_group_as_chorus
    # The suite calls both through `dist.` (looked up at call time); torch's
    # own helpers (new_subgroups) call new_group from inside the module.
    dist.distributed_c10d.new_group = _new_group_as_chorus

from torch.testing._internal.distributed import distributed_test  # noqa: E402
from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402


class TestChorusAsGloo(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        # Forked ranks: torch is imported once, in this process.
        self._start_processes(torch.multiprocessing.get_context("fork").Process)


class _Recorder(unittest.TextTestResult):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}
        self._started = {}

    def _name(self, test):
        return test.id().rsplit(".", 1)[-1]

    def startTest(self, test):
        self._started[self._name(test)] = time.monotonic()
        super().startTest(test)

    def _record(self, test, outcome, detail=""):
        name = self._name(test)
        seconds = round(time.monotonic() - self._started.get(name, time.monotonic()), 2)
        self.outcomes[name] = [outcome, detail[-3000:], seconds]

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", str(reason))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "failed", "unexpected success")


def main():
    loader = unittest.TestLoader()
    names = loader.getTestCaseNames(TestChorusAsGloo)
    if _ARGS.k:
        names = [name for name in names if any(pattern in name for pattern in _ARGS.k)]
    if _ARGS.only:
        with open(_ARGS.only) as only:
            wanted = set(only.read().split())
        names = [name for name in names if name in wanted]
    suite = unittest.TestSuite(TestChorusAsGloo(name) for name in names)
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=1, resultclass=_Recorder)
    result = runner.run(suite)
    with open(_ARGS.out, "w") as out:
        json.dump({"torch": torch.__version__, "backend": _ARGS.backend, "world_size": _ARGS.world_size,
                   "outcomes": result.outcomes}, out, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
