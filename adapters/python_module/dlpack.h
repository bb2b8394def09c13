// Arrays from Python through DLPack (`__dlpack__` and `__dlpack_device__`):
// PyTorch's tensors on the CPU (which have no buffer protocol), JAX,
// TensorFlow, CuPy and numpy, on the host or on a CUDA device.
//
// BufferView takes the CUDA Array Interface and the buffer protocol first;
// an object with neither is asked for its DLPack capsule. The capsule is
// consumed as the protocol says (renamed "used_dltensor") and the tensor is
// held, its producer's memory with it, until the BufferView ends, when its
// deleter runs.
//
// Only C-contiguous tensors of one lane are taken, as host buffers must be
// C-contiguous. A CUDA tensor is asked for with stream=1 (the legacy default
// stream): the producer makes that stream wait for its writes, and the
// collective is ordered after that stream (docs/cuda.md). DLPack's legacy
// capsule says nothing of read-only memory: a tensor is taken as writable
// (numpy refuses to export a read-only array through DLPack).
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <optional>
#include <string>

#include "base/types.h"

namespace chorus::python {

namespace py = pybind11;

struct DlpackArray {
  void* data = nullptr;
  py::tuple shape;
  size_t count = 0;
  size_t itemsize = 0;
  std::optional<DataType> type;  // nullopt: no chorus type
  std::string type_name;         // DLPack's, for errors ("float32", "complex64")
  bool on_cuda = false;          // a CUDA device's memory (else the host's)
  // The consumed tensor: pass to release_dlpack when done with the memory.
  void* managed = nullptr;
};

// The object's DLPack tensor, or nullopt when it has no `__dlpack__`.
// `what` names the argument in errors (TypeError for a type chorus has not,
// ValueError for a layout or device it cannot take; the tensor is released
// before they are thrown).
std::optional<DlpackArray> dlpack_array_of(const py::handle& object, const std::string& what);

// Runs the tensor's deleter (the producer may free the memory). With the GIL held.
void release_dlpack(void* managed);

}  // namespace chorus::python
