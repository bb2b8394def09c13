// Python buffers as chorus sees them: one export of a buffer-protocol object
// (numpy array, memoryview, bytearray, array.array), checked to be
// C-contiguous (and writable where chorus writes), and its chorus DataType.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <optional>
#include <string>

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

  void* data() const { return view_.buf; }
  size_t count() const { return count_; }
  DataType type() const { return type_; }
  // The shape the exporter reports (for shaping outputs chorus allocates).
  py::tuple shape() const;
  const py::object& object() const { return object_; }

 private:
  Py_buffer view_{};
  py::object object_;
  size_t count_ = 0;
  DataType type_ = DataType::uint8;
};

// The chorus type of a struct-module format with the given item size
// ("f" -> float32, "e" -> float16, "<q" -> int64), or nullopt.
std::optional<DataType> data_type_of_format(const std::string& format, size_t itemsize);

// The numpy dtype name of a chorus type ("bfloat16" -> "uint16": numpy has
// no bfloat16, so such arrays are raw uint16 storage).
const char* numpy_storage_name(DataType type);

}  // namespace chorus::python
