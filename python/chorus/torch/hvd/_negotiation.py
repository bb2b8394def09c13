"""What each rank is about to do, compared across the ranks before any data moves.

Horovod's coordinator checks that every rank asks for the same operation
on a tensor of one dtype and shape (first dimensions may differ where the
operation allows) with the same root and op, and fails the operation on
every rank otherwise, leaving the job usable. chorus's own check rides on
each message (collective, type, op, root, count): it sees a count that
differs, but not a shape that differs with the same count, and it ends the
Context, as any failure does (docs/torch.md). So each hvd call first
allgathers a small descriptor of itself (17 int64s) among the set's ranks;
when the descriptors disagree, every rank raises the same
chorus.MismatchError (a RuntimeError; hvd's public calls raise it as
HorovodInternalError too) naming the ranks and what differs, and nothing
else has been sent.

The descriptor carries a digest of the call's name too. Horovod matches
calls by name; chorus.torch.hvd matches them by the order each rank issues
them, so two ranks that issue named calls of one shape in different orders
(named allreduce_async calls from two threads, or over a set whose order
differs between processes) would have the two summed with each other.
With the names compared, such ranks get MismatchError naming the ranks
instead of a mixed result.
"""

import zlib

import torch
import torch.distributed as dist

from ... import MismatchError

_SLOTS = 17
_KIND, _DTYPE, _OP, _ROOT, _NDIM, _AUX, _NUMEL, _NAME, _DIMS = range(9)
_DIM_SLOTS = _SLOTS - _DIMS

_KINDS = ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter", "grouped_allreduce",
          "grouped_allgather", "grouped_reducescatter", "join", "sparse_allreduce", "adasum"]
_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16,
           torch.float32, torch.float64, torch.bool, torch.complex64, torch.complex128]
# Operations whose tensors may differ in the first dimension across ranks.
_ANY_FIRST_DIMENSION = {"allgather", "alltoall", "grouped_allgather"}


def _dtype_code(dtype):
    return _DTYPES.index(dtype) if dtype in _DTYPES else len(_DTYPES) + (zlib.crc32(str(dtype).encode()) & 0xffff)


def _dtype_name(code):
    return str(_DTYPES[code]).replace("torch.", "") if 0 <= code < len(_DTYPES) else f"dtype #{code}"


def describe(kind, dtype=None, shape=(), op=0, root=-1, aux=0):
    """The descriptor of one call: kind, dtype, op (a small integer), root (-1 for none), shape, aux."""
    slots = [0] * _SLOTS
    slots[_KIND] = _KINDS.index(kind)
    slots[_DTYPE] = -1 if dtype is None else _dtype_code(dtype)
    slots[_OP] = op
    slots[_ROOT] = root
    slots[_NDIM] = len(shape)
    slots[_AUX] = aux
    numel = 1
    for extent in shape:
        numel *= int(extent)
    slots[_NUMEL] = numel
    dims = [int(extent) for extent in shape]
    if len(dims) > _DIM_SLOTS:  # the rest folded into the last slot
        dims = dims[:_DIM_SLOTS - 1] + [zlib.crc32(repr(dims[_DIM_SLOTS - 1:]).encode())]
    slots[_DIMS:_DIMS + len(dims)] = dims
    return slots


def name_digest(name):
    """A call's name as a number every rank computes alike (0: no name)."""
    return 0 if name is None else 1 + (zlib.crc32(str(name).encode()) & 0x7fffffff)


def named(slots, name):
    """The descriptor with the call's name folded in."""
    slots[_NAME] = name_digest(name)
    return slots


class Descriptor:
    """One rank's descriptor, as the others received it."""

    def __init__(self, slots, global_rank):
        self.slots = slots
        self.rank = global_rank

    @property
    def kind(self):
        kind = self.slots[_KIND]
        return _KINDS[kind] if 0 <= kind < len(_KINDS) else f"operation #{kind}"

    @property
    def first_dimension(self):
        return self.slots[_DIMS] if self.slots[_NDIM] > 0 else 1

    @property
    def aux(self):
        return self.slots[_AUX]

    def shape_text(self):
        ndim = self.slots[_NDIM]
        dims = self.slots[_DIMS:_DIMS + min(ndim, _DIM_SLOTS)]
        return "[" + ", ".join(str(d) for d in dims) + (", ...]" if ndim > _DIM_SLOTS else "]")


def _differences(mine, theirs):
    """What two descriptors of one kind disagree on, in words (empty when they agree)."""
    kind = mine.kind
    if mine.slots[_KIND] != theirs.slots[_KIND]:
        return [f"rank {mine.rank} calls {mine.kind}, rank {theirs.rank} calls {theirs.kind}"]
    found = []
    if mine.slots[_NAME] != theirs.slots[_NAME]:
        found.append(f"rank {mine.rank} and rank {theirs.rank} name their calls differently (name digests "
                     f"{mine.slots[_NAME]:#x} and {theirs.slots[_NAME]:#x}; 0 is no name): the ranks issue their calls "
                     "in one order, so the calls at one position must have one name")
    if mine.slots[_DTYPE] != theirs.slots[_DTYPE]:
        found.append(f"rank {mine.rank} has a {_dtype_name(mine.slots[_DTYPE])} tensor, rank {theirs.rank} a "
                     f"{_dtype_name(theirs.slots[_DTYPE])} one")
    same_shape = mine.slots[_NDIM] == theirs.slots[_NDIM] and (
        mine.slots[_DIMS:] == theirs.slots[_DIMS:] if kind not in _ANY_FIRST_DIMENSION else
        mine.slots[_DIMS + 1:] == theirs.slots[_DIMS + 1:])
    if not same_shape:
        what = "shape" if kind not in _ANY_FIRST_DIMENSION else "shape past the first dimension"
        found.append(f"the {what} differs: rank {mine.rank} has {mine.shape_text()}, rank {theirs.rank} "
                     f"{theirs.shape_text()}")
    if mine.slots[_ROOT] != theirs.slots[_ROOT]:
        found.append(f"rank {mine.rank} names root rank {mine.slots[_ROOT]}, rank {theirs.rank} root rank "
                     f"{theirs.slots[_ROOT]}")
    if mine.slots[_OP] != theirs.slots[_OP]:
        found.append(f"rank {mine.rank} and rank {theirs.rank} ask for different reduction ops")
    if mine.slots[_AUX] != theirs.slots[_AUX]:
        found.append(f"rank {mine.rank} and rank {theirs.rank} disagree on the call's options "
                     f"({mine.slots[_AUX]} and {theirs.slots[_AUX]})")
    return found


def exchange_async(slots, group, set_ranks):
    """Starts gathering every rank's descriptor: (work, flat tensor) for descriptors_of()."""
    mine = torch.tensor(slots, dtype=torch.int64)
    flat = torch.empty(len(set_ranks) * _SLOTS, dtype=torch.int64)
    return dist.all_gather_into_tensor(flat, mine, group=group, async_op=True), flat


def descriptors_of(flat, set_ranks):
    return [Descriptor(slots, global_rank) for slots, global_rank in zip(flat.view(-1, _SLOTS).tolist(), set_ranks)]


def exchange(slots, group, set_ranks):
    """Every rank's descriptor, in set order (no checks)."""
    work, flat = exchange_async(slots, group, set_ranks)
    work.wait()
    return descriptors_of(flat, set_ranks)


# What goes on while some ranks have joined (join.py): allreduce, to which
# they add the op's identity (zeros for Sum and Average).
_JOINABLE_KIND = "allreduce"


def check(descriptors, what):
    """Raises MismatchError (on every rank alike) unless the working ranks' descriptors agree."""
    active = [d for d in descriptors if d.kind != "join"]
    joined = [d.rank for d in descriptors if d.kind == "join"]
    if joined and active[0].kind != _JOINABLE_KIND:
        raise MismatchError(f"chorus.torch.hvd.{what}: rank(s) {joined} have joined (hvd.join), and only allreduce "
                            f"goes on while ranks have joined (they contribute the op's identity), not "
                            f"{active[0].kind}; nothing was sent")
    first = active[0]
    for other in active[1:]:
        found = _differences(first, other)
        if found:
            raise MismatchError(f"chorus.torch.hvd.{what}: the ranks' calls do not match, so nothing was sent (the "
                                f"job can go on): {'; '.join(found)}")


def agree(slots, group, set_ranks, what):
    """Every rank's descriptor (a list in set order), once all ranks' agree; else MismatchError on every rank."""
    descriptors = exchange(slots, group, set_ranks)
    check(descriptors, what)
    return descriptors


def joined_rank_joins_in(descriptors):
    """For a joined rank: the one allreduce the active ranks agreed on (its descriptor), or None."""
    active = [d for d in descriptors if d.kind != "join"]
    if not active or active[0].kind != _JOINABLE_KIND:
        return None
    if any(_differences(active[0], other) for other in active[1:]):
        return None
    return active[0]


def dtype_of(descriptor):
    code = descriptor.slots[_DTYPE]
    return _DTYPES[code] if 0 <= code < len(_DTYPES) else None


def op_code_of(descriptor):
    return descriptor.slots[_OP]


def numel_of(descriptor):
    return descriptor.slots[_NUMEL]
