"""What Horovod scripts ask of the build (hvd.mpi_built(), ...), answered for
chorus, by chorus.torch.hvd and chorus.tensorflow alike.

chorus is neither Horovod's MPI nor its Gloo controller, has no NCCL, CCL,
DDL or ROCm, and its Horovod APIs take CPU tensors only: each answer is
False (nccl_built, an NCCL version in Horovod, is 0), so scripts keep off
the code paths of those libraries (GPU-only branches, MPI-only tests)."""


def mpi_built():
    return False


def mpi_enabled():
    return False


def mpi_threads_supported():
    # As Horovod answers when MPI is not enabled.
    raise ValueError("mpi_threads_supported: chorus does not run over MPI")


def gloo_built():
    return False


def gloo_enabled():
    return False


def nccl_built():
    return 0


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return False  # the Horovod APIs are tested on CPU tensors only (docs/torch.md, docs/tensorflow.md)


def rocm_built():
    return False
