"""DistributedGradientTape and PartialDistributedGradientTape: a
tf.GradientTape whose gradient() allreduces what it computed (Average by
default), as Horovod's; and reduce_gradients, which the Keras and
TensorFlow 1 optimizers share with them.

Dense gradients of one dtype are reduced together, as grouped allreduces
of up to CHORUS_FUSION_BYTES each (default 64 MiB, Horovod's fusion
threshold): one collective where Horovod's background thread would fuse
them, without its cycle time. `groups` (a number, or lists of variables)
sets the grouping instead, as in Horovod. Sparse gradients
(tf.IndexedSlices) are allgathered one by one unless sparse_as_dense.
Sources registered as local (register_local_source, local_layers) are not
reduced; their gradients are divided by the ranks (scale_local_gradients,
as Horovod does)."""

import tensorflow as tf

from .. import _environment
from . import _job
from ._adasum import check_adasum
from ._compression import Compression
from ._ops import Adasum, Average, Sum, check_process_set, global_process_set
from ._reductions import allreduce, grouped_allreduce

_DEFAULT_FUSION_BYTES = 64 << 20


def predivide_scales(op, gradient_predivide_factor):
    """(prescale, postscale): Horovod's split of an Average by gradient_predivide_factor (the kernel divides the
    postscale by the ranks)."""
    if gradient_predivide_factor == 1.0:
        return 1.0, 1.0
    if op is not Average:
        raise ValueError("chorus.tensorflow: gradient_predivide_factor needs op=Average (as in Horovod)")
    return 1.0 / gradient_predivide_factor, gradient_predivide_factor


def _buckets(indexed, limit):
    """Dense (index, gradient) pairs in buckets of one dtype and at most `limit` bytes (a bigger one alone)."""
    by_dtype = {}
    for index, gradient in indexed:
        by_dtype.setdefault(gradient.dtype, []).append((index, gradient))
    buckets = []
    for members in by_dtype.values():
        bucket, size = [], 0
        for index, gradient in members:
            shape = gradient.shape
            nbytes = (shape.num_elements() or 0) * gradient.dtype.size if shape.is_fully_defined() else limit
            if bucket and size + nbytes > limit:
                buckets.append(bucket)
                bucket, size = [], 0
            bucket.append((index, gradient))
            size += nbytes
        if bucket:
            buckets.append(bucket)
    return buckets


def _explicit_groups(gradients, variables, groups):
    """Horovod's groups: a count splits the gradients into that many groups in order; lists of variables name
    them (each variable not listed is a group of its own)."""
    present = [(i, g) for i, g in enumerate(gradients) if g is not None]
    if isinstance(groups, list):
        position = {variable_key(v): i for i, v in enumerate(variables or [])}
        grouped, seen = [], set()
        for group in groups:
            members = [(position[variable_key(v)], gradients[position[variable_key(v)]]) for v in group
                       if variable_key(v) in position and gradients[position[variable_key(v)]] is not None]
            seen.update(i for i, _ in members)
            if members:
                grouped.append(members)
        grouped.extend([pair] for pair in present if pair[0] not in seen)
        return grouped
    count = min(int(groups), len(present)) or 1
    size, extra = divmod(len(present), count)
    grouped, start = [], 0
    for group in range(count):
        end = start + size + (1 if group < extra else 0)
        if end > start:
            grouped.append(present[start:end])
        start = end
    return grouped


def reduce_gradients(gradients, variables=None, compression=Compression.none, op=Average, gradient_predivide_factor=1.0,
                     groups=None, sparse_as_dense=False):
    """Each gradient allreduced over the ranks with op (None stays None), as Horovod's optimizers and tapes
    reduce them."""
    prescale, postscale = predivide_scales(op, gradient_predivide_factor)
    gradients = [tf.convert_to_tensor(g) if sparse_as_dense and isinstance(g, tf.IndexedSlices) else g
                 for g in gradients]
    results = list(gradients)
    reduce = {"compression": compression, "op": op, "prescale_factor": prescale, "postscale_factor": postscale}
    if groups is not None:
        for group in _explicit_groups(gradients, variables, groups):
            for (index, _), reduced in zip(group, grouped_allreduce([g for _, g in group], **reduce)):
                results[index] = reduced
        return results
    sparse = [(i, g) for i, g in enumerate(gradients) if isinstance(g, tf.IndexedSlices)]
    dense = [(i, g) for i, g in enumerate(gradients) if g is not None and not isinstance(g, tf.IndexedSlices)]
    for index, gradient in sparse:
        results[index] = allreduce(gradient, **reduce)
    if op is Adasum:
        for index, gradient in dense:
            results[index] = allreduce(gradient, **reduce)
        return results
    for bucket in _buckets(dense, _environment.fusion_bytes(_DEFAULT_FUSION_BYTES)):
        if len(bucket) == 1:
            index, gradient = bucket[0]
            results[index] = allreduce(gradient, **reduce)
            continue
        for (index, _), reduced in zip(bucket, grouped_allreduce([g for _, g in bucket], **reduce)):
            results[index] = reduced
    return results


def variable_key(variable):
    """What identifies a variable in a set: TensorFlow's ref(), or for a Keras 3 variable (which has none and
    compares elementwise) the object itself."""
    return variable.ref() if hasattr(variable, "ref") else ("object", id(variable))


def divided_by_ranks(gradient):
    """A local source's gradient scaled as Horovod scales it (scale_local_gradients)."""
    ranks = float(_job.size())
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(gradient.values / ranks, gradient.indices, gradient.dense_shape)
    return gradient / ranks


class _DistributedGradientTape:
    """The methods a wrapped tape's class gains (see DistributedGradientTape)."""

    def register_local_source(self, source):
        """source's gradient stays this rank's own: it is not reduced (divided by the ranks unless
        scale_local_gradients=False)."""
        self._chorus_local_sources.add(variable_key(source))

    def gradient(self, target, sources, output_gradients=None, use_generic_names=False, **options):
        gradients = super().gradient(target, sources, output_gradients, **options)
        flat_sources = tf.nest.flatten(sources)
        flat = tf.nest.flatten(gradients)
        local = [variable_key(s) in self._chorus_local_sources for s in flat_sources]
        shared = [i for i, is_local in enumerate(local) if not is_local]
        reduced = reduce_gradients([flat[i] for i in shared], [flat_sources[i] for i in shared],
                                   **self._chorus_reduction)
        for i, r in zip(shared, reduced):
            flat[i] = r
        if self._chorus_scale_local_gradients:
            for i, is_local in enumerate(local):
                if is_local and flat[i] is not None:
                    flat[i] = divided_by_ranks(flat[i])
        return tf.nest.pack_sequence_as(gradients, flat)

    def get_local_and_global_gradients(self, target, sources, output_gradients=None, use_generic_names=False):
        """([(local source, gradient)], [(other source, gradient)]), the gradients as gradient() gives them."""
        gradients = self.gradient(target, sources, output_gradients)
        local, shared = [], []
        for source, gradient in zip(sources, gradients):
            (local if variable_key(source) in self._chorus_local_sources else shared).append((source, gradient))
        return local, shared


def DistributedGradientTape(gradtape, device_dense="", device_sparse="", compression=Compression.none,
                            sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0, num_groups=0,
                            groups=None, process_set=global_process_set, scale_local_gradients=True):
    """The tape, whose gradient() now returns the gradients allreduced over
    the ranks (op, Average by default)."""
    check_process_set(process_set, "DistributedGradientTape")
    if op is not Average and op is not Sum and op is not Adasum:
        raise ValueError(f"chorus.tensorflow.DistributedGradientTape: op must be Average, Sum or Adasum, not {op!r}")
    if op is Adasum:
        check_adasum(None, "DistributedGradientTape")
    predivide_scales(op, gradient_predivide_factor)
    if num_groups != 0 and groups is None:
        groups = num_groups
    if groups is not None and not (isinstance(groups, list) or groups > 0):
        raise ValueError("chorus.tensorflow.DistributedGradientTape: groups must be a positive number or a list of "
                         "lists of variables (as in Horovod)")
    # A subclass of the tape's own class carrying its state: still an
    # instance of tf.GradientTape (and of whatever the tape was).
    base = type(gradtape)
    cls = type(base.__name__, (_DistributedGradientTape, base), {})
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)
    tape._chorus_reduction = {"compression": compression, "op": op, "gradient_predivide_factor": gradient_predivide_factor,
                              "groups": groups, "sparse_as_dense": sparse_as_dense}
    tape._chorus_local_sources = set()
    tape._chorus_scale_local_gradients = scale_local_gradients
    return tape


def local_variables_of(local_layers, call):
    """The trainable variables of Keras layers (one or a list), for the Partial* wrappers."""
    if local_layers is None:
        return []
    import keras
    layers = [local_layers] if isinstance(local_layers, keras.layers.Layer) else list(local_layers)
    if not all(isinstance(layer, keras.layers.Layer) for layer in layers):
        raise ValueError(f"chorus.tensorflow.{call}: local_layers must be Keras layers (as in Horovod)")
    return [variable for layer in layers for variable in layer.trainable_weights]


def PartialDistributedGradientTape(gradtape, device_dense="", device_sparse="", compression=Compression.none,
                                   sparse_as_dense=False, op=Average, gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, process_set=global_process_set, local_layers=None,
                                   scale_local_gradients=True):
    """DistributedGradientTape whose local_layers' gradients are not reduced (Horovod's)."""
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression, sparse_as_dense, op,
                                   gradient_predivide_factor, num_groups, groups, process_set, scale_local_gradients)
    for variable in local_variables_of(local_layers, "PartialDistributedGradientTape"):
        tape.register_local_source(variable)
    return tape
