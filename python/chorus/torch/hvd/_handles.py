"""Operations in flight: the handles the *_async calls return, poll() and synchronize()."""


class _Handle:
    """An operation in flight; synchronize(handle) waits and returns its result."""

    def __init__(self, works, finish):
        self._works = works
        self._finish = finish
        self._result = None
        self._done = False

    def poll(self):
        return self._done or all(work.is_completed() for work in self._works)

    def wait(self):
        if not self._done:
            for work in self._works:
                work.wait()
            self._result = self._finish()
            self._done = True
        return self._result


def poll(handle):
    """True once the operation behind handle has finished (synchronize will not block)."""
    return handle.poll()


def synchronize(handle):
    """Waits for the operation and returns its result (raises its error, naming the failed rank)."""
    return handle.wait()
