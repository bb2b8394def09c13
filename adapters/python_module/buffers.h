// Python buffers as chorus sees them: one export of a buffer-protocol object
// (numpy array, memoryview, bytearray, array.array), a CUDA array
// (`__cuda_array_interface__`: CuPy, Numba, PyTorch, JAX; cuda_interface.h),
// or, for an object with neither, a DLPack tensor (PyTorch's CPU tensors,
// JAX, TensorFlow; dlpack.h), on the host or a CUDA device,
// checked to be C-contiguous (and writable where chorus writes), with its
// chorus DataType and where it lives.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <optional>
#include <string>

#include "base/memory.h"
#include "base/types.h"

namespace chorus::python {

namespace py = pybind11;

enum class Access { read, write };

// Holds the export for as long as it lives, so the exporter cannot resize or
// free the memory under a running collective (numpy and bytearray refuse to
// resize while exported). Destroy only with the GIL held.
class BufferView {
 public:
  // `what` names the argument in errors ("allreduce: out"). `override_type`
  // (the dtype= argument) replaces the type read from the format, for
  // storage numpy has no dtype for (bfloat16 in uint16); its size must
  // match the item size.
  BufferView(const py::handle& object, Access access, const char* what, std::optional<DataType> override_type);
  ~BufferView();
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;

  void* data() const { return data_; }
  size_t count() const { return count_; }
  DataType type() const { return type_; }
  // The shape the exporter reports (for shaping outputs chorus allocates).
  py::tuple shape() const;
  const py::object& object() const { return object_; }
  // Host memory, or the CUDA device the array's memory belongs to.
  const Memory& memory() const { return memory_; }
  // A CUDA array's stream (its interface's; null: the legacy default stream).
  void* stream() const { return stream_; }
  // An empty CUDA array may have no pointer, so no device: it fits any call.
  bool fits_any_memory() const { return fits_any_memory_; }

 private:
  void take_cuda_array(const py::handle& object, Access access, const std::string& what,
                       std::optional<DataType> override_type);
  void take_dlpack(const py::handle& object, Access access, const std::string& what,
                   std::optional<DataType> override_type);
  // data_ on a CUDA device (memory_ says which), or the error naming
  // `what` and how its pointer came (`pointer_described`).
  void place_on_cuda_device(const std::string& what, const char* pointer_described);

  Py_buffer view_{};
  bool exported_ = false;  // view_ holds an export to release
  py::object object_;
  void* data_ = nullptr;
  size_t count_ = 0;
  DataType type_ = DataType::uint8;
  Memory memory_ = Memory::host();
  void* stream_ = nullptr;
  bool fits_any_memory_ = false;
  py::tuple described_shape_;  // a CUDA array's or a DLPack tensor's
  void* dlpack_ = nullptr;      // the consumed DLPack tensor, released at the end
};

// The chorus type of a struct-module format with the given item size
// ("f" -> float32, "e" -> float16, "<q" -> int64), or nullopt.
std::optional<DataType> data_type_of_format(const std::string& format, size_t itemsize);

// The numpy dtype name of a chorus type ("bfloat16" -> "uint16": numpy has
// no bfloat16, so such arrays are raw uint16 storage).
const char* numpy_storage_name(DataType type);

}  // namespace chorus::python
