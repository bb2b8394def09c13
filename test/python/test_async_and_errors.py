"""Work callbacks, buffer lifetime, the GIL, split, and the errors (invalid
root, bad buffers, mismatched counts, a rank that dies) as real jobs."""

import pytest

from conftest import oks


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_work_callbacks_split_and_gil(run_job, ranks):
    output = run_job("work_callbacks.py", ranks)
    assert len(oks(output, "callbacks")) == ranks, output


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_errors(run_job, ranks):
    output = run_job("errors.py", ranks)
    assert len(oks(output, "errors")) == ranks, output
    assert "exiting on purpose" in output
