"""The order in which this rank's collectives reach the wire: one thread, first come first served.

Horovod's calls return at once and run in the background, so a rank may
start an operation, then wait in hvd.barrier() for a rank that has not
started it yet (Horovod's own tests do). Each call is therefore an entry in
this rank's queue: a thread takes the entries in order, agrees with the
other ranks on what the entry is (negotiation.py), and issues its
torch.distributed calls. Every issue goes through here, those of
DistributedOptimizer's buckets and of adding a process set too, so that all
of a rank's collectives are issued in one order, the order of its calls,
whichever thread made them: that order is what the ranks match by.
"""

import queue
import threading

from . import _negotiation


class _Entry:
    """One queued piece of work: agree (if described), then issue; the caller waits for `issued`."""

    def __init__(self, issue, descriptor=None, process_set=None, what=None):
        self.issue = issue  # (descriptors or None) -> result, on the launcher's thread
        self.descriptor = descriptor
        self.process_set = process_set
        self.what = what
        self.issued = threading.Event()
        self.result = None
        self.error = None

    def run(self):
        try:
            descriptors = None
            if self.descriptor is not None:
                descriptors = _negotiation.agree(self.descriptor, self.process_set._group, self.process_set.ranks,
                                                 self.what)
            self.result = self.issue(descriptors)
        except BaseException as error:  # handed to the caller, whatever it is
            self.error = error
        finally:
            self.issued.set()

    def wait_issued(self):
        self.issued.wait()
        if self.error is not None:
            raise self.error
        return self.result


class _Launcher:
    def __init__(self):
        self._queue = None
        self._thread = None
        self._lock = threading.Lock()

    def start(self):
        with self._lock:
            if self._thread is not None:
                return
            self._queue = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._serve, args=(self._queue,), name="chorus.torch.hvd launcher",
                                            daemon=True)
            self._thread.start()

    def running(self):
        return self._thread is not None

    def stop(self):
        """Issues what is queued, then ends the thread (shutdown)."""
        with self._lock:
            thread, work = self._thread, self._queue
            self._thread = self._queue = None
        if thread is not None:
            work.put(None)
            thread.join()

    def submit(self, issue, descriptor=None, process_set=None, what=None):
        entry = _Entry(issue, descriptor, process_set, what)
        if threading.current_thread() is self._thread:
            entry.run()  # issued from an issue function: already in order
            return entry
        with self._lock:
            if self._queue is None:
                raise ValueError(f"chorus.torch.hvd.{what or 'call'}: hvd.init() was not called, or hvd.shutdown() "
                                 "was")
            self._queue.put(entry)
        return entry

    def run_in_order(self, function):
        """function() on the launcher's thread, after everything queued before it; its result."""
        return self.submit(lambda _descriptors: function()).wait_issued()

    @staticmethod
    def _serve(work):
        while True:
            entry = work.get()
            if entry is None:
                return
            entry.run()


_launcher = _Launcher()
