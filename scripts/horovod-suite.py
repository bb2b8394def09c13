#!/usr/bin/python3
"""Horovod's own test/parallel/test_torch.py against chorus.torch.hvd, by hand.

Horovod's tests are not ours to copy into the repository: this fetches them
(a pinned commit of github.com/horovod/horovod, or a checkout you name) and
runs each test as its own 2-rank job under chorus-run, through a shim package
`horovod.torch` that is only `from chorus.torch.hvd import *`.

    /usr/bin/python3 scripts/horovod-suite.py --build build [--horovod DIR] [-k PATTERN] [--ranks 2]

Prints one line per test (pass, fail, skip, timeout) and the counts; with
--show-failures, the failing tests' output. Exit status 0 always: it
measures, it does not gate (our own tests in test/torch do that).
"""

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HOROVOD_URL = "https://github.com/horovod/horovod.git"
HOROVOD_COMMIT = "2626dc87a3a8eb8fb7d2216198ce45bce0f9e65a"


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


def horovod_checkout(given, workdir):
    if given:
        return Path(given)
    target = workdir / "horovod"
    subprocess.run(["git", "init", "-q", str(target)], check=True)
    subprocess.run(["git", "-C", str(target), "fetch", "-q", "--depth", "1", HOROVOD_URL, HOROVOD_COMMIT], check=True)
    subprocess.run(["git", "-C", str(target), "checkout", "-q", "FETCH_HEAD"], check=True)
    return target


def test_file(checkout, workdir):
    """test_torch.py and common.py at the commit (a git dir without a work tree works too)."""
    out = workdir / "parallel"
    out.mkdir(exist_ok=True)
    source = "test/parallel/test_torch.py"
    path = checkout / source
    if path.exists():
        text = path.read_text()
    else:
        text = subprocess.run(["git", f"--git-dir={checkout}", "show", f"HEAD:{source}"], check=True,
                              capture_output=True, text=True).stdout
    (out / "test_torch.py").write_text(text)
    # The three helpers test_torch.py imports from Horovod's test/utils/common.py,
    # written here: that module pulls in Horovod's runner and mock.
    (out / "common.py").write_text(COMMON)
    return out / "test_torch.py"


def shim(workdir):
    package = workdir / "shim" / "horovod" / "torch"
    package.mkdir(parents=True, exist_ok=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("from chorus.torch.hvd import *  # noqa: F401,F403\n")
    return workdir / "shim"


def test_names(path):
    return re.findall(r"^    def (test_\w+)\(", path.read_text(), re.M)


def run_one(name, args, path, env):
    # As horovodrun --gloo starts them: HOROVOD_RANK and HOROVOD_SIZE set,
    # which makes each test's tearDown run hvd.barrier() and hvd.shutdown().
    pytest = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-rs",
              f"{path}::TorchTests::{name}"]
    command = [str(args.chorus_run), "-n", str(args.ranks), "--", "sh", "-c",
               'HOROVOD_RANK=$CHORUS_RANK HOROVOD_SIZE=$CHORUS_SIZE exec "$@"', "rank", *pytest]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout,
                              cwd=path.parent)
    except subprocess.TimeoutExpired as expired:
        output = (expired.stdout or b"").decode(errors="replace") if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        return name, "timeout", output
    output = done.stdout + done.stderr
    if done.returncode == 0 and re.search(r"\b1 skipped\b", output) and " passed" not in output:
        return name, "skip", output
    if done.returncode == 0:
        return name, "pass", output
    return name, "fail", output


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--horovod", help="a horovod checkout or git dir (default: fetch the pinned commit)")
    parser.add_argument("-k", help="only tests whose name contains this")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=int, default=180)
    parser.add_argument("--show-failures", action="store_true")
    args = parser.parse_args()
    build = Path(args.build).resolve()
    args.chorus_run = build / "tools" / "chorus-run"
    with tempfile.TemporaryDirectory(prefix="horovod-suite-") as temp:
        workdir = Path(temp)
        path = test_file(horovod_checkout(args.horovod, workdir), workdir)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(shim(workdir)), str(build / "python"), str(path.parent)])
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        for variable in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "CHORUS_STORE"):
            env.pop(variable, None)
        names = [n for n in test_names(path) if not args.k or args.k in n]
        results = []
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for name, outcome, output in pool.map(lambda n: run_one(n, args, path, env), names):
                print(f"{outcome:8} {name}", flush=True)
                results.append((name, outcome, output))
        counts = {k: sum(1 for _, o, _ in results if o == k) for k in ("pass", "fail", "timeout", "skip")}
        run = counts["pass"] + counts["fail"] + counts["timeout"]
        print(f"# {counts['pass']} of {run} non-skipped tests passed ({100.0 * counts['pass'] / max(run, 1):.1f}%); "
              f"{counts['fail']} failed, {counts['timeout']} timed out, {counts['skip']} skipped")
        if args.show_failures:
            for name, outcome, output in results:
                if outcome in ("fail", "timeout"):
                    print(f"\n======== {name} ({outcome})\n{output[-4000:]}")


if __name__ == "__main__":
    main()
