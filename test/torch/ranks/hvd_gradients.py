"""The gradients of chorus.torch.hvd's differentiable calls, as Horovod defines them, exact: allreduce,
allgather, broadcast, alltoall, reducescatter and the grouped calls, in float32 and float64, in the global
set and a process set. Each rank's incoming gradient differs (rank r sends r + 1 times the ones), so that
what is reduced and what is kept shows."""

import torch

import chorus.torch.hvd as hvd
from common import Checker

torch.set_num_threads(1)
hvd.init("chorus", timeout=30)
rank, size = hvd.rank(), hvd.size()
check = Checker(rank)
mean = (size + 1) / 2  # the average of r + 1 over the ranks: exact in binary at 2 and 3 ranks


def shares(rows, ranks):
    return [rows // ranks + (1 if i < rows % ranks else 0) for i in range(ranks)]


def leaf(shape, dtype, value=1.0):
    return torch.full(shape, float(value), dtype=dtype, requires_grad=True)


for dtype in [torch.float32, torch.float64]:
    ones = (rank + 1) * torch.ones(3, 2, dtype=dtype)

    # allreduce: the gradient is reduced as the tensor was.
    for op, factor in [(hvd.Sum, float(sum(r + 1 for r in range(size)))), (hvd.Average, mean)]:
        x = leaf((3, 2), dtype)
        hvd.allreduce(x, op=op).backward(ones)
        check.equal(x.grad, torch.full((3, 2), factor, dtype=dtype), f"allreduce {op} gradient ({dtype})")
    x = leaf((3, 2), dtype)
    hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=3.0).backward(ones)
    check.equal(x.grad, torch.full((3, 2), 6.0 * size * mean, dtype=dtype), f"allreduce scaled gradient ({dtype})")
    check(not hvd.allreduce(torch.ones(2)).requires_grad, "no gradient where the input needs none")

    # allgather: the gradients averaged, each rank keeping the rows it contributed.
    x = leaf((rank + 1, 2), dtype)
    gathered = hvd.allgather(x)
    rows_of = torch.cat([torch.full((r + 1, 2), float(r + 1)) for r in range(size)]).to(dtype)
    gathered.backward(rows_of * (rank + 1))
    check.equal(x.grad, torch.full((rank + 1, 2), (rank + 1) * mean, dtype=dtype), f"allgather gradient ({dtype})")

    # broadcast: the average reaches the root only.
    for root in range(size):
        x = leaf((3, 2), dtype, rank)
        hvd.broadcast(x, root_rank=root).backward(ones)
        check.equal(x.grad, torch.full((3, 2), mean if rank == root else 0.0, dtype=dtype),
                    f"broadcast gradient from {root} ({dtype})")

    # alltoall: the gradient goes back the way the rows came; the unsent last row gets none.
    sent = [(rank + d) % 3 for d in range(size)]
    x = leaf((sum(sent) + 1, 2), dtype)
    output, received = hvd.alltoall(x, splits=sent)
    check(not received.requires_grad, "received splits are not differentiable")
    senders = torch.cat([torch.full(((s + rank) % 3, 2), float(s)) for s in range(size)]).to(dtype)
    output.backward(senders * 10 + rank)  # the row from s to me: 10 s + me
    expected = torch.cat([torch.full((sent[d], 2), float(10 * rank + d)) for d in range(size)] +
                         [torch.zeros(1, 2)]).to(dtype)
    check.equal(x.grad, expected, f"alltoall gradient ({dtype})")
    x = leaf((2 * size, 1), dtype)
    hvd.alltoall(x).backward(torch.full((2 * size, 1), float(rank)).to(dtype))
    check.equal(x.grad, torch.arange(size).repeat_interleave(2).view(-1, 1).to(dtype),
                f"alltoall gradient without splits ({dtype})")

    # reducescatter: the gradient (times the set's size for Sum, times the scales) allgathered.
    rows = 2 * size + 1
    gathered_ones = torch.cat([torch.full((share, 2), float(r + 1)) for r, share in enumerate(shares(rows, size))])
    for op, factor in [(hvd.Sum, size), (hvd.Average, 1)]:
        x = leaf((rows, 2), dtype)
        kept = hvd.reducescatter(x, op=op, prescale_factor=2.0)
        kept.backward(torch.full(kept.shape, float(rank + 1), dtype=dtype))
        check.equal(x.grad, (gathered_ones * factor * 2).to(dtype), f"reducescatter {op} gradient ({dtype})")

    # The grouped calls: each member as its single call would have it.
    xs = [leaf((3, 2), dtype), leaf((4,), dtype)]
    summed = hvd.grouped_allreduce(xs, op=hvd.Sum)
    torch.autograd.backward(summed, [(rank + 1) * torch.ones_like(s) for s in summed])
    for x in xs:
        check.equal(x.grad, torch.full(x.shape, float(size * mean), dtype=dtype), "grouped_allreduce gradient")
    xs = [leaf((rank + 1, 2), dtype), leaf((rank + 2,), dtype)]
    gathered = hvd.grouped_allgather(xs)
    torch.autograd.backward(list(gathered), [torch.full(g.shape, float(rank + 1), dtype=dtype) for g in gathered])
    for x in xs:
        check.equal(x.grad, torch.full(x.shape, mean, dtype=dtype), f"grouped_allgather gradient ({dtype})")
    xs = [leaf((rows, 2), dtype), leaf((size, 1), dtype)]
    kept = hvd.grouped_reducescatter(xs, op=hvd.Sum)
    for k in kept:  # one backward per member, as Horovod's test does
        k.backward(torch.full(k.shape, float(rank + 1), dtype=dtype))
    check.equal(xs[0].grad, (gathered_ones * size).to(dtype), f"grouped_reducescatter gradient ({dtype})")
    check.equal(xs[1].grad, (torch.arange(1, size + 1).view(-1, 1) * size).to(dtype),
                f"grouped_reducescatter gradient, one row each ({dtype})")

# In a process set: [0, 2] at 3 ranks, [1] alone at 2.
subset = hvd.add_process_set([0, 2] if size == 3 else [1])
if rank in subset.ranks:
    x = leaf((2, 2), torch.float32)
    hvd.allreduce(x, op=hvd.Sum, process_set=subset).backward(torch.full((2, 2), float(rank + 1)))
    check.equal(x.grad, torch.full((2, 2), float(sum(r + 1 for r in subset.ranks))), "allreduce gradient in a set")
    x = leaf((len(subset.ranks) * 2, 1), torch.float32)
    kept = hvd.reducescatter(x, op=hvd.Sum, process_set=subset)
    kept.backward(torch.full(kept.shape, float(rank + 1)))
    check.equal(x.grad, torch.tensor([[float(r + 1) * len(subset.ranks)] for r in subset.ranks
                                      for _ in range(2)]), "reducescatter gradient in a set")
hvd.remove_process_set(subset)

hvd.shutdown()
print(f"hvd_gradients OK {check.count}", flush=True)
