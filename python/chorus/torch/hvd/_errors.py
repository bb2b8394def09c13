"""hvd.HorovodInternalError: what Horovod raises when a collective fails, over chorus's own errors."""

from ... import Error as _ChorusError


class HorovodInternalError(RuntimeError):
    """A collective failed (a rank was lost, timed out, or the ranks disagreed). The error raised is also
    an instance of chorus's own error class (chorus.PeerLostError, ...), with its attributes (.peer)."""


_combined = {}


def as_horovod_error(error):
    """error (a chorus.Error) as an instance of a class deriving from both HorovodInternalError and its own."""
    own = type(error)
    combined = _combined.get(own)
    if combined is None:
        combined = type(own.__name__, (HorovodInternalError, own), {"__module__": own.__module__})
        _combined[own] = combined
    converted = combined(*error.args)
    converted.__dict__.update(getattr(error, "__dict__", {}))
    return converted


def horovod_errors(function):
    """Calls function, raising chorus's errors as HorovodInternalError (as Horovod's calls do)."""
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except _ChorusError as error:
            if isinstance(error, HorovodInternalError):
                raise
            raise as_horovod_error(error) from error

    return call
