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


class FakeCudaArray:
    """An object describing memory through the CUDA Array Interface, as CuPy's
    arrays do. It points at a numpy array's host memory, so every check that
    comes before asking where the memory lives can be seen without a GPU
    (test/cuda/python_cuda.py runs real CUDA arrays on the GPU machine)."""

    def __init__(self, host, **fields):
        self.host = host
        self.__cuda_array_interface__ = {"version": 3, "shape": host.shape, "typestr": host.dtype.str,
                                         "data": (host.ctypes.data, False), "strides": None, "stream": 1}
        self.__cuda_array_interface__.update(fields)


def test_cuda_array_interface_checked_before_the_memory(solo):
    data = np.ones(8, np.float32)
    # Parsed and checked; then the pointer is found to be host memory.
    with pytest.raises(ValueError, match="allreduce: data: its __cuda_array_interface__ points at memory that this "
                                         "process's CUDA runtime does not know as device memory"):
        solo.allreduce(FakeCudaArray(data))
    bad = [
        ({"typestr": "<c8"}, TypeError, r"typestr '<c8' \(8-byte items\) has no chorus type"),
        ({"typestr": ">f4"}, TypeError, "typestr '>f4'"),
        ({"typestr": "f"}, ValueError, "'f' is not a valid typestr"),
        ({"strides": (8,)}, ValueError, "CUDA array that is not C-contiguous"),
        ({"strides": (4, 4)}, ValueError, "2 strides for 1 dimensions"),
        ({"mask": object()}, ValueError, "masked CUDA array"),
        ({"version": 1}, ValueError, "version 1; chorus reads versions 2 and 3"),
        ({"stream": 0}, ValueError, "stream 0, which the interface disallows"),
        ({"data": (data.ctypes.data, True)}, ValueError, "read-only CUDA array but this call writes into it"),
        ({"data": data.ctypes.data}, TypeError, r"'data' is not a \(pointer, read_only\) tuple"),
        ({"shape": [8]}, TypeError, "'shape' is not a tuple"),
    ]
    for fields, error, words in bad:
        with pytest.raises(error, match=words):
            solo.allreduce(FakeCudaArray(data, **fields))
    with pytest.raises(ValueError, match="dtype float64 has 8-byte elements but the buffer's are 4 bytes "
                                         r"\(__cuda_array_interface__ typestr '<f4'\)"):
        solo.allreduce(FakeCudaArray(data), dtype="float64")
    # Strides equal to C order's are contiguous; an axis of one element may have any.
    matrix = np.ones((1, 8), np.float32)
    with pytest.raises(ValueError, match="does not know as device memory"):
        solo.allreduce(FakeCudaArray(matrix, strides=(999, 4)))
    # bfloat16 has no typestr: dtype= names it over 2-byte storage.
    with pytest.raises(ValueError, match="does not know as device memory"):
        solo.allreduce(FakeCudaArray(np.ones(8, np.uint16)), dtype="bfloat16")
    # An empty CUDA array may have no pointer at all: nothing moves.
    empty = FakeCudaArray(np.ones(0, np.float32), data=(0, False), shape=(0,))
    assert solo.allreduce(empty) is empty
    # An object whose interface is not a dict says so.
    class NotADict:
        __cuda_array_interface__ = ["version", 3]
    with pytest.raises(TypeError, match="__cuda_array_interface__ is not a dict"):
        solo.allreduce(NotADict())


class DlpackOnly:
    """An object that offers its array through DLPack alone (as JAX's and
    TensorFlow's do), here a numpy array's; `device` overrides what
    __dlpack_device__ says, and the stream asked for is recorded."""

    def __init__(self, array, device=None):
        self.array, self.device, self.streams = array, device, []

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.device or self.array.__dlpack_device__()


def test_dlpack_tensors(solo):
    data = DlpackOnly(np.arange(4, dtype=np.int64))
    assert solo.allreduce(data) is data and np.array_equal(data.array, np.arange(4))
    assert data.streams == [None]  # host memory: no stream to order
    # Outputs chorus allocates take the tensor's shape.
    gathered = solo.allgather(DlpackOnly(np.arange(6, dtype=np.int32).reshape(2, 3)))
    assert gathered.shape == (1, 2, 3) and np.array_equal(gathered[0], np.arange(6).reshape(2, 3))
    out = DlpackOnly(np.zeros(4, np.float32))
    assert solo.allreduce(np.ones(4, np.float32), out=out) is out and np.array_equal(out.array, np.ones(4))
    bad = [
        (DlpackOnly(np.arange(8, dtype=np.float32)[::2]), ValueError, "DLPack tensor that is not C-contiguous"),
        (DlpackOnly(np.ones(3, np.complex64)), TypeError, r"DLPack dtype 'complex64' \(8-byte items\) has no chorus type"),
        (DlpackOnly(np.ones(3), device=(4, 0)), ValueError, r"DLPack device type is 4; chorus takes the CPU's \(1\)"),
        (DlpackOnly(np.ones(3), device=(4,)), TypeError, r"__dlpack_device__\(\) is not a \(type, id\) pair"),
    ]
    for data, error, words in bad:
        with pytest.raises(error, match=words):
            solo.allreduce(data)
    # Said to be on a CUDA device: asked for with stream 1 (the legacy
    # default stream), and the capsule's own device is checked against it.
    cuda = DlpackOnly(np.ones(3, np.float32), device=(2, 0))
    with pytest.raises(ValueError, match=r"on device type 1 but __dlpack_device__\(\) said 2"):
        solo.allreduce(cuda)
    assert cuda.streams == [1]
    # An axis of one element may have any stride; dtype= must fit the item size.
    solo.allreduce(DlpackOnly(np.ones((4, 1), np.float32)[:, :1]))
    with pytest.raises(ValueError, match=r"dtype float64 has 8-byte elements but the buffer's are 4 bytes \(DLPack dtype 'float32'\)"):
        solo.allreduce(DlpackOnly(np.ones(3, np.float32)), dtype="float64")
    # A capsule that was used already is refused.
    class Spent(DlpackOnly):
        def __dlpack__(self, stream=None):
            capsule = self.array.__dlpack__()
            np.from_dlpack(type("Holder", (), {"__dlpack__": lambda self, stream=None: capsule,
                                               "__dlpack_device__": lambda self: (1, 0)})())
            return capsule
    with pytest.raises(TypeError, match='did not return an unused "dltensor" capsule'):
        solo.allreduce(Spent(np.ones(3, np.float32)))


def test_torch_cpu_tensors_through_dlpack(solo):
    torch = pytest.importorskip("torch")
    tensor = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert solo.allreduce(tensor) is tensor and torch.equal(tensor, torch.arange(6, dtype=torch.float32).reshape(2, 3))
    halves = torch.ones(4, dtype=torch.bfloat16)  # DLPack names bfloat16 itself
    assert solo.allreduce(halves) is halves
    with pytest.raises(ValueError, match="not C-contiguous"):
        solo.allreduce(torch.ones(2, 3)[:, 1:])
