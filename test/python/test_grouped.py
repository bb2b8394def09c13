"""The grouped collectives (many buffers as one fused collective) as real jobs."""

import re

import pytest

from conftest import oks


@pytest.mark.parametrize("ranks", [2, 3])
def test_grouped_collectives(run_job, ranks):
    output = run_job("grouped.py", ranks)
    reports = oks(output, "grouped")
    assert len(reports) == ranks, output
    counts = {int(re.search(r"grouped OK (\d+)", line).group(1)) for line in reports}
    assert len(counts) == 1 and counts.pop() > 800, output


def test_grouped_over_tcp(run_job):
    output = run_job("grouped.py", 3, transport="tcp")
    assert len(oks(output, "grouped")) == 3, output
