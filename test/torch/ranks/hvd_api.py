"""chorus.torch.hvd's calls one by one, every result exact: allreduce (every
op, dtype, in place and not, async), Average of 16-bit floats accumulated in
float32, allgather of different first dimensions, broadcast, broadcast_object,
broadcast_optimizer_state of a real Adam state, the optimizer's rules
(backward_passes_per_step, zero_grad before step, unused parameters,
skip_synchronize), and bad arguments."""

import io
import warnings

import torch

import chorus.torch.hvd as hvd
from common import DTYPES, FLOATS, Checker

torch.set_num_threads(1)
hvd.init("chorus", timeout=30)
rank, size = hvd.rank(), hvd.size()
check = Checker(rank)
check(hvd.is_initialized(), "initialized")

# allreduce: rank r holds (r + 1) * [1, 2, ..., 6]; sums, products, min and
# max of small integers are exact in every dtype.
base = torch.arange(1, 7)
factor_sum = size * (size + 1) // 2
for dtype in DTYPES:
    mine = (base * (rank + 1)).to(dtype)
    check.equal(hvd.allreduce(mine, op=hvd.Sum), (base * factor_sum).to(dtype), f"Sum {dtype}")
    check.equal(mine, (base * (rank + 1)).to(dtype), f"allreduce leaves its input alone ({dtype})")
    check.equal(hvd.allreduce(mine, op=hvd.Min), base.to(dtype), f"Min {dtype}")
    check.equal(hvd.allreduce(mine, op=hvd.Max), (base * size).to(dtype), f"Max {dtype}")
    if dtype in FLOATS:
        # The average of r + 1 over the ranks: (size + 1) / 2, exact in binary for 2 and 3 ranks.
        check.equal(hvd.allreduce(mine), (base * (size + 1) / 2).to(dtype), f"Average {dtype}")
    in_place = mine.clone()
    check(hvd.allreduce_(in_place, op=hvd.Sum) is in_place, "allreduce_ returns its tensor")
    check.equal(in_place, (base * factor_sum).to(dtype), f"in-place Sum {dtype}")
product = hvd.allreduce(torch.full((3,), float(rank + 1)), op=hvd.Product)
expected_product = 1.0
for r in range(size):
    expected_product *= r + 1
check.equal(product, torch.full((3,), expected_product), "Product")
# Average of integers, as Horovod's: summed, then divided and truncated toward zero.
ints = torch.tensor([rank + 1, -(rank + 1), 5], dtype=torch.int32)
half_up = (size + 1) // 2  # (size + 1) / 2 truncated: 1 at 2 ranks, 2 at 3
check.equal(hvd.allreduce(ints), torch.tensor([half_up, -half_up, 5], dtype=torch.int32), "Average of int32")
# prescale and postscale multiply before and after the sum.
check.equal(hvd.allreduce(torch.full((3,), float(rank + 1)), op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5),
            torch.full((3,), float(factor_sum)), "prescale 2, postscale 0.5")
check.equal(hvd.allreduce(torch.full((3,), 4.0), prescale_factor=0.25), torch.ones(3), "Average of 4 prescaled by 1/4")
# Integers are scaled as Horovod scales them: in float64, truncated toward zero (never by a factor cast to an integer).
check.equal(hvd.allreduce(torch.full((2,), 5, dtype=torch.int32), op=hvd.Sum, postscale_factor=0.5),
            torch.full((2,), int(5 * size * 0.5), dtype=torch.int32), "an int32 sum times 0.5")
check.equal(hvd.allreduce(torch.full((2,), -5, dtype=torch.int64), op=hvd.Sum, prescale_factor=0.5),
            torch.full((2,), -2 * size, dtype=torch.int64), "each rank's -5 times 0.5 is -2 (toward zero)")
# average= as Horovod spells it.
check.equal(hvd.allreduce(torch.ones(4), average=False), torch.full((4,), float(size)), "average=False sums")

# Average of float16 in float32: 60000 on every rank sums past float16's
# largest value (65504); the average, 60000, is representable.
big = torch.full((5,), 60000.0, dtype=torch.float16)
check(torch.isinf(big + big).all(), "the float16 sum overflows (the test would not tell otherwise)")
check.equal(hvd.allreduce(big), big, "float16 Average accumulates in float32")
# bfloat16 keeps 8 bits: 256 + 1 + 1 in bfloat16 loses both ones; float32
# keeps them. (At 2 ranks there is nothing to see: halving a rounded sum
# rounds like halving the exact one, and bfloat16 overflows where float32 does.)
if size >= 3:
    values = [256.0] + [1.0] * (size - 1)
    exact = torch.tensor([sum(values) / size], dtype=torch.float64).to(torch.bfloat16)
    running = torch.tensor([values[0]], dtype=torch.bfloat16)
    for value in values[1:]:
        running = running + torch.tensor([value], dtype=torch.bfloat16)
    naive = running / size
    check(not torch.equal(naive, exact), f"bfloat16 accumulation would differ ({naive} vs {exact})")
    check.equal(hvd.allreduce(torch.tensor([values[rank]], dtype=torch.bfloat16)), exact,
                "bfloat16 Average accumulates in float32")

# Async: several in flight, completed in any order of synchronize.
handles = [hvd.allreduce_async(torch.full((1000,), float(rank + i)), op=hvd.Sum) for i in range(5)]
for i, handle in reversed(list(enumerate(handles))):
    check.equal(hvd.synchronize(handle), torch.full((1000,), float(factor_sum - size + size * i)), f"async {i}")
    check(hvd.poll(handle), "poll after synchronize")

# allgather: rank r contributes r + 1 rows of r.
gathered = hvd.allgather(torch.full((rank + 1, 2), rank, dtype=torch.int32))
expected = torch.cat([torch.full((r + 1, 2), r, dtype=torch.int32) for r in range(size)])
check.equal(gathered, expected, "allgather of different first dimensions")

# broadcast, out of place and in place, from every root.
for root in range(size):
    mine = torch.full((7,), float(rank * 10))
    check.equal(hvd.broadcast(mine, root_rank=root), torch.full((7,), float(root * 10)), f"broadcast from {root}")
    check.equal(mine, torch.full((7,), float(rank * 10)), "broadcast leaves its input alone")
    hvd.broadcast_(mine, root_rank=root)
    check.equal(mine, torch.full((7,), float(root * 10)), f"broadcast_ from {root}")
obj = hvd.broadcast_object({"rank": rank, "tensor": torch.arange(3) * rank}, root_rank=size - 1)
check(obj["rank"] == size - 1 and torch.equal(obj["tensor"], torch.arange(3) * (size - 1)), "broadcast_object")

# broadcast_optimizer_state: every rank steps Adam on its own gradients; afterwards all hold root's state.
torch.manual_seed(5)
model = torch.nn.Linear(4, 3)
adam = torch.optim.Adam(model.parameters(), lr=0.01 * (rank + 1))
for parameter in model.parameters():
    parameter.grad = torch.full_like(parameter, float(rank + 1))
adam.step()
hvd.broadcast_optimizer_state(adam, root_rank=0)
stream = io.BytesIO()
torch.save(adam.state_dict(), stream)
digest = hvd.broadcast_object(stream.getvalue(), root_rank=0)
check(stream.getvalue() == digest, "every rank's Adam state is rank 0's, bytes for bytes")
check(adam.param_groups[0]["lr"] == 0.01, "and so is the learning rate")

# The optimizer: two backward passes per step; a parameter no rank uses.
torch.manual_seed(6)
model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Linear(5, 2))
unused = torch.nn.Parameter(torch.zeros(4))
sgd = torch.optim.SGD(list(model.parameters()) + [unused], lr=1.0)
optimizer = hvd.DistributedOptimizer(sgd, backward_passes_per_step=2, op=hvd.Sum, fusion_bytes=64)
check(len(optimizer._chorus_fusion.buckets) > 2, "64-byte fusion buffers make several buckets")
for parameter in model.parameters():
    parameter.requires_grad_(True)
inputs = torch.ones(1, 3)
optimizer.zero_grad()
for _ in range(2):
    model(inputs).sum().backward()
local = [parameter.grad.clone() for parameter in model.parameters()]
optimizer.synchronize()
for parameter, grad in zip(model.parameters(), local):
    check.equal(parameter.grad, grad * size, "backward_passes_per_step=2: the sum of both passes over ranks")
check.equal(unused.grad, torch.zeros(4), "an unused parameter reduces as zeros")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with optimizer.skip_synchronize():
        optimizer.step()
check(not caught, f"step() inside skip_synchronize() warns nothing: {[str(w.message) for w in caught]}")
# synchronize() then step() without skip_synchronize() warns, as Horovod's, and reduces nothing twice.
optimizer.zero_grad()
model(inputs).sum().backward()
model(inputs).sum().backward()
optimizer.synchronize()
reduced = [parameter.grad.clone() for parameter in model.parameters()]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    optimizer.step()
check(len(caught) == 1 and "without optimizer.skip_synchronize()" in str(caught[0].message),
      f"step() after synchronize() warns once: {[str(w.message) for w in caught]}")
check(all(torch.equal(p.grad, r) for p, r in zip(model.parameters(), reduced)), "the gradients were not reduced twice")
# A third pass before step() is an error, as is zero_grad() with reductions in flight.
optimizer.zero_grad()
model(inputs).sum().backward()
model(inputs).sum().backward()
try:
    model(inputs).sum().backward()
    check(False, "a third backward pass before step() must fail")
except RuntimeError as error:
    check("computed 3 times" in str(error), f"the error says why: {error}")
try:
    optimizer.zero_grad()
    check(False, "zero_grad with reductions in flight must fail")
except RuntimeError as error:
    check("before optimizer.step()" in str(error), f"the error says why: {error}")
optimizer.step()

# Bad arguments: clear errors, and the job carries on.
for call, expected_text in [
    (lambda: hvd.broadcast(torch.ones(2), root_rank=size), "not a rank"),
    (lambda: hvd.allreduce(torch.ones(2), average=True, op=hvd.Sum), "not both"),
    (lambda: hvd.allreduce([1, 2]), "expected a torch.Tensor"),
    (lambda: hvd.DistributedOptimizer(sgd, backward_passes_per_step=0), "backward_passes_per_step"),
]:
    try:
        call()
        check(False, f"expected an error containing {expected_text!r}")
    except (ValueError, TypeError) as error:
        check(expected_text in str(error), f"{expected_text!r} in {error}")
check.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(size)), "the job carries on")
hvd.shutdown()
check(not hvd.is_initialized(), "shutdown")
print(f"hvd_api OK {check.count}", flush=True)
