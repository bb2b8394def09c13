"""chorus.torch.hvd's Horovod extras as real jobs at 2, 3 and 4 ranks (Adasum
needs a power of two: at 3 its error is checked): Average of integers,
Compression, DistributedOptimizer's Horovod keywords, sparse allreduce,
Adasum, the object calls, broadcast_optimizer_state of fresh optimizers,
cross_rank/cross_size on fake hosts, HorovodInternalError (ranks/hvd_extras.py);
SyncBatchNorm against one BatchNorm over the whole batch and the timeline
(ranks/hvd_sync_bn_timeline.py); and HOROVOD_TIMELINE read at init."""

import json

import pytest

from conftest import oks

# chorus-run's fake hosts, and each rank's expected (cross_rank, cross_size, is_homogeneous).
HOSTS = {2: ("1,1", "0:2:1,1:2:1"), 3: ("2,1", "0:2:0,0:1:0,1:2:0"), 4: ("2,2", "0:2:1,0:2:1,1:2:1,1:2:1")}


@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_hvd_extras(run_job, ranks, tmp_path):
    hosts, cross = HOSTS[ranks]
    timeline = tmp_path / "init.json"
    output = run_job("hvd_extras.py", ranks, cross, launcher_args=("--fake-hosts", hosts),
                     env={"HOROVOD_TIMELINE": str(timeline), "HOROVOD_TIMELINE_MARK_CYCLES": "1"})
    assert len(oks(output, "hvd_extras")) == ranks, output
    # HOROVOD_TIMELINE at init, as Horovod's test_timeline.py sets it: rank 0's calls, until shutdown.
    events = json.loads(timeline.read_text())
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and "name" in e["args"]}
    assert {"allreduce.noname.0", "broadcast.noname.0", "allreduce.s"} <= names, names
    assert any(e.get("name") == "CYCLE_START" for e in events)
    assert any(e.get("name") == "NEGOTIATE_ALLREDUCE" for e in events)


@pytest.mark.parametrize("ranks", [2, 3])
def test_sync_batch_norm_and_timeline(run_job, ranks, tmp_path):
    output = run_job("hvd_sync_bn_timeline.py", ranks, str(tmp_path))
    assert len(oks(output, "hvd_sync_bn_timeline")) == ranks, output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["timeline0.rank0.json", "timeline1.rank0.json"]
