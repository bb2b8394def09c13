"""The module on its own, in this process: the exception hierarchy, types,
and a one-rank Context over a file store."""

import numpy as np
import pytest

import chorus


def test_exception_hierarchy():
    for name in ("IoError", "PeerLostError", "TimeoutError", "InvalidArgument", "MismatchError", "Aborted"):
        assert issubclass(getattr(chorus, name), chorus.Error)
    assert issubclass(chorus.PeerLostError, chorus.IoError)
    assert issubclass(chorus.IoError, ConnectionError)
    assert issubclass(chorus.TimeoutError, TimeoutError)
    assert issubclass(chorus.InvalidArgument, ValueError)
    # torch's and Horovod's tests, and users, catch RuntimeError.
    for name in ("Error", "IoError", "PeerLostError", "TimeoutError", "InvalidArgument", "MismatchError", "Aborted"):
        assert issubclass(getattr(chorus, name), RuntimeError)
    assert chorus.Error.peer is None
    assert chorus.Error.__module__ == "chorus"


def test_types_and_ops():
    assert chorus.bfloat16 == chorus.DataType.bfloat16
    assert chorus.SUM == chorus.ReduceOp.SUM
    assert {t.name for t in chorus.DataType.__members__.values()} >= {"float16", "bfloat16", "uint64"}


@pytest.fixture
def solo(tmp_path):
    with chorus.connect_to_store(f"file://{tmp_path}", 0, 1, "solo", timeout=10) as context:
        yield context


def test_one_rank(solo):
    assert (solo.rank, solo.size, solo.local_rank, solo.local_size) == (0, 1, 0, 1)
    data = np.arange(5, dtype=np.float16)
    assert solo.allreduce(data) is data and np.array_equal(data, np.arange(5, dtype=np.float16))
    assert np.array_equal(solo.allgather(np.arange(3, dtype=np.uint64)), [[0, 1, 2]])
    assert "rank 0 of 1" in repr(solo)
    work = solo.allreduce_async(np.ones(3, np.int64))
    assert work.wait() and repr(work) == "<chorus.Work done>" and work.exception() is None


def test_aborted(solo):
    solo.abort("stopping on purpose")
    with pytest.raises(chorus.Aborted, match="stopping on purpose") as caught:
        solo.allreduce(np.zeros(2, np.int32))
    assert caught.value.peer is None
    with pytest.raises(chorus.Aborted):
        solo.check()


def test_invalid_root_on_one_rank(solo):
    with pytest.raises(chorus.InvalidArgument, match="root"):
        solo.reduce(np.zeros(2, np.int32), root=1)


def test_bad_timeouts(solo):
    with pytest.raises(ValueError, match="seconds"):
        solo.allreduce(np.zeros(2, np.int32), timeout=-1)
    with pytest.raises(ValueError):
        solo.timeout = None


def test_closed(solo):
    solo.close()
    solo.close()
    assert solo.closed and "closed" in repr(solo)
    with pytest.raises(ValueError, match="closed"):
        solo.allreduce(np.zeros(2, np.int32))


def test_bad_connections():
    with pytest.raises(ValueError, match="connections='sometimes'"):
        chorus.connect_to_store("file:///nonexistent", 0, 1, "x", connections="sometimes")


def test_joining_twice_from_one_process_says_so(tmp_path):
    # The same process, rank and job id again (connecting after a close):
    # the store still holds the first join, and the error says whose it is.
    with chorus.connect_to_store(f"file://{tmp_path}", 0, 1, "again", timeout=10):
        pass
    with pytest.raises(chorus.Error, match=r"rank 0 joined this store and job id twice from one process \(pid "):
        chorus.connect_to_store(f"file://{tmp_path}", 0, 1, "again", timeout=10)


def test_register_buffer(solo):
    data = np.arange(1024, dtype=np.int32)
    with chorus.register_buffer(data) as registration:
        assert registration.registered and registration.nbytes == data.nbytes
        assert repr(registration) == f"<chorus.RegisteredBuffer {data.nbytes} bytes>"
        # Held while registered: numpy will not move an array something else references.
        with pytest.raises(ValueError):
            data.resize(4096)
        again = chorus.register_buffer(data)  # the same buffer twice is counted
        with pytest.raises(chorus.InvalidArgument, match="overlaps"):
            chorus.register_buffer(data[8:16])
        again.close()
        assert solo.allreduce(data) is data and np.array_equal(data, np.arange(1024, dtype=np.int32))
    assert not registration.registered and repr(registration) == "<chorus.RegisteredBuffer closed>"
    registration.close()  # twice is harmless
    data.resize(4096, refcheck=False)  # no longer exported
    with chorus.register_buffer(data[8:16]):  # nor registered: a part of it may be now
        pass
    raw = bytearray(64)
    with chorus.register_buffer(raw):
        with pytest.raises(BufferError):  # a bytearray refuses to resize while exported
            raw.extend(b"more")
    raw.extend(b"more")
    with pytest.raises(chorus.InvalidArgument, match="0 bytes"):
        chorus.register_buffer(bytearray())
    with pytest.raises(ValueError, match="contiguous"):
        chorus.register_buffer(np.zeros((4, 4), np.float32)[:, 1])
