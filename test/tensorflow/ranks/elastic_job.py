"""hvd.elastic on chorus's shrink: 3 ranks train a step at a time (an allreduce of each rank's rank + 1, in a
tf.function traced before anything fails), committing every 2 steps. The last rank is SIGKILLed after step 5.
The survivors' step 6 fails naming it; elastic.run rolls them back to the commit of step 4, shrinks the job to
2 ranks (renumbered) and runs the rest: each step then adds 1 + 2 instead of 1 + 2 + 3. The traced function
runs on the survivors' Context (its handle rebound), and the result is exact."""

import os
import signal

import numpy as np
import tensorflow as tf

import chorus.tensorflow as hvd
from common import Checker

hvd.init()
first_size = hvd.size()
check = Checker(hvd.rank())
weights = tf.Variable(tf.zeros([4]))


@tf.function
def step():
    weights.assign_add(hvd.allreduce(tf.fill([4], tf.cast(hvd.rank_op() + 1, tf.float32)), op=hvd.Sum))


state = hvd.elastic.TensorFlowState([weights], batch=0)
resets = []
state.register_reset_callbacks([lambda: resets.append(hvd.size())])


@hvd.elastic.run
def train(state):
    while state.batch < 10:
        step()
        state.batch += 1
        if state.batch == 5 and hvd.size() == first_size and hvd.rank() == first_size - 1:
            os.kill(os.getpid(), signal.SIGKILL)
        if state.batch % 2 == 0:
            state.commit()
    return state.batch


done = train(state)
full, shrunk = first_size * (first_size + 1) / 2, (first_size - 1) * first_size / 2
check.true(done == 10 and hvd.size() == first_size - 1, f"trained to {done} on {hvd.size()} ranks")
check.true(resets == [first_size - 1], f"resets: {resets}")
check.equal(weights, np.full(4, 4 * full + 6 * shrunk, np.float32),
            "4 committed steps of the whole job, then 6 of the survivors (step 5 redone)")
print(f"elastic OK {hvd.rank()} {check.count}", flush=True)
