// CUDA arrays from Python: objects that describe device memory through the
// CUDA Array Interface (`__cuda_array_interface__`, version 2 or 3: CuPy,
// Numba, PyTorch's CUDA tensors, JAX), read into what a collective needs.
//
// Only C-contiguous arrays without a mask are taken, as host buffers must be
// C-contiguous. The interface's stream (version 3) is the stream the
// producer queued its writes on: the collective is ordered after it, as
// CollectiveOptions::cuda_stream orders it (docs/cuda.md).
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <optional>
#include <string>

#include "base/types.h"

namespace chorus::python {

namespace py = pybind11;

struct CudaArray {
  void* data = nullptr;
  bool readonly = false;
  py::tuple shape;
  size_t count = 0;
  size_t itemsize = 0;
  std::optional<DataType> type;  // nullopt: the typestr has no chorus type
  std::string typestr;
  // The producer's stream: null for the legacy default stream (and when the
  // interface names none), cudaStreamPerThread's handle for 2, else the handle.
  void* stream = nullptr;
};

// The object's CUDA array, or nullopt when it offers no
// `__cuda_array_interface__`. `what` names the argument in errors
// (TypeError and ValueError for what chorus cannot take).
std::optional<CudaArray> cuda_array_of(const py::handle& object, const std::string& what);

// The chorus type of a typestr ("<f4" -> float32, "|u1" -> uint8).
std::optional<DataType> data_type_of_typestr(const std::string& typestr);

}  // namespace chorus::python
