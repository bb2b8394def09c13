"""barrier: every rank of a set has reached this point.

Not queued behind the rank's collectives (launcher.py), as in Horovod: a
rank may wait here while an operation it started waits for a rank that has
not started it yet. Under chorus (and gloo) this is the group's monitored
barrier, whose messages use their own tags, apart from the collectives'
order, and which names the ranks that did not arrive when the group's
timeout runs out.
"""

import torch.distributed as dist

from ._job import _require_init, _state
from ._process_sets import _resolve


def barrier(process_set=None):
    """Blocks until every rank of process_set (the whole job by default) has called barrier()."""
    _require_init("barrier")
    process_set = _resolve(process_set, "barrier")
    group = process_set._group
    if group is None:
        group = dist.distributed_c10d._get_default_group()  # noqa: SLF001  (no public accessor)
    monitored = getattr(group, "monitored_barrier", None)
    if monitored is None:
        dist.barrier(group=process_set._group)
        return
    monitored(_state.timeout, wait_all_ranks=True)
