"""The MLP of ddp.py trained through chorus.torch.hvd's DistributedOptimizer:
`hvd_train.py <backend> [steps [fusion_bytes]]`. Prints what ddp.py prints
("loss <step> <float.hex>", "params <sha256>"), so the test compares the two
runs step by step. Different initial weights and optimizer states per rank:
broadcast_parameters and broadcast_optimizer_state must make them rank 0's.
With CHORUS_TEST_EXIT_RANK=r and CHORUS_TEST_EXIT_STEP=s, rank r exits at
step s and the others must raise an error naming it within the timeout."""

import sys

import torch

import chorus.torch.hvd as hvd
from common import Checker, make_mlp, train_mlp

backend = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 50
fusion_bytes = int(sys.argv[3]) if len(sys.argv) > 3 else None
timeout = 20
torch.set_num_threads(1)
hvd.init(backend, timeout=timeout)
rank, size = hvd.rank(), hvd.size()
check = Checker(rank)
check(0 <= hvd.local_rank() < hvd.local_size() <= size, f"local rank {hvd.local_rank()} of {hvd.local_size()}")

model = make_mlp(rank)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
# A rank-specific momentum buffer: broadcast_optimizer_state must replace it with rank 0's (which has
# none yet, so rank 0 first steps on zero gradients, as Horovod does: zero momentum buffers).
if rank != 0:
    for parameter in model.parameters():
        optimizer.state[parameter]["momentum_buffer"] = torch.full_like(parameter, float(rank))
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
check(len(optimizer.state) == len(list(model.parameters())) and all(
    torch.equal(state["momentum_buffer"], torch.zeros_like(state["momentum_buffer"]))
    for state in optimizer.state.values()), "rank 0's zero momentum buffers everywhere")
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     fusion_bytes=fusion_bytes)
check(isinstance(optimizer, torch.optim.SGD), "the distributed optimizer is still an SGD")
train_mlp(rank, check, model, model, optimizer, steps, timeout, hvd.shutdown)
print(f"buckets {len(optimizer._chorus_fusion.buckets)}", flush=True)
hvd.shutdown()
print(f"hvd_train OK {check.count}", flush=True)
