"""chorus.torch.hvd's Horovod extras, every result exact: Average of integers
(truncated as Horovod does), Compression and DistributedOptimizer's Horovod
keywords (compression, gradient_predivide_factor, sparse_as_dense, op=Adasum),
sparse_allreduce_async, Adasum, the object calls, broadcast_optimizer_state of a
fresh optimizer, cross_rank/cross_size, the build answers, and chorus's errors
as HorovodInternalError. argv[1]: the expected (cross_rank, cross_size,
homogeneous) of every rank, "r:s:h,r:s:h,..." (h: 0 or 1)."""

import sys
from fractions import Fraction
import math

import torch

import chorus
import chorus.torch.hvd as hvd
from common import INTEGERS, Checker

torch.set_num_threads(1)
hvd.init("chorus", timeout=30)
rank, size = hvd.rank(), hvd.size()
check = Checker(rank)
power_of_two = size & (size - 1) == 0


def expect_error(call, error_type, text):
    try:
        call()
    except error_type as error:
        check(text in str(error), f"{text!r} in {error}")
        return
    check(False, f"expected {error_type.__name__} containing {text!r}")


# The build, as Horovod scripts ask; the hosts, from chorus-run's --fake-hosts.
check(not any([hvd.mpi_built(), hvd.mpi_enabled(), hvd.gloo_built(), hvd.gloo_enabled(), hvd.ccl_built(),
               hvd.ddl_built(), hvd.cuda_built(), hvd.rocm_built()]) and hvd.nccl_built() == 0, "built: none")
expect_error(hvd.mpi_threads_supported, ValueError, "MPI")
expected_cross = [tuple(int(v) for v in item.split(":")) for item in sys.argv[1].split(",")][rank]
check((hvd.cross_rank(), hvd.cross_size(), int(hvd.is_homogeneous())) == expected_cross,
      f"cross_rank, cross_size, is_homogeneous: {hvd.cross_rank(), hvd.cross_size(), hvd.is_homogeneous()} "
      f"(local {hvd.local_rank()} of {hvd.local_size()}), expected {expected_cross}")

# Average of integers: Horovod scales the sum by 1/size and truncates toward
# zero. Rank 0's extra -4 makes the last sum -(1 + 2 + ... + size) - 4, not a
# multiple of 2, 3 or 4, where truncating (toward zero) and flooring differ.
def integers(r, dtype):
    return [r + 1, 5 * r + 2, 0 if dtype == torch.uint8 else -(r + 1) - 4 * (r == 0)]


for dtype in INTEGERS:
    values = integers(rank, dtype)
    sums = [sum(integers(r, dtype)[i] for r in range(size)) for i in range(3)]
    expected = torch.tensor([math.trunc(Fraction(s, size)) for s in sums], dtype=dtype)
    check.equal(hvd.allreduce(torch.tensor(values, dtype=dtype)), expected, f"Average of {dtype}")
    if dtype != torch.uint8:
        check(expected[2] != sums[2] // size, "truncation differs from floor here (the test can tell)")
    in_place = torch.tensor(values, dtype=dtype)
    hvd.allreduce_(in_place, op=hvd.Average)
    check.equal(in_place, expected, f"in-place Average of {dtype}")

# Compression: the compressors themselves.
for dtype in [torch.float32, torch.float64]:
    compressed, ctx = hvd.Compression.fp16.compress(torch.ones(3, dtype=dtype))
    check(compressed.dtype == torch.float16, "fp16 compresses floats to float16")
    check.equal(hvd.Compression.fp16.decompress(compressed, ctx), torch.ones(3, dtype=dtype), "and back")
for dtype in INTEGERS:
    compressed, ctx = hvd.Compression.fp16.compress(torch.ones(3, dtype=dtype))
    check(compressed.dtype == dtype and hvd.Compression.fp16.decompress(compressed, ctx).dtype == dtype,
          f"fp16 leaves {dtype} alone")
check(hvd.Compression.none.compress(torch.ones(2))[1] is None, "none: no context")


def linear_step(coefficients, **options):
    """A parameter w (zeros) whose gradient on this rank is coefficients[rank]; the reduced gradient."""
    weight = torch.nn.Parameter(torch.zeros(len(coefficients[0])))
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD([weight], lr=1.0), named_parameters=[("w", weight)],
                                         **options)
    optimizer.zero_grad()
    (weight * torch.tensor(coefficients[rank])).sum().backward()
    optimizer.synchronize()
    return optimizer, weight


# fp16 compression: the bucket is float16, so 1 + 2**-12 (not a float16) arrives as 1.
optimizer, weight = linear_step([[1 + 2 ** -12, 2.0 * (r + 1)] for r in range(size)],
                                compression=hvd.Compression.fp16)
check(optimizer._chorus_fusion.buckets[0].dtype == torch.float16, "the compressed dtype makes the bucket")
check.equal(weight.grad, torch.tensor([1.0, float(size + 1)]), "fp16-compressed Average")


class ToFloat64(hvd.Compressor):
    """Sends float64, and returns the context it was given to decompress (the test sees it travel)."""

    @staticmethod
    def compress(tensor):
        return tensor.to(torch.float64), ("context", tensor.dtype)

    @staticmethod
    def decompress(tensor, ctx):
        assert ctx[0] == "context"
        return tensor.to(ctx[1])


optimizer, weight = linear_step([[1 + 2 ** -30, 0.5]] * size, compression=ToFloat64, op=hvd.Sum)
check(optimizer._chorus_fusion.buckets[0].dtype == torch.float64, "a Compressor's own dtype makes the bucket")
check.equal(weight.grad, torch.tensor([(1 + 2 ** -30) * size, 0.5 * size], dtype=torch.float64).float(),
            "a custom Compressor")

# gradient_predivide_factor: with float16 buckets, 60000 from every rank sums
# past float16's largest (65504) unless divided by size first.
optimizer, weight = linear_step([[60000.0]] * size, compression=hvd.Compression.fp16)
check(torch.isinf(weight.grad).all(), "without predivision the float16 sum overflows (the test can tell)")
optimizer, weight = linear_step([[60000.0]] * size, compression=hvd.Compression.fp16,
                                gradient_predivide_factor=float(size))
check.equal(weight.grad, torch.tensor([60000.0]), "gradient_predivide_factor=size: 1/size before, size/size after")
expect_error(lambda: linear_step([[1.0]] * size, op=hvd.Sum, gradient_predivide_factor=2.0), ValueError,
             "needs op=hvd.Average")
expect_error(lambda: linear_step([[1.0]] * size, groups=2), ValueError, "groups/num_groups")
expect_error(lambda: linear_step([[1.0]] * size, num_groups=2), ValueError, "fusion_bytes")
expect_error(lambda: linear_step([[1.0]] * size, process_set=object()), ValueError, "process_set")

# Adasum of two vectors a, b: a(1 - a·b/2|a|²) + b(1 - a·b/2|b|²), pairs of ranks, then pairs of pairs.
if power_of_two:
    def combine(a, b):
        dot = sum(x * y for x, y in zip(a, b))
        a_norm, b_norm = sum(x * x for x in a), sum(y * y for y in b)
        ca = 1 - dot / a_norm * 0.5 if a_norm > 0 else 1.0
        cb = 1 - dot / b_norm * 0.5 if b_norm > 0 else 1.0
        return [x * ca + y * cb for x, y in zip(a, b)]

    def tree(vectors):
        while len(vectors) > 1:
            vectors = [combine(vectors[i], vectors[i + 1]) for i in range(0, len(vectors), 2)]
        return vectors[0]

    one_hot = [float(rank == i) for i in range(size)]
    check.equal(hvd.allreduce(torch.tensor(one_hot), op=hvd.Adasum), torch.ones(size), "orthogonal: the sum")
    check.equal(hvd.allreduce(torch.tensor([3.0, -1.5]), op=hvd.Adasum), torch.tensor([3.0, -1.5]),
                "equal: the vector itself")
    # Every dot product below is of small integers, exact in any summation order, so the
    # result is one bit pattern: at 4 ranks the first pair is orthogonal (sum), the
    # second equal (itself), and the last combination neither.
    everyone = {1: [[3.0, 4.0, 0.0]], 2: [[3.0, 4.0, 0.0], [1.0, 2.0, 2.0]],
                4: [[3.0, 4.0, 0.0], [4.0, -3.0, 0.0], [1.0, 2.0, 2.0], [1.0, 2.0, 2.0]]}[size]
    mine = torch.tensor(everyone[rank], dtype=torch.float64).view(3, 1)
    check.equal(hvd.allreduce(mine, op=hvd.Adasum), torch.tensor(tree(everyone), dtype=torch.float64).view(3, 1),
                "Adasum of general vectors, as the formula computes it")
    with_zero = [[0.0, 0.0]] + [[1.0, 2.0]] * (size - 1)  # a zero vector: coefficients stay 1, no division by 0
    check.equal(hvd.allreduce(torch.tensor(with_zero[rank]), op=hvd.Adasum), torch.tensor(tree(with_zero)),
                "Adasum with a zero vector")
    check(not torch.equal(torch.tensor(tree(everyone)), torch.tensor([sum(c) for c in zip(*everyone)])),
          "Adasum differs from the sum here (the test can tell)")
    in_place = torch.tensor(one_hot)
    hvd.synchronize(hvd.allreduce_async_(in_place, op=hvd.Adasum))
    check.equal(in_place, torch.ones(size), "in-place async Adasum")
    expect_error(lambda: hvd.allreduce(torch.ones(2, dtype=torch.int32), op=hvd.Adasum), ValueError, "floating")
    # The delta optimizer: SGD's steps -g_r, orthogonal, combine into their sum.
    optimizer, weight = linear_step([[float(r == i) for i in range(size)] for r in range(size)], op=hvd.Adasum)
    optimizer.step()
    check.equal(weight.detach(), -torch.ones(size), "DistributedOptimizer(op=Adasum): orthogonal steps add")
    expect_error(lambda: linear_step([[1.0]] * size, op=hvd.Adasum, compression=hvd.Compression.fp16),
                 ValueError, "compression with op=hvd.Adasum")
else:
    expect_error(lambda: hvd.allreduce(torch.ones(2), op=hvd.Adasum), ValueError, "power-of-two")
    expect_error(lambda: linear_step([[1.0]] * size, op=hvd.Adasum), ValueError, "power-of-two")

# sparse_allreduce_async: rank r holds rows r and r + 1 of a 6 x 2 matrix (rank 1 holds nothing).
def sparse_of(r, dtype):
    if r == 1:
        return torch.sparse_coo_tensor(torch.zeros((2, 0), dtype=torch.int64), torch.zeros(0, dtype=dtype), (6, 2))
    dense = torch.zeros(6, 2, dtype=dtype)
    dense[r] = torch.tensor([r + 1, -(r + 2)], dtype=dtype)
    dense[r + 1] = torch.tensor([3, 2 * r + 1], dtype=dtype)
    return dense.to_sparse()


for dtype in [torch.float32, torch.int64]:
    dense_sum = sum(sparse_of(r, dtype).to_dense() for r in range(size))
    handle = hvd.sparse_allreduce_async(sparse_of(rank, dtype), name="s", op=hvd.Sum)
    result = handle()
    check(result.is_sparse and result.is_coalesced(), "a coalesced sparse result")
    check.equal(result.to_dense(), dense_sum, f"sparse Sum {dtype}")
    average = hvd.synchronize(hvd.sparse_allreduce_async(sparse_of(rank, dtype), "s", hvd.Average))
    expected = dense_sum / size if dtype.is_floating_point else torch.tensor(
        [[math.trunc(Fraction(int(v), size)) for v in row] for row in dense_sum.tolist()], dtype=dtype)
    check.equal(average.to_dense(), expected, f"sparse Average {dtype}")
expect_error(lambda: hvd.sparse_allreduce_async(torch.ones(2), "d", hvd.Sum), ValueError, "sparse COO")
# The dense collectives refuse a sparse tensor (scale factors included: never applied to a sparse one).
expect_error(lambda: hvd.allreduce(sparse_of(rank, torch.float32), op=hvd.Sum, prescale_factor=0.5), ValueError,
             "sparse_allreduce_async")
expect_error(lambda: hvd.allreduce_(sparse_of(rank, torch.float32)), ValueError, "sparse_allreduce_async")

# sparse_as_dense: an embedding's sparse gradient, reduced as a dense one, handed back sparse.
torch.manual_seed(3)
embedding = torch.nn.Embedding(6, 2, sparse=True)
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(embedding.parameters(), lr=1.0), sparse_as_dense=True)
optimizer.zero_grad()
embedding(torch.tensor([rank, rank + 1, rank])).sum().backward()
optimizer.synchronize()
counts = torch.zeros(6, 2)
for r in range(size):
    for row in (r, r + 1, r):
        counts[row] += 1
check(embedding.weight.grad.is_sparse, "the gradient is sparse again")
check.equal(embedding.weight.grad.to_dense(), counts / size, "sparse_as_dense Average")
with optimizer.skip_synchronize():
    optimizer.step()
# Without sparse_as_dense, as Horovod: the sparse gradient is allgathered
# beside its bucket (a dense weight shares the bucket) and handed back
# sparse and coalesced; Sum here, so every value is exact.
embedding = torch.nn.Embedding(6, 2, sparse=True)
dense = torch.nn.Parameter(torch.zeros(3))
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(list(embedding.parameters()) + [dense], lr=1.0), op=hvd.Sum)
optimizer.zero_grad()
(embedding(torch.tensor([rank, rank + 1, rank])).sum() + (dense * float(rank + 1)).sum()).backward()
optimizer.synchronize()
check(embedding.weight.grad.is_sparse and embedding.weight.grad.is_coalesced(), "a sparse, coalesced gradient")
check.equal(embedding.weight.grad.to_dense(), counts, "sparse gradient Sum through the optimizer")
check.equal(dense.grad, torch.full((3,), float(size * (size + 1) // 2)), "the dense gradient beside it")
with optimizer.skip_synchronize():
    optimizer.step()

# Objects.
check(hvd.broadcast_object({"from": rank}, root_rank=size - 1, name="o") == {"from": size - 1}, "broadcast_object")
gathered = hvd.allgather_object({"rank": rank, "extra": [rank] * rank})
check(gathered == [{"rank": r, "extra": [r] * r} for r in range(size)], f"allgather_object: {gathered}")
expect_error(lambda: hvd.allgather_object(1, process_set=object()), ValueError, "process_set")

# broadcast_optimizer_state of fresh optimizers: a step on zero gradients gives
# each its state (as Horovod), and then every rank holds rank 0's.
torch.manual_seed(9)
model = torch.nn.Linear(3, 2)
frozen = torch.nn.Parameter(torch.ones(2), requires_grad=False)
adam = hvd.DistributedOptimizer(torch.optim.Adam(list(model.parameters()) + [frozen], lr=0.001 * (rank + 1)))
hvd.broadcast_optimizer_state(adam, root_rank=0)
state = adam.state_dict()
check(len(state["state"]) == 2 and state["param_groups"][0]["lr"] == 0.001, f"Adam's state everywhere: {state}")
check(frozen.grad is None and torch.equal(model.weight.grad, torch.zeros(2, 3)), "zero gradients where Horovod's")
digests = hvd.allgather_object(repr(state))
check(len(set(digests)) == 1, "every rank holds the same state")

# chorus's errors are HorovodInternalErrors too (and keep their own class):
# ranks naming different roots, found by the agreement before anything moves,
# so the job goes on.
check(issubclass(hvd.HorovodInternalError, RuntimeError), "HorovodInternalError is a RuntimeError")
try:
    hvd.allreduce(torch.ones(1))
    hvd.broadcast(torch.ones(4), root_rank=rank)
    check(False, "a broadcast whose ranks name different roots must fail")
except hvd.HorovodInternalError as error:
    check(isinstance(error, chorus.MismatchError) and "root" in str(error), f"also a MismatchError: {error!r}")
check.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(size)), "the job goes on")
hvd.shutdown()
print(f"hvd_extras OK {check.count}", flush=True)
