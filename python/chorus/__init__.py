"""chorus: collective communication between processes, on Python buffers.

    import chorus, numpy as np
    with chorus.init() as ctx:                  # CHORUS_RANK/SIZE/STORE, or torchrun's, mpirun's, ...
        grads = np.ones(1 << 20, np.float32)
        ctx.allreduce(grads)                    # in place, blocking, the GIL released
        work = ctx.allreduce_async(grads, chorus.AVG)
        work.add_done_callback(lambda w: print("done", w.exception()))
        work.wait()                             # raises chorus.PeerLostError naming a dead rank

Buffers are used in place, never copied: any C-contiguous object with the
buffer protocol (numpy arrays, bytearray, memoryview, array.array). numpy has
no bfloat16: store it as uint16 and pass dtype=chorus.bfloat16.
"""

from ._chorus import (  # noqa: F401  (re-exported)
    AVG, BAND, BOR, BXOR, MAX, MIN, NO_COLOR, PROD, SUM,
    Aborted, Context, DataType, Error, InvalidArgument, IoError, MismatchError, PeerLostError, ReduceOp,
    RegisteredBuffer, TimeoutError, Work,
    bfloat16, connect_from_env, connect_to_store, float16, float32, float64, int8, int32, int64,
    register_buffer, uint8, uint32, uint64,
)
from ._callbacks import add_done_callback as _add_done_callback

__all__ = [
    "AVG", "BAND", "BOR", "BXOR", "MAX", "MIN", "NO_COLOR", "PROD", "SUM",
    "Aborted", "Context", "DataType", "Error", "InvalidArgument", "IoError", "MismatchError", "PeerLostError",
    "ReduceOp", "RegisteredBuffer", "TimeoutError", "Work",
    "bfloat16", "connect_from_env", "connect_to_store", "float16", "float32", "float64", "init", "int8", "int32",
    "int64", "register_buffer", "uint8", "uint32", "uint64",
]


def init(**options):
    """connect_from_env(**options): the job's Context, as described by its launcher."""
    return connect_from_env(**options)


Work.add_done_callback = _add_done_callback
