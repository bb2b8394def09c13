"""sparse_allreduce_async: the reduction of torch sparse COO tensors, as Horovod does it.

Each rank's indices and values are allgathered (sparse tensors differ in
how many entries they hold), and the result is the sparse tensor of all
entries, coalesced: entries at the same index add. Average then divides
the sums as a dense Average does (integers truncated as in Horovod)."""

import torch

from ._gather import allgather_async
from ._arguments import _check_tensor
from ._composite import _CompositeHandle
from ._job import _require_init
from ._ops import Average, Sum, _average_, _resolve_op
from ._process_sets import _resolve


def sparse_allreduce_async(tensor, name=None, op=None, process_set=None):
    """Starts reducing a sparse COO tensor (op: Average or Sum); synchronize(handle), or handle(), returns it."""
    what = "sparse_allreduce_async"
    _check_tensor(tensor, what, sparse=True)
    _require_init(what)
    process_set = _resolve(process_set, what)
    op = _resolve_op(None, op, what)
    if not tensor.is_sparse:
        raise ValueError(f"chorus.torch.hvd.{what}: expected a sparse COO tensor, got a {tensor.layout} one "
                         f"(use hvd.allreduce_async)")
    if op not in (Average, Sum):
        raise ValueError(f"chorus.torch.hvd.{what}: sparse tensors reduce with hvd.Average or hvd.Sum, not {op!r}")
    # Indices are (dimensions, entries): transposed so that entries are rows, which allgather concatenates.
    # Two operations, each with a name of its own (names are reserved while in flight).
    indices = allgather_async(tensor._indices().t().contiguous(), None if name is None else f"{name}.indices",  # noqa: SLF001
                              process_set=process_set)
    values = allgather_async(tensor._values().contiguous(), None if name is None else f"{name}.values",  # noqa: SLF001
                             process_set=process_set)
    world = len(process_set.ranks)

    def finish(results):
        all_indices, all_values = results
        summed = torch.sparse_coo_tensor(all_indices.t(), all_values, tensor.shape).coalesce()
        if op is Average:
            _average_(summed._values(), world)  # noqa: SLF001  (in place: the sum, then divided, as dense Average)
        return summed

    return _CompositeHandle([indices, values], finish)
