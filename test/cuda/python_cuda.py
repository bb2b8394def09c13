"""chorus.Context on CUDA arrays (the CUDA Array Interface): CuPy arrays and
PyTorch CUDA tensors, every collective that takes them checked bit for bit,
blocking and async, on the caller's stream. Run on the GPU machine as a
chorus-run job of 2 or more ranks sharing the GPU (scripts/gpu-test.sh's part
"python"); prints "python CUDA OK <checks>" on rank 0.

    chorus-run -n 2 -- python3 test/cuda/python_cuda.py

Here (no GPU) test/python/test_module.py checks what is read from the
interface before the memory is asked for."""

import sys

import numpy

import chorus

try:
    import cupy
except ImportError:  # the GPU machine has it; say so plainly elsewhere
    sys.exit("python_cuda.py: needs CuPy (the GPU machine's image has cupy-cuda13x)")

checks = 0
context = chorus.connect_from_env(timeout=60)
rank, size = context.rank, context.size


class Failed(Exception):
    pass


def check(condition, what):
    """Counts a check; a failed one ends this rank, saying what (see the end)."""
    global checks
    checks += 1
    if not condition:
        raise Failed(what)


def equal(got, expected, what):
    """Bit-exact: small integers in every dtype used."""
    check(got.dtype == expected.dtype and got.shape == expected.shape and bool((got == expected).all()),
          f"{what}: got {cupy.asnumpy(got).ravel()[:8]} ({got.dtype}, {got.shape}), "
          f"expected {cupy.asnumpy(expected).ravel()[:8]} ({expected.dtype}, {expected.shape})")


def full(count, value, dtype=cupy.float32):
    return cupy.full((count,), value, dtype=dtype)


def run_checks():
    for count in (5, 300_000):  # staged through host memory, and on the device (256 KiB and more)
        where = f"{count} elements"
        for dtype in (cupy.float32, cupy.int64, cupy.float16):
            data = full(count, rank + 1, dtype)
            check(context.allreduce(data) is data, "allreduce returns its data")
            equal(data, full(count, size * (size + 1) // 2, dtype), f"allreduce {dtype} ({where})")
        out = full(count, -1)
        context.allreduce(full(count, rank + 1), out=out)
        equal(out, full(count, size * (size + 1) // 2), f"allreduce into out ({where})")
        data = full(count, rank + 1)
        context.allreduce(data, op="max")
        equal(data, full(count, size), f"allreduce max ({where})")

        data = full(count, rank + 10)
        context.broadcast(data, root=size - 1)
        equal(data, full(count, size + 9), f"broadcast ({where})")

        gathered = cupy.full((size, count), -1, dtype=cupy.float32)
        context.allgather(full(count, rank + 1), out=gathered)
        equal(gathered, cupy.stack([full(count, peer + 1) for peer in range(size)]), f"allgather ({where})")

        # Block j of rank r's input is (r + 1) * (j + 1): rank r receives (r + 1) * sum(1..size).
        blocks = cupy.concatenate([full(count, (rank + 1) * (block + 1)) for block in range(size)])
        out = full(count, -1)
        context.reduce_scatter(blocks, out=out)
        equal(out, full(count, (rank + 1) * size * (size + 1) // 2), f"reduce_scatter ({where})")

        # Rank r sends 10 r + j to rank j.
        sent = cupy.concatenate([full(count, 10 * rank + peer) for peer in range(size)])
        received = cupy.full((size * count,), -1, dtype=cupy.float32)
        context.alltoall(sent, out=received)
        equal(received, cupy.concatenate([full(count, 10 * peer + rank) for peer in range(size)]), f"alltoall ({where})")

    # Async on a stream of the caller's: the array is written on it just before
    # the call, and the interface names it, so the collective reads after it.
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        data = cupy.zeros(300_000, dtype=cupy.float32)
        data += rank + 1
        work = context.allreduce_async(data)
    work.wait()
    stream.synchronize()
    equal(data, full(300_000, size * (size + 1) // 2), "allreduce_async on the caller's stream")

    # What chorus allocates is host memory: a CUDA call must pass out=.
    try:
        context.allgather(full(4, 1))
    except TypeError as error:
        check("pass out=" in str(error), f"allgather without out names the remedy: {error}")
    else:
        check(False, "allgather of a CUDA array without out= was not refused")
    # One call, one place.
    try:
        context.allreduce(full(4, 1), out=numpy.zeros(4, numpy.float32))
    except TypeError as error:
        check("one place" in str(error), f"host and CUDA buffers in one call: {error}")
    else:
        check(False, "host and CUDA buffers in one call were not refused")

    # PyTorch's CUDA tensors expose the same interface.
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        tensor = torch.full((1000,), float(rank + 1), device="cuda")
        context.allreduce(tensor)
        check(bool((tensor == size * (size + 1) // 2).all()), "allreduce of a torch CUDA tensor")

    # Through DLPack alone (as JAX's and TensorFlow's arrays come): the CUDA
    # array asked for with stream 1, the collective ordered after it.
    class DlpackOnly:
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, stream=None):
            return self.array.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    wrapped = DlpackOnly(full(5000, rank + 1))
    check(context.allreduce(wrapped) is wrapped, "a DLPack CUDA allreduce returns its argument")
    equal(wrapped.array, full(5000, size * (size + 1) // 2), "allreduce of a DLPack-only CUDA array")
    gathered = cupy.full((size, 3), -1, dtype=cupy.float32)
    context.allgather(DlpackOnly(full(3, rank + 1)), out=DlpackOnly(gathered))
    equal(gathered, cupy.stack([full(3, peer + 1) for peer in range(size)]), "allgather of DLPack-only CUDA arrays")


try:
    run_checks()
except Failed as failure:
    print(f"rank {rank}: FAILED: {failure}", flush=True)
    sys.exit(1)
context.barrier()
context.close()
if rank == 0:
    print(f"python CUDA OK {checks}", flush=True)
