"""What the grouped collectives share: checking a group, describing it to the other ranks, packing its members
into one flat buffer per dtype and unpacking them, and gathering buffers whose lengths differ across ranks."""

import zlib

import torch
import torch.distributed as dist

from . import _negotiation
from ._arguments import _check_tensor


def _check_group(tensors, what):
    """The members of a grouped call as a list: a non-empty list or tuple of tensors."""
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"chorus.torch.hvd.{what}: expected a list of tensors, got {type(tensors).__name__}")
    if not tensors:
        raise ValueError(f"chorus.torch.hvd.{what}: the list of tensors is empty")
    for tensor in tensors:
        _check_tensor(tensor, what)
    return list(tensors)


def _describe_group(kind, members, op=0, any_first_dimension=False):
    """One descriptor for a whole group, of shape [1, number of members, fingerprint of every member's dtype
    and shape (past the first dimension where first dimensions may differ)]: ranks whose groups differ in any
    member raise before anything is sent."""
    signature = [(str(t.dtype), tuple(t.shape[1:] if any_first_dimension else t.shape)) for t in members]
    # 31 bits: the descriptor multiplies its dimensions into an int64 element count.
    fingerprint = zlib.crc32(repr(signature).encode()) & 0x7fffffff
    return _negotiation.describe(kind, members[0].dtype, (1, len(members), fingerprint), op)


def _classes(tensors, buffer_dtype):
    """{buffer dtype: indices of the members packed into that buffer}, in the members' order."""
    classes = {}
    for index, tensor in enumerate(tensors):
        classes.setdefault(buffer_dtype(tensor), []).append(index)
    return classes


def _flat(tensors, dtype):
    """A new contiguous buffer of dtype holding the tensors' elements one after another."""
    return torch.cat([tensor.detach().reshape(-1).to(dtype) for tensor in tensors])


def _pieces(flat, shapes):
    """Views of consecutive stretches of flat, one of each shape."""
    offset = 0
    for shape in shapes:
        count = _elements(shape)
        yield flat[offset:offset + count].view(tuple(shape))
        offset += count


def _gather_uneven(flat, lengths, group):
    """Starts gathering every rank's flat buffer, lengths[i] elements from the set's i-th rank: (work, blocks),
    blocks() the rank-ordered buffers once work is done. torch's all_gather moves equal sizes, so each buffer
    travels padded to the longest."""
    longest = max(lengths)
    padded = flat
    if flat.numel() < longest:
        padded = torch.zeros(longest, dtype=flat.dtype)
        padded[:flat.numel()] = flat
    gathered = [torch.empty_like(padded) for _ in lengths]
    work = dist.all_gather(gathered, padded, group=group, async_op=True)
    return work, lambda: [block[:length] for block, length in zip(gathered, lengths)]


def _elements(shape):
    count = 1
    for extent in shape:
        count *= int(extent)
    return count


def _row_elements(tensor):
    """Elements in one row (one index of dimension 0)."""
    return _elements(tensor.shape[1:])
