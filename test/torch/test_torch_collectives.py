"""Every collective, every dtype, bit-exact, at 2 and 3 ranks; async work and futures; new_group; the
framework-facing API (coalescing, object collectives, monitored_barrier, ...); torchrun and mpirun as launchers."""

import pytest

from conftest import oks


@pytest.mark.parametrize("ranks", [2, 3])
def test_every_collective_and_dtype(run_job, ranks):
    output = run_job("collectives.py", ranks)
    assert len(oks(output, "collectives")) == ranks, output


@pytest.mark.parametrize("ranks", [2, 3])
def test_framework_api(run_job, ranks):
    """Coalescing, batch_isend_irecv, object collectives, new_subgroups, sparse, monitored_barrier, cpu:chorus."""
    output = run_job("framework_api.py", ranks)
    assert len(oks(output, "framework_api")) == ranks, output


def test_new_group_two_subgroups_and_a_group_timeout(run_job):
    output = run_job("groups.py", 4)
    assert len(oks(output, "groups")) == 4, output


def test_under_torchrun(run_torchrun):
    output = run_torchrun("torchrun_smoke.py", 2)
    assert len(oks(output, "torchrun")) == 2, output


def test_chorus_rendezvous_url(run_job):
    output = run_job("init_method.py", 2)
    assert len(oks(output, "init_method")) == 2, output


def test_under_mpirun(run_mpirun):
    output = run_mpirun("mpirun_smoke.py", 2)
    assert len(oks(output, "mpirun")) == 2, output
