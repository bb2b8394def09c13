"""broadcast_variables: every variable set to root_rank's value."""

import tensorflow as tf

from ._ops import broadcast, global_process_set, _check_process_set


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns root_rank's value of each variable to it on every rank, in the
    given order (the same on every rank). Returns the assignments grouped as
    one op inside a tf.function; eagerly they are done on return."""
    _check_process_set(process_set, "broadcast_variables")
    assignments = [variable.assign(broadcast(variable, root_rank)) for variable in variables]
    if tf.executing_eagerly():
        return None
    return tf.group(*assignments)
