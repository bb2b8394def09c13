"""chorus.torch.hvd.elastic: 3 ranks train with DistributedOptimizer (op=Sum, SGD lr 1, each rank's
gradient -(rank + 1), so each step adds the sum of rank + 1 over the ranks), committing every 2 steps. The
last rank leaves without a word after step 5; the survivors' step 6 fails naming it, elastic.run rolls them
back to the commit of step 4, shrinks the job to 2 ranks (renumbered, a fresh default group) and runs the
rest: each step then adds 1 + 2. An ElasticSampler in the state repartitions what is left of the epoch.
Exact results throughout."""

import os

import torch

import chorus.torch.hvd as hvd
from common import Checker

torch.set_num_threads(1)
hvd.init(timeout=20)
first_size = hvd.size()
check = Checker(hvd.rank())
model = torch.nn.Module()
model.w = torch.nn.Parameter(torch.zeros(4))
weights = model.w
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                     named_parameters=model.named_parameters(), op=hvd.Sum)
sampler = hvd.elastic.ElasticSampler(list(range(100)), shuffle=False)
state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, batch=0)
resets = []
state.register_reset_callbacks([lambda: resets.append(hvd.size())])


@hvd.elastic.run
def train(state):
    while state.batch < 10:
        optimizer.zero_grad()
        (-(weights * float(hvd.rank() + 1)).sum()).backward()
        optimizer.step()
        state.sampler.record_batch(state.batch, 3)
        state.batch += 1
        if state.batch == 5 and hvd.size() == first_size and hvd.rank() == first_size - 1:
            os._exit(0)  # no goodbye: the others see a lost peer
        if state.batch % 2 == 0:
            state.commit()
    return state.batch


done = train(state)
full, shrunk = first_size * (first_size + 1) / 2, (first_size - 1) * first_size / 2
check(done == 10 and hvd.size() == first_size - 1, f"trained to {done} on {hvd.size()} ranks")
check(resets == [first_size - 1], f"resets: {resets}")
check.equal(weights.detach(), torch.full((4,), 4 * full + 6 * shrunk),
            "4 committed steps of the whole job, then 6 of the survivors (step 5 redone)")
# 4 steps of 3 samples on 3 ranks, then 6 on 2: the sampler's count.
check(sampler.processed_num == 4 * 3 * first_size + 6 * 3 * (first_size - 1), f"processed {sampler.processed_num}")
# At the reset (rolled back to 4 steps) the survivors split what was left of the epoch between them.
left = 100 - 4 * 3 * first_size
check(len(sampler) == (left + hvd.size() - 1) // hvd.size(), f"the sampler's share of {left} left: {len(sampler)}")
hvd.shutdown()
print(f"hvd_elastic OK {check.count}", flush=True)
