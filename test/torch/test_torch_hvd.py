"""chorus.torch.hvd, Horovod's API: its calls one by one (bit-exact), and the
DDP model of test_torch_ddp trained 50 steps through DistributedOptimizer at
2 and 3 ranks: losses within 1e-5 (relative) of DDP with "gloo" at every
step, every rank ending with the same parameters; a rank that leaves
mid-training is named by the others' errors within the timeout, and an
elastic job goes on without it."""

import math

import pytest

from conftest import oks, per_rank
import test_torch_ddp as ddp  # (a module, so pytest does not collect its tests twice)

STEPS = ddp.STEPS


@pytest.mark.parametrize("ranks", [2, 3])
def test_hvd_calls(run_job, ranks):
    output = run_job("hvd_api.py", ranks)
    assert len(oks(output, "hvd_api")) == ranks, output


@pytest.mark.parametrize("ranks", [2, 3])
def test_hvd_agreement(run_job, ranks):
    output = run_job("hvd_agreement.py", ranks)
    assert len(oks(output, "hvd_agreement")) == ranks, output


def train_hvd(run_job, ranks, fusion_bytes):
    output = run_job("hvd_train.py", ranks, "chorus", str(STEPS), str(fusion_bytes))
    assert len(oks(output, "hvd_train")) == ranks, output
    losses = {rank: [float.fromhex(value) for _, value in lines] for rank, lines in per_rank(output, "loss").items()}
    params = {rank: lines[0][0] for rank, lines in per_rank(output, "params").items()}
    buckets = {rank: int(lines[0][0]) for rank, lines in per_rank(output, "buckets").items()}
    assert sorted(losses) == list(range(ranks)) and all(len(l) == STEPS for l in losses.values()), output
    return losses, params, buckets


@pytest.mark.parametrize("ranks", [2, 3])
def test_distributed_optimizer_matches_ddp_gloo(run_job, ranks):
    # 4 KiB fusion buffers: the MLP's 5,444 gradients in several allreduces per step.
    losses, params, buckets = train_hvd(run_job, ranks, 4096)
    assert len(set(params.values())) == 1, f"ranks disagree on the parameters: {params}"
    assert all(count > 2 for count in buckets.values()), buckets
    gloo_losses, _ = ddp.train(run_job, "gloo", ranks)
    for rank in range(ranks):
        for step, (ours, theirs) in enumerate(zip(losses[rank], gloo_losses[rank])):
            assert math.isclose(ours, theirs, rel_tol=1e-5), f"rank {rank} step {step}: hvd {ours}, DDP gloo {theirs}"
    assert losses[0][-1] < 0.5 * losses[0][0], losses[0]


def test_lost_rank_named_through_the_optimizer(run_job):
    output = run_job("hvd_train.py", 3, "chorus", str(STEPS), env={"CHORUS_TEST_EXIT_RANK": "2",
                                                                 "CHORUS_TEST_EXIT_STEP": "10"})
    lost = oks(output, "lost")
    assert len(lost) == 2, output


def test_an_elastic_job_goes_on_without_a_lost_rank(run_job):
    output = run_job("hvd_elastic.py", 3, launcher_args=("--grace", "60"))
    assert len(oks(output, "hvd_elastic")) == 2, output
