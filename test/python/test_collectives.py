"""Every collective on every type, blocking and async, bit-exact, at 1-4 ranks."""

import re

import pytest

from conftest import oks


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_every_collective_and_type(run_job, ranks):
    output = run_job("collectives.py", ranks)
    reports = oks(output, "collectives")
    assert len(reports) == ranks, output
    # Every rank ran the same, large number of checks (a script that checks nothing must not pass).
    counts = {int(re.search(r"collectives OK (\d+)", line).group(1)) for line in reports}
    assert len(counts) == 1 and counts.pop() > 500, output


def test_over_tcp(run_job):
    output = run_job("collectives.py", 3, transport="tcp")
    assert len(oks(output, "collectives")) == 3, output


def test_on_demand(run_job):
    output = run_job("collectives.py", 4, args=("--connections", "on-demand"))
    assert len(oks(output, "collectives")) == 4, output
