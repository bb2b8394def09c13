"""Operations in flight: the handles the *_async calls return, poll() and synchronize().

A handle's operation is first queued (launcher.py), then issued as
torch.distributed work, then finished (results copied, divided, unpacked)
when the caller synchronizes. A name= given to an operation is reserved
until its handle is synchronized: Horovod refuses two operations of one
name in flight at once (ValueError), since its ranks match operations by
name; chorus matches them by order, checking that their names agree
(_negotiation.py), and keeps the rule so that scripts written for Horovod
fail here as they would there.
"""

import threading

from . import _negotiation
from ._launcher import _launcher


class _Names:
    lock = threading.Lock()
    in_flight = set()


def _reserve(name, what):
    if name is None:
        return None
    with _Names.lock:
        if name in _Names.in_flight:
            raise ValueError(f"chorus.torch.hvd.{what}: an operation named {name!r} is still in flight (synchronize "
                             "it first: names identify operations, as in Horovod)")
        _Names.in_flight.add(name)
    return name


def _release(name):
    if name is not None:
        with _Names.lock:
            _Names.in_flight.discard(name)


def _forget_names():
    with _Names.lock:
        _Names.in_flight.clear()


class _Handle:
    """An operation in flight; synchronize(handle) waits and returns its result."""

    def __init__(self, entry, name=None):
        self._entry = entry
        self._name = name
        self._result = None
        self._done = False

    def poll(self):
        if self._done:
            return True
        if not self._entry.issued.is_set():
            return False
        if self._entry.error is not None:
            return True
        works, _ = self._entry.result
        return all(work.is_completed() for work in works)

    def wait(self):
        if not self._done:
            try:
                works, finish = self._entry.wait_issued()
                for work in works:
                    work.wait()
                self._result = finish()
            finally:
                _release(self._name)
                self._name = None
            self._done = True
        return self._result


def _submit(issue, what, process_set, descriptor=None, name=None):
    """Queues an operation; issue(descriptors) -> (works, finish) runs on the launcher's thread."""
    reserved = _reserve(name, what)
    if descriptor is not None:
        descriptor = _negotiation.named(descriptor, name)
    try:
        entry = _launcher.submit(issue, descriptor, process_set, what)
    except BaseException:
        _release(reserved)
        raise
    return _Handle(entry, reserved)


def poll(handle):
    """True once the operation behind handle has finished (synchronize will not block)."""
    return handle.poll()


def synchronize(handle):
    """Waits for the operation and returns its result (raises its error, naming the failed rank)."""
    return handle.wait()
