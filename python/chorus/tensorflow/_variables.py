"""broadcast_variables, broadcast_global_variables and BroadcastGlobalVariablesHook:
every variable set to root_rank's value, as Horovod's."""

import tensorflow as tf

from ._movement import broadcast, broadcast_
from ._ops import check_process_set, global_process_set


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns root_rank's value of each variable to it on every rank, in the
    given order (the same on every rank). Returns the assignments grouped as
    one op in a graph; eagerly they are done on return. inplace: through
    broadcast_ (Horovod's in-place form)."""
    check_process_set(process_set, "broadcast_variables")
    variables = list(variables)
    if inplace:
        values = broadcast_(variables, root_rank) if variables else []
        return None if tf.executing_eagerly() else tf.group(*values)
    assignments = [variable.assign(broadcast(variable, root_rank)) for variable in variables]
    if tf.executing_eagerly():
        return None
    return tf.group(*assignments)


def broadcast_global_variables(root_rank):
    """TensorFlow 1 graphs: an op setting every global variable to root_rank's value."""
    if tf.executing_eagerly():
        raise RuntimeError("chorus.tensorflow.broadcast_global_variables() does not run eagerly (as in Horovod): "
                           "use broadcast_variables(<model and optimizer variables>, root_rank) instead")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """A TensorFlow 1 SessionRunHook that broadcasts every global variable from root_rank when a session
    is created (after initialization or restoring from a checkpoint)."""

    def __init__(self, root_rank, device=""):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self._broadcast = None

    def begin(self):
        if self._broadcast is None or self._broadcast.graph is not tf.compat.v1.get_default_graph():
            with tf.device(self.device):
                self._broadcast = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session, coord):
        session.run(self._broadcast)
