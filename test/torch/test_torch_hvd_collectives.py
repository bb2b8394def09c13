"""chorus.torch.hvd's reducescatter, alltoall and grouped calls (bit-exact results, one torch collective per
grouped call and buffer dtype, groups that differ across ranks raising RuntimeError on every rank while the
job goes on), and the gradients of its differentiable calls, at 2 and 3 ranks."""

import pytest

from conftest import oks


@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("script", ["hvd_collectives", "hvd_gradients"])
def test_hvd_collectives(run_job, script, ranks):
    output = run_job(f"{script}.py", ranks)
    assert len(oks(output, script)) == ranks, output
