"""chorus.tensorflow as real multi-process jobs: every op and dtype bit-exact, in tf.function, gradients,
Keras fit against one process, mismatched calls (ranks/collectives.py); the three wrong answers it once
gave (ranks/wrong_answers.py); Horovod's API beyond the collectives (ranks/horovod_api.py); a killed rank;
and an elastic job that goes on without it."""

import pytest

from conftest import oks


@pytest.mark.parametrize("ranks", [2, 3])
def test_collectives_gradients_keras_and_mismatches(run_job, ranks):
    status, output = run_job("collectives.py", ranks)
    assert status == 0, output
    assert len(oks(output, "collectives")) == ranks, output


@pytest.mark.parametrize("ranks", [2, 3])
def test_horovod_scaling_sparse_refusals_and_graph_order(run_job, ranks):
    status, output = run_job("wrong_answers.py", ranks)
    assert status == 0, output
    assert len(oks(output, "wrong answers")) == ranks, output


@pytest.mark.parametrize("ranks", [2, 3])
def test_horovod_api_beyond_the_collectives(run_job, ranks):
    status, output = run_job("horovod_api.py", ranks)
    assert status == 0, output
    assert len(oks(output, "horovod_api")) == ranks, output


def test_a_killed_rank_is_named_by_the_others(run_job):
    # chorus-run waits (--grace) for the survivors to report before stopping them.
    status, output = run_job("kill.py", 3, env={"CHORUS_TIMEOUT": "20"}, launcher_args=("--grace", "30"))
    assert "rank 2 was killed by signal 9" in output, output
    survivors = oks(output, "killed")
    assert len(survivors) == 2, output
    assert status != 0, output


def test_an_elastic_job_goes_on_without_a_killed_rank(run_job):
    status, output = run_job("elastic_job.py", 3, env={"CHORUS_TIMEOUT": "20"}, launcher_args=("--grace", "60"))
    assert "rank 2 was killed by signal 9" in output, output
    assert len(oks(output, "elastic")) == 2, output
