"""The job: init, shutdown and what a rank asks about it (rank, size, local_rank, local_size)."""

import atexit

import chorus

_state = {"context": None, "handle": None, "owned": False}


def init(comm=None, process_sets=None, context=None):
    """Joins the job. As Horovod's init: under chorus-run, torchrun or mpirun
    (chorus.connect_from_env reads their variables). `context` (or `comm`,
    Horovod's first argument) may be a chorus.Context the process already
    has: the ops then run on it, and shutdown() leaves it open. Calling init
    again once initialized does nothing, as in Horovod."""
    if comm is not None:
        if context is not None or not isinstance(comm, chorus.Context):
            raise ValueError(f"chorus.tensorflow.init: comm must be a chorus.Context (or None), not {comm!r}; "
                             "MPI communicators are Horovod-with-MPI only")
        context = comm
    if process_sets is not None:
        raise ValueError("chorus.tensorflow.init: process sets are not supported by chorus.tensorflow "
                         "(every op runs on the whole job); pass process_sets=None")
    if _state["context"] is not None:
        return
    from . import _library
    owned = context is None
    if owned:
        context = chorus.connect_from_env()
    _state.update(context=context, handle=_library.adopt(context), owned=owned)


def shutdown():
    """Leaves the job: the ops' handle is released (their worker finishes
    what was issued first) and a Context init() made is closed."""
    if _state["context"] is None:
        return
    from . import _library
    _library.release(_state["handle"])
    if _state["owned"]:
        _state["context"].close()
    _state.update(context=None, handle=None, owned=False)


atexit.register(shutdown)


def shrink():
    """The job shrunk to the ranks still alive (chorus.Context.shrink), for elastic training: the ops keep
    their handle, rebound to the survivors' Context; the failed one is closed if init() made it."""
    from . import _library
    old = context()
    survivors = old.shrink()
    _library.rebind(_state["handle"], survivors)
    if _state["owned"]:
        old.close()
    _state.update(context=survivors, owned=True)


def is_initialized():
    return _state["context"] is not None


def context():
    """The chorus.Context the ops run on."""
    if _state["context"] is None:
        raise ValueError("chorus.tensorflow has not been initialized; use chorus.tensorflow.init()")
    return _state["context"]


def handle():
    handle = _state["handle"]
    if handle is None:
        context()  # raises
    return handle


def rank():
    return context().rank


def size():
    return context().size


def local_rank():
    return context().local_rank


def local_size():
    return context().local_size
