"""What every collective of chorus.tensorflow shares: Horovod's reduction
constants, its global process set, the op library's name for an op, and
the attributes that tell the kernels how to match a call with the other
ranks' (adapters/negotiation/negotiator.h)."""

import itertools
import weakref

import tensorflow as tf
from tensorflow.python.framework import func_graph

import chorus

from . import _job

# Horovod's reduction constants; the values are chorus's ReduceOps.
Average = chorus.AVG
Sum = chorus.SUM
Min = chorus.MIN
Max = chorus.MAX
Product = chorus.PROD


class _AdasumConstant:
    def __repr__(self):
        return "Adasum"


# Horovod's op=Adasum (allreduce, DistributedGradientTape, keras.DistributedOptimizer): _adasum.py.
Adasum = _AdasumConstant()


class _GlobalProcessSet:
    """Horovod's global_process_set: every rank. The only process set chorus.tensorflow has."""

    process_set_id = 0

    def size(self):
        return _job.size()

    def rank(self):
        return _job.rank()

    def included(self):
        return _job.is_initialized()

    def __repr__(self):
        return "global_process_set"


global_process_set = _GlobalProcessSet()


def check_process_set(process_set, call):
    if process_set is not global_process_set:
        raise ValueError(f"chorus.tensorflow.{call}: only global_process_set is supported, not {process_set!r}")


_OP_NAMES = {op: op.name.lower() for op in chorus.ReduceOp.__members__.values()}


def op_name(op, call):
    """The op library's name for a Horovod or chorus reduction constant."""
    name = _OP_NAMES.get(op)
    if name is not None:
        return name
    if op is Adasum:
        raise ValueError(f"chorus.tensorflow.{call}: Adasum is an allreduce op; {call} takes Average, Sum, Min, "
                         "Max, Product or a chorus.ReduceOp")
    raise ValueError(f"chorus.tensorflow.{call}: op must be Average, Sum, Min, Max, Product, Adasum (allreduce) or "
                     f"a chorus.ReduceOp, not {op!r}")


def handle_average_backwards_compatibility(op, average):
    """Horovod's rule: `average` (deprecated) and `op` exclusive; neither means Average."""
    if op is not None:
        if average is not None:
            raise ValueError("chorus.tensorflow.allreduce: pass op or average (deprecated), not both")
        return op
    if average is not None:
        return Average if average else Sum
    return Average


def in_program_order():
    """True where every rank runs its ops in program order: eagerly, and in a
    tf.function (whose automatic control dependencies chain stateful ops).
    False in a TensorFlow 1 graph, whose independent ops run in any order."""
    if tf.executing_eagerly():
        return True
    return bool(getattr(tf.compat.v1.get_default_graph(), "_add_control_dependencies", False))


# Per root graph: (its number among the roots, the collectives made in it so far).
_roots = weakref.WeakKeyDictionary()
_root_numbers = itertools.count()


def _numbered(root):
    """The root's number and the next collective's number in it."""
    if root not in _roots:
        _roots[root] = [next(_root_numbers), 0]
    numbers = _roots[root]
    numbers[1] += 1
    return numbers[0], numbers[1] - 1


def matching(name, kind):
    """The attributes that tell a kernel how its call is matched with the other ranks' calls
    (adapters/negotiation/negotiator.h) and what it is called there.

    Eagerly: in program order, the name the caller gave checked. In a
    tf.function: in program order, checked against a name numbering the
    collectives the function makes (in the order it makes them, branches
    of its conds included), so that ranks taking different branches fail
    instead of mixing. In a TensorFlow 1 graph: by a name numbering the
    collectives made in that graph (and in the cond and while bodies built
    in it), the same on every rank that builds the same graph, as
    Horovod's names are."""
    attributes = {"context": _job.handle(), "match_by_name": False}
    if tf.executing_eagerly():
        attributes["tensor_name"] = name or ""
        return attributes
    chain = [tf.compat.v1.get_default_graph()]
    while getattr(chain[-1], "outer_graph", None) is not None:
        chain.append(chain[-1].outer_graph)
    label = name or kind
    if in_program_order():
        function = [g for g in chain if isinstance(g, func_graph.FuncGraph)][-1]
        _, number = _numbered(function)
        attributes["tensor_name"] = f"{label} #{number}"
        return attributes
    root, number = _numbered(chain[-1])
    attributes["tensor_name"] = f"{label} #{root}.{number}"
    attributes["match_by_name"] = True
    return attributes
