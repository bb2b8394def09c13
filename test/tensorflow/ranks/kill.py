"""The last rank is SIGKILLed; the others' next op raises tf.errors.UnavailableError naming it, well
within the Context's timeout (no hang), and so does a tf.function's."""

import os
import signal
import time

import numpy as np
import tensorflow as tf

import chorus.tensorflow as hvd
from common import Checker

hvd.init()
rank, size = hvd.rank(), hvd.size()
check = Checker(rank)
check.equal(hvd.allreduce(tf.constant([1.0]), op=hvd.Sum), np.array([float(size)], np.float32), "before the kill")
if rank == size - 1:
    os.kill(os.getpid(), signal.SIGKILL)

timeout = float(os.environ["CHORUS_TIMEOUT"])
started = time.monotonic()
try:
    hvd.allreduce(tf.ones([1 << 16]), op=hvd.Sum)
    raise AssertionError(f"rank {rank}: an allreduce with rank {size - 1} dead returned")
except tf.errors.UnavailableError as error:
    elapsed = time.monotonic() - started
    check.true(f"rank {size - 1}" in str(error), f"the error names the dead rank: {error}")
    check.true(elapsed < timeout / 2, f"the error came after {elapsed:.1f} s of a {timeout} s timeout")


@tf.function
def graph(tensor):
    return hvd.allgather(tensor)


try:
    graph(tf.ones([2]))
    raise AssertionError(f"rank {rank}: a tf.function's allgather with rank {size - 1} dead returned")
except tf.errors.OpError as error:
    check.true(f"rank {size - 1}" in str(error), f"the tf.function's error names the dead rank: {error}")
print(f"killed OK {rank} {check.count}", flush=True)
