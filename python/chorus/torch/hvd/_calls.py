"""What every public hvd call shares: its record on the timeline and Horovod's error type."""

import functools
import inspect

from ... import _environment
from . import _timeline
from ._errors import horovod_errors


def _tensor_name(function, args, kwargs):
    try:
        return inspect.signature(function).bind(*args, **kwargs).arguments.get("name")
    except TypeError:
        return None  # the call itself will say what is wrong with its arguments


def public_call(kind, function, returns_handle=False):
    """function, an hvd call of the operation kind (allreduce, ...), as the package exports it."""
    checked = horovod_errors(function)

    @functools.wraps(function)
    def call(*args, **kwargs):
        if not _timeline.running():
            return checked(*args, **kwargs)
        token = _timeline.begin(kind, _tensor_name(function, args, kwargs))
        if returns_handle:
            handle = None
            try:
                handle = checked(*args, **kwargs)
                return handle
            finally:
                _timeline.issued(token, handle)
                if handle is None:
                    _timeline.end(token)
        _timeline.issued(token)
        try:
            return checked(*args, **kwargs)
        finally:
            _timeline.end(token)

    return call


def public_synchronize(synchronize):
    checked = horovod_errors(synchronize)

    @functools.wraps(synchronize)
    def call(handle):
        try:
            return checked(handle)
        finally:
            _timeline.synchronized(handle)

    return call


def public_init(init):
    """init, then a timeline if HOROVOD_TIMELINE names a file (Horovod's variables; "DYNAMIC" waits for
    start_timeline)."""
    @functools.wraps(init)
    def call(*args, **kwargs):
        init(*args, **kwargs)
        path, mark = _environment.horovod_timeline()
        if path and not _timeline.running():
            _timeline.start_timeline(path, mark_cycles=mark)

    return call


def public_shutdown(shutdown):
    @functools.wraps(shutdown)
    def call(*args, **kwargs):
        _timeline.stop_timeline()
        return shutdown(*args, **kwargs)

    return call
