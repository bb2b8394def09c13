"""chorus.torch.hvd's reducescatter, alltoall and grouped calls, every result exact (small integers in every
dtype): uneven rows and splits, prescale/postscale, in place and async, a process set, one torch collective
per grouped call and buffer dtype, and errors: bad arguments raise on the calling rank, groups or tensors
that differ across ranks raise RuntimeError on every rank, and the job goes on."""

import torch
import torch.distributed as dist

import chorus.torch.hvd as hvd
from common import DTYPES, FLOATS, Checker

torch.set_num_threads(1)
hvd.init("chorus", timeout=30)
rank, size = hvd.rank(), hvd.size()
check = Checker(rank)
INTEGERS = [dtype for dtype in DTYPES if dtype not in FLOATS]


def raises(error, call, what):
    try:
        call()
    except error as raised:
        check("chorus.torch.hvd" in str(raised), f"{what}: the message names chorus.torch.hvd: {raised}")
        return str(raised)
    check(False, f"{what}: no {error.__name__}")


class Calls:
    """Counts the torch collectives chorus.torch.hvd issues (it looks them up on torch.distributed per call)."""

    def __init__(self, *names):
        self.counts = dict.fromkeys(names, 0)
        for name in names:
            original = getattr(dist, name)

            def counted(*args, _name=name, _original=original, **kwargs):
                self.counts[_name] += 1
                return _original(*args, **kwargs)
            setattr(dist, name, counted)


calls = Calls("all_reduce", "reduce_scatter", "all_gather", "all_to_all_single", "all_gather_into_tensor")


def issued(call):
    before = dict(calls.counts)
    result = call()
    return result, {name: calls.counts[name] - before[name] for name in before}


def shares(rows, ranks):
    return [rows // ranks + (1 if i < rows % ranks else 0) for i in range(ranks)]


def own_rows(tensor, position, ranks):
    counts = shares(tensor.shape[0], ranks)
    start = sum(counts[:position])
    return tensor[start:start + counts[position]]


def truncated_average(total, ranks, dtype):
    return (total.to(torch.float64) / ranks).trunc().to(dtype)


# reducescatter: 2 * size + 1 rows, so the first rank keeps one row more; rank r
# holds pattern + r + 1 (at most 6 + size).
rows = 2 * size + 1
pattern = torch.arange(rows * 3).view(rows, 3) % 7
total = pattern * size + size * (size + 1) // 2
for dtype in DTYPES:
    mine = (pattern + rank + 1).to(dtype)
    result, counted = issued(lambda: hvd.reducescatter(mine, op=hvd.Sum))
    check.equal(result, own_rows(total, rank, size).to(dtype), f"reducescatter Sum {dtype}")
    check(counted["reduce_scatter"] == 1, f"one reduce_scatter: {counted}")
    check.equal(mine, (pattern + rank + 1).to(dtype), f"reducescatter leaves its input alone ({dtype})")
    average = hvd.synchronize(hvd.reducescatter_async(mine))
    if dtype in FLOATS:  # x + (size + 1) / 2: exact in binary at 2 and 3 ranks
        expected = own_rows(pattern.to(torch.float64) + (size + 1) / 2, rank, size).to(dtype)
    else:
        expected = truncated_average(own_rows(total, rank, size), size, dtype)
    check.equal(average, expected, f"reducescatter Average (the default) {dtype}")
for dtype in [torch.float32, torch.float64, torch.int32]:
    mine = (pattern + rank + 1).to(dtype)
    scaled = hvd.reducescatter(mine, op=hvd.Sum, prescale_factor=2.0, postscale_factor=3.0)
    check.equal(scaled, own_rows(total * 6, rank, size).to(dtype), f"reducescatter prescale, postscale {dtype}")
# Fewer rows than ranks: the last ranks keep none.
few = hvd.reducescatter(torch.ones(1, 2), op=hvd.Sum)
check.equal(few, torch.full((1, 2), float(size)) if rank == 0 else torch.empty(0, 2), "1 row on every rank")
check("supports hvd.Average and hvd.Sum" in raises(RuntimeError, lambda: hvd.reducescatter(mine, op=hvd.Max),
                                                    "reducescatter Max"), "names the supported ops")
raises(ValueError, lambda: hvd.reducescatter(torch.tensor(1.0)), "reducescatter of a scalar")
message = raises(RuntimeError, lambda: hvd.reducescatter(torch.ones(4 + rank, 2)), "reducescatter shapes differ")
check("[4, 2]" in message and "[5, 2]" in message, f"the shapes are named: {message}")

# grouped_allreduce: four dtypes in five members, one all_reduce per buffer dtype.
shapes = [(2, 3), (4,), (3,), (2, 2, 2), ()]
kinds = [torch.float32, torch.int32, torch.float16, torch.float32, torch.int64]
group = [((torch.arange(torch.Size(shape).numel()).view(shape) % 5) + rank + 1).to(dtype)
         for shape, dtype in zip(shapes, kinds)]
sums = [((torch.arange(torch.Size(shape).numel()).view(shape) % 5) * size + size * (size + 1) // 2).to(dtype)
        for shape, dtype in zip(shapes, kinds)]
summed, counted = issued(lambda: hvd.grouped_allreduce(group, op=hvd.Sum))
check(isinstance(summed, list) and len(summed) == len(group), "grouped_allreduce returns a list")
for got, expected, dtype in zip(summed, sums, kinds):
    check.equal(got, expected, f"grouped_allreduce Sum {dtype}")
check(counted["all_reduce"] == 4, f"one all_reduce per buffer dtype (float32, int32, float16, int64): {counted}")
averaged = hvd.synchronize(hvd.grouped_allreduce_async(group))
for got, expected, member in zip(averaged, sums, group):
    if member.dtype in FLOATS:
        check.equal(got, (expected.to(torch.float64) / size).to(member.dtype), f"grouped Average {member.dtype}")
    else:
        check.equal(got, truncated_average(expected, size, member.dtype), f"grouped Average {member.dtype}")
scaled = hvd.grouped_allreduce(group[:2], op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5)
check.equal(scaled[0], sums[0], "grouped prescale and postscale (float32)")
check.equal(scaled[1], sums[1], "grouped prescale and postscale (int32)")
in_place = [member.clone() for member in group]
returned = hvd.grouped_allreduce_(in_place, op=hvd.Sum)
check(all(a is b for a, b in zip(returned, in_place)), "grouped_allreduce_ returns its tensors")
for got, expected in zip(in_place, sums):
    check.equal(got, expected, f"grouped_allreduce_ {got.dtype}")
in_place = [member.clone() for member in group]
hvd.synchronize(hvd.grouped_allreduce_async_(in_place, op=hvd.Max))
for got, member in zip(in_place, group):
    check.equal(got, member - rank + size - 1, f"grouped_allreduce_async_ Max {member.dtype}")
# Groups that differ: in length, in a member's shape, in a member's dtype.
raises(RuntimeError, lambda: hvd.grouped_allreduce(group[:2 + rank % 2]), "groups of different lengths")
raises(RuntimeError, lambda: hvd.grouped_allreduce([group[0], torch.ones(3 + rank)]), "a member's shape differs")
raises(RuntimeError, lambda: hvd.grouped_allreduce([group[0], torch.ones(3, dtype=kinds[rank % 2])]),
       "a member's dtype differs")
check.equal(hvd.grouped_allreduce([torch.ones(2)], op=hvd.Sum)[0], torch.full((2,), float(size)),
            "the job goes on after mismatched groups")
raises(ValueError, lambda: hvd.grouped_allreduce([]), "an empty group")
raises(TypeError, lambda: hvd.grouped_allreduce(torch.ones(2)), "a tensor instead of a list")

# grouped_allgather: member m of rank r has r + m + 1 rows of 10 r + m.
members = [torch.full((rank + m + 1, 2), 10 * rank + m).to(dtype)
           for m, dtype in enumerate([torch.float32, torch.int8, torch.float32, torch.bfloat16])]
gathered, counted = issued(lambda: hvd.grouped_allgather(members))
for m, (got, member) in enumerate(zip(gathered, members)):
    expected = torch.cat([torch.full((r + m + 1, 2), 10 * r + m) for r in range(size)]).to(member.dtype)
    check.equal(got, expected, f"grouped_allgather member {m} ({member.dtype})")
# One all_gather for the first dimensions, one per dtype (and the agreement's all_gather_into_tensor).
check(counted["all_gather"] == 4 and counted["all_gather_into_tensor"] == 1, f"grouped_allgather's all_gathers: {counted}")
scalars = hvd.synchronize(hvd.grouped_allgather_async([torch.tensor(rank), torch.tensor([rank, rank])]))
check.equal(scalars[0], torch.arange(size), "grouped_allgather of scalars")
check.equal(scalars[1], torch.arange(size).repeat_interleave(2), "grouped_allgather async")
raises(RuntimeError, lambda: hvd.grouped_allgather([torch.ones(2, 2 + rank)]), "grouped_allgather shapes differ")

# alltoall: rank r sends (r + d) % 3 rows to rank d, then one row it keeps;
# a row is 16 r + 4 d + i (i its index among those for d).
sent = [(rank + d) % 3 for d in range(size)]
rows_for = [torch.tensor([[16 * rank + 4 * d + i] * 2 for i in range(sent[d])], dtype=torch.int64).view(-1, 2)
            for d in range(size)]
for dtype in DTYPES + [torch.bool]:
    if dtype == torch.bool:
        data = torch.cat(rows_for + [torch.zeros(1, 2, dtype=torch.int64)]) % 2
        expect = [torch.tensor([[16 * s + 4 * rank + i] * 2 for i in range((s + rank) % 3)]).view(-1, 2) % 2
                  for s in range(size)]
    else:
        data = torch.cat(rows_for + [torch.zeros(1, 2, dtype=torch.int64)])
        expect = [torch.tensor([[16 * s + 4 * rank + i] * 2 for i in range((s + rank) % 3)]).view(-1, 2)
                  for s in range(size)]
    output, received = hvd.alltoall(data.to(dtype), splits=sent)
    check.equal(output, torch.cat(expect).to(dtype), f"alltoall with uneven splits ({dtype})")
    check.equal(received, torch.tensor([(s + rank) % 3 for s in range(size)], dtype=torch.int32),
                f"alltoall's received splits ({dtype})")
output, received = hvd.synchronize(hvd.alltoall_async(torch.cat(rows_for), torch.tensor(sent, dtype=torch.int64)))
check(received.dtype == torch.int64, "received splits have the splits' dtype")
equal = hvd.alltoall(torch.arange(2 * size) + 100 * rank)
check.equal(equal, torch.cat([torch.arange(2 * rank, 2 * rank + 2) + 100 * s for s in range(size)]),
            "alltoall without splits divides the rows equally")
nothing, received = hvd.alltoall(torch.ones(0, 3), splits=[0] * size)
check(nothing.shape == (0, 3) and received.tolist() == [0] * size, "alltoall of no rows")
raises(ValueError, lambda: hvd.alltoall(torch.ones(size + 1)), "rows not a multiple of the ranks")
raises(ValueError, lambda: hvd.alltoall(torch.ones(4), splits=[1] * (size + 1)), "splits of the wrong length")
raises(ValueError, lambda: hvd.alltoall(torch.ones(4), splits=[-1] + [1] * (size - 1)), "a negative split")
raises(ValueError, lambda: hvd.alltoall(torch.ones(size - 1), splits=[1] * size), "splits past the rows")
raises(ValueError, lambda: hvd.alltoall(torch.ones(size), splits=torch.ones(size)), "float splits")
raises(RuntimeError, lambda: hvd.alltoall(torch.ones(size, dtype=kinds[rank % 2])), "alltoall dtypes differ")
raises(RuntimeError, lambda: hvd.alltoall(torch.ones(size, 2 + rank)), "alltoall shapes differ past the rows")
check.equal(hvd.alltoall(torch.full((size,), rank)), torch.arange(size), "the job goes on after alltoall errors")

# A process set: [0, 2] at 3 ranks, [1] alone at 2.
subset = hvd.add_process_set([0, 2] if size == 3 else [1])
if rank in subset.ranks:
    n, position = len(subset.ranks), subset.ranks.index(rank)
    mine = (pattern + rank + 1).to(torch.int32)
    subtotal = pattern * n + sum(r + 1 for r in subset.ranks)
    check.equal(hvd.reducescatter(mine, op=hvd.Sum, process_set=subset),
                own_rows(subtotal, position, n).to(torch.int32), "reducescatter in a process set")
    check.equal(hvd.grouped_allreduce([mine, mine.double()], op=hvd.Sum, process_set=subset)[1],
                subtotal.double(), "grouped_allreduce in a process set")
    gathered = hvd.grouped_allgather([torch.full((rank + 1,), rank)], process_set=subset)[0]
    check.equal(gathered, torch.cat([torch.full((r + 1,), r) for r in subset.ranks]), "grouped_allgather in a set")
    reduced = hvd.grouped_reducescatter([mine], op=hvd.Sum, process_set=subset)[0]
    check.equal(reduced, own_rows(subtotal, position, n).to(torch.int32), "grouped_reducescatter in a set")
    output, received = hvd.alltoall(torch.arange(n * (rank + 1)) + 100 * rank, splits=[rank + 1] * n,
                                    process_set=subset)
    check(received.tolist() == [r + 1 for r in subset.ranks], f"alltoall splits in a set: {received.tolist()}")
    check.equal(output, torch.cat([torch.arange(position * (r + 1), (position + 1) * (r + 1)) + 100 * r
                                   for r in subset.ranks]), "alltoall in a process set")
else:
    raises(ValueError, lambda: hvd.reducescatter(torch.ones(2), process_set=subset), "a rank outside the set")
hvd.remove_process_set(subset)

# grouped_reducescatter: members of uneven rows and several dtypes, one reduce_scatter per dtype.
members = [(pattern + rank + 1).to(dtype) for dtype in [torch.float32, torch.int32, torch.float32]]
members[2] = members[2][:size + 1]
reduced, counted = issued(lambda: hvd.grouped_reducescatter(members, op=hvd.Sum))
check(isinstance(reduced, list), "grouped_reducescatter returns a list")
check.equal(reduced[0], own_rows(total, rank, size).float(), "grouped_reducescatter member 0")
check.equal(reduced[1], own_rows(total, rank, size).int(), "grouped_reducescatter member 1")
check.equal(reduced[2], own_rows(total[:size + 1], rank, size).float(), "grouped_reducescatter member 2")
check(counted["reduce_scatter"] == 2, f"one reduce_scatter per dtype: {counted}")
averaged = hvd.synchronize(hvd.grouped_reducescatter_async(members[:1], prescale_factor=2.0))
check.equal(averaged[0], own_rows(total.double() * 2 / size, rank, size).float(), "grouped_reducescatter Average")
raises(RuntimeError, lambda: hvd.grouped_reducescatter(members[:1 + rank % 2]), "grouped_reducescatter groups differ")
raises(ValueError, lambda: hvd.grouped_reducescatter([members[0], torch.tensor(1.0)]), "a scalar member")

hvd.shutdown()
print(f"hvd_collectives OK {check.count}", flush=True)
