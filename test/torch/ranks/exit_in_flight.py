"""Leaving with calls in flight, neither waited for nor destroyed: the
interpreter exits cleanly (chorus.torch finishes them at exit, while Python
can still take their tensors back). Prints "exit OK" before leaving; the test
also needs every rank's exit status to be 0."""

import torch
import torch.distributed as dist

from common import init

rank, size = init()
tensors = [torch.ones(1 << 18) for _ in range(16)]
works = [dist.all_reduce(tensor, async_op=True) for tensor in tensors]
futures = [work.get_future().then(lambda future: future.value()[0].sum()) for work in works]
print("exit OK", flush=True)
