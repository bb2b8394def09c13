"""A handle made of other handles: calls that are several collectives (sparse allreduce, Adasum) finish on top."""

from ._handles import poll, synchronize


class _CompositeHandle:
    """Waits for its parts (hvd handles) and returns finish(their results); calling it does the same,
    as Horovod's sparse_allreduce_async handle is called."""

    def __init__(self, parts, finish):
        self._parts = parts
        self._finish = finish
        self._result = None
        self._done = False

    def poll(self):
        return self._done or all(poll(part) for part in self._parts)

    def wait(self):
        if not self._done:
            self._result = self._finish([synchronize(part) for part in self._parts])
            self._done = True
        return self._result

    __call__ = wait
