"""Horovod's timeline: start_timeline/stop_timeline write the hvd calls made between them as a Chrome trace.

The file is what Horovod's is (a JSON array of trace events, read by
chrome://tracing or Perfetto): each tensor name is a "process" (Horovod's
names, "allreduce.<name>" or "allreduce.noname.<n>"), with the phases of each
call on it: NEGOTIATE_<OP> while the call is being issued (chorus does not
negotiate: every rank issues the same calls in the same order, so this phase
is only the time the call takes to start), then <OP> until this rank saw the
result (synchronize, or the blocking call's return). mark_cycles puts an
instant CYCLE_START before each call: chorus has no background cycle, each
call starts at once, as if in a cycle of its own. As in Horovod, rank 0
writes the file; the other ranks record nothing. The file stays a valid
JSON array after every event (its closing bracket is rewritten), so it can
be read while the job runs.

chorus's own trace (docs/trace.md, CHORUS_TRACE) shows every collective
underneath with its algorithm and transport; this one shows the hvd calls."""

import json
import os
import threading
import time

from ._job import _require_init, rank


class _Recorder:
    def __init__(self, path, mark_cycles):
        self.file = open(path, "wb")  # noqa: SIM115  (open until stop_timeline)
        self.mark_cycles = mark_cycles
        self.start = time.time_ns() // 1000
        self.pids = {}
        self.unnamed = {}
        self.first = True
        self.lock = threading.Lock()
        self.file.write(b"[\n")
        self._metadata(0, {"start_time_since_epoch_in_micros": self.start})

    def _write(self, event):
        # Each event replaces the closing bracket the previous one wrote.
        if not self.first:
            self.file.seek(-2, os.SEEK_CUR)
            self.file.write(b",\n")
        self.first = False
        self.file.write(json.dumps(event).encode() + b"\n]")
        self.file.flush()

    def _metadata(self, pid, args):
        self._write({"name": "process_name", "ph": "M", "pid": pid, "args": args})
        self._write({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}})

    def tensor(self, kind, name):
        """The pid of the tensor name (Horovod's: the operation, a dot, the name or noname.<n>)."""
        with self.lock:
            if name is None:
                self.unnamed[kind] = self.unnamed.get(kind, -1) + 1
                name = f"noname.{self.unnamed[kind]}"
            full = f"{kind}.{name}"
            if full not in self.pids:
                self.pids[full] = len(self.pids) + 1
                self._metadata(self.pids[full], {"name": full})
            return self.pids[full]

    def event(self, pid, phase, name=None):
        event = {"ph": phase, "ts": time.time_ns() // 1000 - self.start, "pid": pid}
        if name is not None:
            event["name"] = name
        with self.lock:
            if self.file.closed:
                return  # stopped while the call ran
            if name is not None and name.startswith("NEGOTIATE_") and self.mark_cycles:
                self._write({"ph": "i", "name": "CYCLE_START", "ts": event["ts"], "pid": 0, "s": "g"})
            self._write(event)

    def close(self):
        with self.lock:
            self.file.close()


_recorder = None
_open_calls = {}  # id(handle) -> (handle, pid, operation): async calls whose end synchronize records


def running():
    return _recorder is not None


def begin(kind, name):
    """A call of the operation kind (allreduce, ...) on the tensor name starts: a token for issued() and
    end(), or None when no timeline runs."""
    recorder = _recorder
    if recorder is None:
        return None
    pid = recorder.tensor(kind, name)
    recorder.event(pid, "B", f"NEGOTIATE_{kind.upper()}")
    return (recorder, pid, kind.upper())


def issued(token, handle=None):
    """The call has started its collective; handle: the async call's, whose synchronize ends it."""
    if token is None:
        return
    recorder, pid, operation = token
    recorder.event(pid, "E")
    recorder.event(pid, "B", operation)
    if handle is not None:
        _open_calls[id(handle)] = (handle, token)


def end(token):
    """This rank has the call's result (or its error)."""
    if token is not None and token[0] is _recorder:
        token[0].event(token[1], "E")


def synchronized(handle):
    entry = _open_calls.pop(id(handle), None)
    if entry is not None:
        end(entry[1])


def start_timeline(file_path, mark_cycles=False):
    """Starts writing the hvd calls to file_path (on rank 0; a timeline already running is stopped first)."""
    global _recorder  # noqa: PLW0603
    _require_init("start_timeline")
    stop_timeline()
    if rank() == 0:
        _recorder = _Recorder(file_path, bool(mark_cycles))


def stop_timeline():
    """Stops the timeline: the file holds a complete JSON array."""
    global _recorder  # noqa: PLW0603
    if _recorder is not None:
        _recorder.close()
        _recorder = None
        _open_calls.clear()
