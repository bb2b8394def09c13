"""DDP on a small MLP, 50 steps at 2 ranks: "chorus" and "gloo" give the same
loss at every step (1e-5 relative) and every rank ends with the same parameters."""

import math

from conftest import oks, per_rank

STEPS = 50
RANKS = 2


def train(run_job, backend):
    output = run_job("ddp.py", RANKS, backend, str(STEPS))
    assert len(oks(output, "ddp")) == RANKS, output
    losses = {rank: [float.fromhex(value) for _, value in lines] for rank, lines in per_rank(output, "loss").items()}
    params = {rank: lines[0][0] for rank, lines in per_rank(output, "params").items()}
    assert sorted(losses) == list(range(RANKS)) and all(len(l) == STEPS for l in losses.values()), output
    assert sorted(params) == list(range(RANKS)), output
    return losses, params


def test_ddp_chorus_matches_gloo(run_job):
    chorus_losses, chorus_params = train(run_job, "chorus")
    gloo_losses, gloo_params = train(run_job, "gloo")
    assert len(set(chorus_params.values())) == 1, f"ranks disagree on the parameters under chorus: {chorus_params}"
    assert len(set(gloo_params.values())) == 1, f"ranks disagree on the parameters under gloo: {gloo_params}"
    for rank in range(RANKS):
        for step, (ours, theirs) in enumerate(zip(chorus_losses[rank], gloo_losses[rank])):
            assert math.isclose(ours, theirs, rel_tol=1e-5), f"rank {rank} step {step}: chorus {ours}, gloo {theirs}"
    # Training happened: the loss fell.
    assert chorus_losses[0][-1] < 0.5 * chorus_losses[0][0], chorus_losses[0]
