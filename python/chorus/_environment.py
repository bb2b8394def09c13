"""The one module of the chorus package that reads the process environment.

The C++ library reads its CHORUS_* variables in base/config.cc; the few the
Python package reads itself are read here, so that every variable it obeys
is listed in one place.
"""

import os


def under_chorus_launcher():
    """True where chorus's launcher variables, not torchrun's, say where the job meets.

    CHORUS_STORE names the store (chorus-run sets it; under mpirun or srun the
    user does, and chorus reads their rank variables). torchrun's variables
    win: MASTER_ADDR means torch's own env:// works.
    """
    return "CHORUS_STORE" in os.environ and "MASTER_ADDR" not in os.environ


def fusion_bytes(default):
    """CHORUS_FUSION_BYTES: the most bytes chorus.torch.hvd fuses into one allreduce; `default` when unset."""
    text = os.environ.get("CHORUS_FUSION_BYTES")
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"CHORUS_FUSION_BYTES='{text}' is not a number of bytes (1 or more)")
    return value


def horovod_timeline():
    """(path, mark_cycles) from Horovod's HOROVOD_TIMELINE and HOROVOD_TIMELINE_MARK_CYCLES (chorus.torch.hvd
    obeys them as Horovod does); path None when unset or "DYNAMIC" (start_timeline starts it)."""
    path = os.environ.get("HOROVOD_TIMELINE")
    mark = os.environ.get("HOROVOD_TIMELINE_MARK_CYCLES", "0").lower() in ("1", "true")
    return (path if path and path != "DYNAMIC" else None), mark


def launcher_store():
    """(CHORUS_STORE, CHORUS_JOB_ID): the store chorus's launcher's job meets at and the job's id (None and
    "job" when unset). chorus.torch.hvd.elastic meets its survivors there."""
    return os.environ.get("CHORUS_STORE") or None, os.environ.get("CHORUS_JOB_ID") or "job"
