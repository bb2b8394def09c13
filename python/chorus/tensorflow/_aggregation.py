"""Local gradient aggregation (Horovod's backward_passes_per_step): each
step's gradients are added up locally, and only every
backward_passes_per_step-th step reduces the sums across the ranks and
updates the variables; the steps between only count. With
average_aggregated_gradients the sums are divided by the steps, as in
Horovod. The Keras optimizer and the TensorFlow 1 optimizer share it.

Everything is TensorFlow ops on variables (the sums, `counter`) and
tf.cond on the counter, so it works eagerly, in a tf.function and in a
TensorFlow 1 graph; every rank's counter is the same, so every rank takes
the same branch and the reductions stay matched."""

import tensorflow as tf


class LocalAggregation:
    def __init__(self, backward_passes_per_step, average_aggregated_gradients, sparse_as_dense, reduce):
        """reduce(gradients, variables) -> the gradients reduced across the ranks (Nones kept)."""
        if backward_passes_per_step < 1:
            raise ValueError(f"chorus.tensorflow: backward_passes_per_step must be 1 or more, not "
                             f"{backward_passes_per_step}")
        self.backward_passes_per_step = backward_passes_per_step
        self.average_aggregated_gradients = average_aggregated_gradients
        self.sparse_as_dense = sparse_as_dense
        self._reduce = reduce
        self.counter = tf.Variable(0, dtype=tf.int32, trainable=False, name="chorus_aggregation_counter")
        self._sums = None

    def _dense(self, gradient):
        if isinstance(gradient, tf.IndexedSlices):
            if not self.sparse_as_dense:
                raise ValueError("chorus.tensorflow: tf.IndexedSlices gradients are aggregated locally "
                                 "(backward_passes_per_step > 1) only with sparse_as_dense=True, as in Horovod")
            return tf.convert_to_tensor(gradient)
        return gradient

    def accumulate(self, gradients, variables):
        """Adds this step's gradients to the sums. On a cycle's last step: the sums reduced across the ranks
        (divided by the steps if asked), with the sums and the counter cleared; on the others the sums so
        far. Nones stay None."""
        gradients = [None if g is None else self._dense(g) for g in gradients]
        if self._sums is None:
            self._sums = [None if g is None else
                          tf.Variable(tf.zeros(g.shape, g.dtype), trainable=False, name="chorus_aggregated_gradient")
                          for g in gradients]
        present = [i for i, g in enumerate(gradients) if g is not None]
        added = [self._sums[i].assign_add(gradients[i]) for i in present]
        with tf.control_dependencies([a for a in added if a is not None]):
            count = self.counter.assign_add(1)

        def reduce_and_clear():
            sums = [self._sums[i].read_value() for i in present]
            reduced = self._reduce(sums, [variables[i] for i in present])
            if self.average_aggregated_gradients:
                reduced = [r / tf.cast(self.backward_passes_per_step, r.dtype) for r in reduced]
            with tf.control_dependencies(reduced):
                cleared = [self._sums[i].assign(tf.zeros_like(self._sums[i])) for i in present]
                cleared.append(self.counter.assign(0))
            with tf.control_dependencies([c for c in cleared if c is not None]):
                return [tf.identity(r) for r in reduced]

        def sums_so_far():
            return [self._sums[i].read_value() for i in present]

        results = tf.cond(tf.equal(count, self.backward_passes_per_step), reduce_and_clear, sums_so_far)
        merged = [None] * len(gradients)
        for i, r in zip(present, tf.nest.flatten(results)):
            merged[i] = r
        return merged

    def apply(self, gradients, apply_update, count_step):
        """apply_update() on a cycle's last step (the counter is back at 0), count_step() on the others."""
        with tf.control_dependencies([g for g in gradients if g is not None]):
            updating = tf.equal(self.counter.read_value(), 0)

        def after(step, value):
            # In a TensorFlow 1 graph a branch's ops run when its output needs them.
            done = [r for r in tf.nest.flatten(step()) if tf.is_tensor(r) or isinstance(r, tf.Operation)]
            with tf.control_dependencies(done):
                return tf.constant(value)

        return tf.cond(updating, lambda: after(apply_update, True), lambda: after(count_step, False))
