"""Work.add_done_callback: run a function once an async call finishes.

The C++ Work has no completion hook, so one daemon thread per process,
"chorus-callbacks", watches the Works that have callbacks and runs each
callback there, holding the GIL like any Python thread. Waiting happens with
the GIL released, so the watcher costs the program nothing while calls run.
A callback on a Work that has already finished runs at once, in the caller's
thread (as concurrent.futures does). Callbacks should be short: they run one
after another on that one thread. An exception in a callback is printed
(sys.excepthook style) and the watcher goes on.

At interpreter exit the watcher is stopped and joined (atexit): a daemon
thread that comes back from C++ into a finalizing interpreter is ended by
the interpreter in a way C++ cannot unwind, and the process aborts
("terminate called without an active exception").
"""

import atexit
import threading
import traceback

from ._chorus import Error

_lock = threading.Condition()
_pending = []      # (work, callback), in registration order
_watcher = None
_stopping = False

# How long the watcher blocks on the oldest Work before it looks at the
# others: Works on different Contexts may finish out of order.
_SLICE_SECONDS = 0.005


def _finished(work):
    try:
        return work.test()
    except Error:
        return True


def _run_callback(work, callback):
    try:
        callback(work)
    except Exception:  # a callback's failure must not stop the others
        traceback.print_exc()


def _watch():
    while True:
        with _lock:
            while not _pending and not _stopping:
                _lock.wait()
            if _stopping:
                return
            oldest = _pending[0][0]
        try:
            oldest.wait(_SLICE_SECONDS)
        except Error:
            pass  # the callback reads it with work.exception()
        with _lock:
            done = [entry for entry in _pending if _finished(entry[0])]
            for entry in done:
                _pending.remove(entry)
        for work, callback in done:
            _run_callback(work, callback)


def add_done_callback(work, callback):
    """Calls callback(work) once work has finished, successfully or not
    (work.exception() tells which); see the module docstring for the thread."""
    global _watcher
    if _finished(work):
        _run_callback(work, callback)
        return
    with _lock:
        _pending.append((work, callback))
        if _watcher is None:
            _watcher = threading.Thread(target=_watch, name="chorus-callbacks", daemon=True)
            _watcher.start()
        _lock.notify()


@atexit.register
def _stop_watcher():
    """Ends the watcher before the interpreter finalizes; its waits are short slices."""
    global _stopping
    with _lock:
        _stopping = True
        _lock.notify_all()
    if _watcher is not None:
        _watcher.join(timeout=2.0)
