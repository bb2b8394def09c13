#!/usr/bin/python3
"""Horovod's own tests against chorus's Horovod APIs, by hand: test/parallel/test_torch.py against
chorus.torch.hvd, test_tensorflow.py and test_tensorflow2_keras.py against chorus.tensorflow.

Horovod's tests are not ours to copy into the repository: this fetches them (a pinned commit of
github.com/horovod/horovod, or a checkout you name) and runs each test as its own 2-rank job under
chorus-run (or, with --one-job, the whole file in one job, as Horovod's CI runs it), through a shim
package `horovod` whose modules only re-export chorus's:

    horovod.torch                 from chorus.torch.hvd import *
    horovod.tensorflow            from chorus.tensorflow import *
    horovod.tensorflow.keras      from chorus.tensorflow.keras import *   (and horovod.keras)
    horovod.tensorflow.util       _executing_eagerly, which Horovod's tests import from there

Run it with the Python that has the framework: Debian's for torch 1.13, the torch 2.x / TensorFlow
environment (build-torch2/venv) for the rest:

    /usr/bin/python3 scripts/horovod-suite.py --build build
    build-torch2/venv/bin/python scripts/horovod-suite.py --build build-torch2 --file test_tensorflow.py
    build-torch2/venv/bin/python scripts/horovod-suite.py --build build-torch2 --file test_tensorflow2_keras.py

Prints one line per test (pass, fail, skip, timeout) and the counts; with --show-failures, the failing
tests' output. test_tensorflow2_keras.py needs `parameterized` (pip-installed, pinned, into the work
directory when the Python lacks it). Exit status 0 always: it measures, it does not gate (our own tests
in test/torch and test/tensorflow do that).
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HOROVOD_URL = "https://github.com/horovod/horovod.git"
HOROVOD_COMMIT = "2626dc87a3a8eb8fb7d2216198ce45bce0f9e65a"
PARAMETERIZED = "parameterized==0.9.0"

# The helpers Horovod's tests import from its test/utils/common.py, written here: that module pulls in
# Horovod's runner and mock.
COMMON = """
import contextlib, os, shutil, tempfile


def mpi_env_rank_and_size():
    for rank, size in (("PMI_RANK", "PMI_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")):
        if rank in os.environ and size in os.environ:
            return int(os.environ[rank]), int(os.environ[size])
    return 0, 1


def skip_or_fail_gpu_test(test, message):
    if int(os.environ.get("HOROVOD_TEST_GPU", 0)):
        test.fail(message)
    else:
        test.skipTest(message)


@contextlib.contextmanager
def temppath():
    directory = tempfile.mkdtemp()
    try:
        yield os.path.join(directory, "temp_test_file")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
"""

# horovod.common.util's version helper that test_tensorflow2_keras.py imports (a test helper of Horovod's,
# not part of the API chorus mirrors).
COMMON_UTIL = """
from packaging import version


def is_version_greater_equal_than(ver, target):
    return version.parse(ver) >= version.parse(target)
"""

# A pytest plugin (the test directory's conftest.py) that writes each test's outcomes on rank 0, one per
# mode under pytest 9's subtests (test_tensorflow.py runs each test in graph and eager mode), so that a
# test whose every mode was skipped counts as skipped and one with a failed mode as failed, in one job too.
OUTCOMES_PLUGIN = """
import json, os


def pytest_runtest_logreport(report):
    path = os.environ.get("CHORUS_SUITE_OUTCOMES")
    if not path or os.environ.get("HOROVOD_RANK", "0") != "0":
        return
    if report.when == "call" or report.outcome != "passed":
        mode = getattr(report, "context", None)
        with open(path, "a") as out:
            out.write(json.dumps({"test": report.nodeid.split("::")[-1], "outcome": report.outcome,
                                  "subtest": mode is not None}) + "\\n")
"""

SHIM = {
    "horovod/__init__.py": "",
    "horovod/torch/__init__.py": "from chorus.torch.hvd import *  # noqa: F401,F403\n",
    "horovod/tensorflow/__init__.py": "from chorus.tensorflow import *  # noqa: F401,F403\n",
    "horovod/tensorflow/util.py": "from chorus.tensorflow.util import _executing_eagerly  # noqa: F401\n",
    "horovod/tensorflow/keras/__init__.py": "from chorus.tensorflow.keras import *  # noqa: F401,F403\n",
    "horovod/keras/__init__.py": "from chorus.tensorflow.keras import *  # noqa: F401,F403\n",
    "horovod/common/__init__.py": "",
    "horovod/common/util.py": COMMON_UTIL,
}

# Per file: the test class, and the other files of Horovod's test/parallel it imports.
FILES = {
    "test_torch.py": ("TorchTests", []),
    "test_tensorflow.py": ("TensorFlowTests", ["base_test_tensorflow.py"]),
    "test_tensorflow2_keras.py": ("Tf2KerasTests", []),
}


def horovod_checkout(given, workdir):
    if given:
        return Path(given)
    target = workdir / "horovod"
    subprocess.run(["git", "init", "-q", str(target)], check=True)
    subprocess.run(["git", "-C", str(target), "fetch", "-q", "--depth", "1", HOROVOD_URL, HOROVOD_COMMIT], check=True)
    subprocess.run(["git", "-C", str(target), "checkout", "-q", "FETCH_HEAD"], check=True)
    return target


def read_source(checkout, source):
    """A file of the checkout (a git dir without a work tree works too)."""
    path = checkout / source
    if path.exists():
        return path.read_text()
    return subprocess.run(["git", f"--git-dir={checkout}", "show", f"HEAD:{source}"], check=True,
                          capture_output=True, text=True).stdout


def test_files(checkout, workdir, name):
    out = workdir / "parallel"
    out.mkdir(exist_ok=True)
    for file in [name] + FILES[name][1]:
        (out / file).write_text(read_source(checkout, f"test/parallel/{file}"))
    (out / "common.py").write_text(COMMON)
    (out / "conftest.py").write_text(OUTCOMES_PLUGIN)
    return out / name


def shim(workdir):
    root = workdir / "shim"
    for relative, text in SHIM.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def extra_packages(workdir, name):
    """A directory with what the file needs and this Python lacks (pip-installed, pinned), or None."""
    if name != "test_tensorflow2_keras.py":
        return None
    try:
        import parameterized  # noqa: F401
        return None
    except ImportError:
        target = workdir / "packages"
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--target", str(target), PARAMETERIZED], check=True)
        return target


def test_names(path, cls, env, chorus_run):
    """The file's tests as pytest names them (parameterized ones expanded). Collected in a 1-rank job:
    test_tensorflow2_keras.py's test class calls hvd.init() when it is made."""
    listed = subprocess.run([str(chorus_run), "-n", "1", "--", sys.executable, "-m", "pytest", "--collect-only", "-q",
                             "-p", "no:cacheprovider", str(path)], env=env, capture_output=True, text=True,
                            cwd=path.parent)
    names = re.findall(rf"::{cls}::(test_\w+)", listed.stdout)
    if not names:
        raise SystemExit(f"horovod-suite: collected no tests from {path.name}:\n{listed.stdout}\n{listed.stderr}")
    return names


def run_job(selection, args, path, env, timeout):
    # As horovodrun --gloo starts them: HOROVOD_RANK and HOROVOD_SIZE set,
    # which makes test_torch.py's tearDown run hvd.barrier() and hvd.shutdown().
    pytest = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-rs", *selection]
    command = [str(args.chorus_run), "-n", str(args.ranks), "--", "sh", "-c",
               'HOROVOD_RANK=$CHORUS_RANK HOROVOD_SIZE=$CHORUS_SIZE exec "$@"', "rank", *pytest]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, cwd=path.parent)
    except subprocess.TimeoutExpired as expired:
        output = expired.stdout or ""
        return None, output.decode(errors="replace") if isinstance(output, bytes) else output
    return done.returncode, done.stdout + done.stderr


def outcomes_of(path):
    """{test: outcome}: failed if any of its reports failed, skipped if every mode it ran was skipped."""
    reports = {}
    if path.exists():
        for line in path.read_text().splitlines():
            record = json.loads(line)
            reports.setdefault(record["test"], []).append(record)
    outcomes = {}
    for test, records in reports.items():
        modes = [r for r in records if r["subtest"]] or records
        if any(r["outcome"] == "failed" for r in records):
            outcomes[test] = "fail"
        elif all(r["outcome"] == "skipped" for r in modes):
            outcomes[test] = "skip"
        else:
            outcomes[test] = "pass"
    return outcomes


def run_one(name, args, path, env):
    cls = FILES[args.file][0]
    record = path.parent / f"outcomes-{name}.jsonl"
    status, output = run_job([f"{path}::{cls}::{name}"], args, path, dict(env, CHORUS_SUITE_OUTCOMES=str(record)),
                             args.timeout)
    if status is None:
        return name, "timeout", output
    outcome = outcomes_of(record).get(name, "fail")
    return name, "fail" if status != 0 and outcome != "fail" else outcome, output


def one_job(names, args, path, env):
    """Every test in one job, each one's outcome as rank 0 reports it; a test that never reported (the job
    died or timed out before it) is a timeout."""
    cls = FILES[args.file][0]
    record = path.parent / "outcomes-one-job.jsonl"
    _, output = run_job([f"{path}::{cls}::{name}" for name in names], args, path,
                        dict(env, CHORUS_SUITE_OUTCOMES=str(record)), args.timeout * len(names))
    outcomes = outcomes_of(record)
    return [(name, outcomes.get(name, "timeout"), output) for name in names]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--file", default="test_torch.py", choices=sorted(FILES))
    parser.add_argument("--horovod", help="a horovod checkout or git dir (default: fetch the pinned commit)")
    parser.add_argument("-k", help="only tests whose name contains this")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=int, default=180)
    parser.add_argument("--one-job", action="store_true", help="every test in one job, as Horovod's CI runs them")
    parser.add_argument("--show-failures", action="store_true")
    parser.add_argument("--show-output", action="store_true", help="every test's output, passed and skipped too")
    args = parser.parse_args()
    build = Path(args.build).resolve()
    args.chorus_run = build / "tools" / "chorus-run"
    with tempfile.TemporaryDirectory(prefix="horovod-suite-") as temp:
        workdir = Path(temp)
        path = test_files(horovod_checkout(args.horovod, workdir), workdir, args.file)
        env = dict(os.environ)
        paths = [str(shim(workdir)), str(build / "python"), str(path.parent)]
        packages = extra_packages(workdir, args.file)
        if packages:
            paths.append(str(packages))
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        for variable in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "CHORUS_STORE"):
            env.pop(variable, None)
        names = [n for n in test_names(path, FILES[args.file][0], env, args.chorus_run) if not args.k or args.k in n]
        results = []
        if args.one_job:
            for name, outcome, output in one_job(names, args, path, env):
                print(f"{outcome:8} {name}", flush=True)
                results.append((name, outcome, output))
        else:
            with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
                for name, outcome, output in pool.map(lambda n: run_one(n, args, path, env), names):
                    print(f"{outcome:8} {name}", flush=True)
                    results.append((name, outcome, output))
        counts = {k: sum(1 for _, o, _ in results if o == k) for k in ("pass", "fail", "timeout", "skip")}
        run = counts["pass"] + counts["fail"] + counts["timeout"]
        print(f"# {args.file}: {counts['pass']} of {run} non-skipped tests passed "
              f"({100.0 * counts['pass'] / max(run, 1):.1f}%); {counts['fail']} failed, {counts['timeout']} timed "
              f"out, {counts['skip']} skipped{' (one job)' if args.one_job else ''}")
        if args.show_failures or args.show_output:
            shown = set()
            for name, outcome, output in results:
                if (args.show_output or outcome in ("fail", "timeout")) and output not in shown:
                    shown.add(output)
                    print(f"\n======== {name} ({outcome})\n{output[-6000:]}")


if __name__ == "__main__":
    main()
