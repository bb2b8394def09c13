#!/usr/bin/env python3
"""Prints the build targets (paths relative to the build directory) that the
named Meson tests depend on (by name or suite), or all tests' with no names,
less those of any --no-suite, one per line, for
`ninja -C DIR $(scripts/test-targets.py DIR TEST...)`: what a test run needs,
not the benchmarks and tools no test uses. With --installed, the targets
`meson install` installs are printed too (so `meson install --no-rebuild`
finds them built, without building every test).

    scripts/test-targets.py BUILD_DIR [--installed] [--suite SUITE]... [--no-suite SUITE]... [TEST]...
"""
import json
import os
import subprocess
import sys


def main():
    build_dir = os.path.abspath(sys.argv[1])
    names, suites, excluded, arguments = set(), set(), set(), sys.argv[2:]
    installed = False
    while arguments:
        argument = arguments.pop(0)
        if argument == "--installed":
            installed = True
        elif argument == "--suite":
            suites.add(arguments.pop(0))
        elif argument == "--no-suite":
            excluded.add(arguments.pop(0))
        else:
            names.add(argument)
    info = json.loads(subprocess.run(["meson", "introspect", build_dir, "--tests", "--targets"], check=True,
                                     capture_output=True, text=True).stdout)
    files = {target["id"]: target["filename"] for target in info["targets"]}
    wanted = set()
    if installed:
        for target in info["targets"]:
            if target.get("installed"):
                wanted.update(os.path.relpath(path, build_dir) for path in target["filename"])
    for test in info["tests"]:
        # Meson names a test's suites "<project>:<suite>".
        test_suites = {suite.split(":")[-1] for suite in test["suite"]}
        if test_suites & excluded:
            continue
        if (not names and not suites) or test["name"] in names or test_suites & suites:
            for dependency in test["depends"]:
                wanted.update(os.path.relpath(path, build_dir) for path in files[dependency])
    print("\n".join(sorted(wanted)))


if __name__ == "__main__":
    main()
