#include "adapters/python_module/buffers.h"

#include <string_view>

#include "adapters/python_module/cuda_interface.h"
#include "adapters/python_module/dlpack.h"
#include "chorus/collective_options.h"

namespace chorus::python {

namespace {

std::string type_name_of(const py::handle& object) {
  return py::str(py::type::handle_of(object).attr("__name__")).cast<std::string>();
}

// The element type: dtype= where given (its size must be the item size),
// else the one `format` (a buffer format or a typestr, named by `source`) gave.
DataType checked_type(const std::string& what, size_t itemsize, const std::string& source,
                      const std::string& format, std::optional<DataType> parsed,
                      std::optional<DataType> override_type) {
  if (override_type) {
    if (element_size(*override_type) != itemsize)
      throw py::value_error(what + ": dtype " + std::string(to_string(*override_type)) + " has " +
                            std::to_string(element_size(*override_type)) + "-byte elements but the buffer's are " +
                            std::to_string(itemsize) + " bytes (" + source + " '" + format + "')");
    return *override_type;
  }
  if (!parsed)
    throw py::type_error(what + ": " + source + " '" + format + "' (" + std::to_string(itemsize) +
                         "-byte items) has no chorus type; chorus moves int8, uint8, int32, uint32, int64, "
                         "uint64, float16, float32, float64 and, with dtype=chorus.bfloat16, bfloat16 "
                         "stored as uint16");
  return *parsed;
}

}  // namespace

std::optional<DataType> data_type_of_format(const std::string& format, size_t itemsize) {
  std::string_view code = format;
  // Byte order and alignment prefixes: native and little-endian are what
  // this machine computes with; big-endian data would reduce to garbage.
  if (!code.empty() && (code[0] == '@' || code[0] == '=' || code[0] == '<')) code.remove_prefix(1);
  if (code.size() != 1) return std::nullopt;
  switch (code[0]) {
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n':
      if (itemsize == 1) return DataType::int8;
      if (itemsize == 4) return DataType::int32;
      if (itemsize == 8) return DataType::int64;
      return std::nullopt;
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N':
      if (itemsize == 1) return DataType::uint8;
      if (itemsize == 4) return DataType::uint32;
      if (itemsize == 8) return DataType::uint64;
      return std::nullopt;
    case 'e':
      return itemsize == 2 ? std::optional(DataType::float16) : std::nullopt;
    case 'f':
      return itemsize == 4 ? std::optional(DataType::float32) : std::nullopt;
    case 'd':
      return itemsize == 8 ? std::optional(DataType::float64) : std::nullopt;
    default:
      return std::nullopt;
  }
}

const char* numpy_storage_name(DataType type) {
  switch (type) {
    case DataType::int8: return "int8";
    case DataType::uint8: return "uint8";
    case DataType::int32: return "int32";
    case DataType::uint32: return "uint32";
    case DataType::int64: return "int64";
    case DataType::uint64: return "uint64";
    case DataType::float16: return "float16";
    case DataType::bfloat16: return "uint16";
    case DataType::float32: return "float32";
    case DataType::float64: return "float64";
  }
  return "uint8";
}

BufferView::BufferView(const py::handle& object, Access access, const char* what,
                       std::optional<DataType> override_type) {
  if (py::hasattr(object, "__cuda_array_interface__")) {
    take_cuda_array(object, access, what, override_type);
    return;
  }
  if (!PyObject_CheckBuffer(object.ptr()) && py::hasattr(object, "__dlpack__")) {
    take_dlpack(object, access, what, override_type);
    return;
  }
  if (!PyObject_CheckBuffer(object.ptr()))
    throw py::type_error(std::string(what) + " must support the buffer protocol (a numpy array, bytearray, "
                         "memoryview or array.array), the CUDA Array Interface or DLPack, got " +
                         type_name_of(object));
  // Ask for strides rather than contiguity so a strided view gets our message
  // (with the remedy) instead of the exporter's generic BufferError.
  if (PyObject_GetBuffer(object.ptr(), &view_, PyBUF_RECORDS_RO) != 0) throw py::error_already_set();
  exported_ = true;
  object_ = py::reinterpret_borrow<py::object>(object);
  try {
    if (!PyBuffer_IsContiguous(&view_, 'C'))
      throw py::value_error(std::string(what) + " is not C-contiguous; chorus reads and writes buffers in place "
                            "(pass numpy.ascontiguousarray(x) and copy the result back)");
    if (access == Access::write && view_.readonly)
      throw py::value_error(std::string(what) + " is read-only but this call writes into it");
    const size_t itemsize = static_cast<size_t>(view_.itemsize);
    const std::string format = view_.format != nullptr ? view_.format : "B";
    type_ = checked_type(what, itemsize, "buffer format", format, data_type_of_format(format, itemsize), override_type);
    count_ = static_cast<size_t>(view_.len) / itemsize;
    data_ = view_.buf;
  } catch (...) {
    PyBuffer_Release(&view_);
    exported_ = false;
    throw;
  }
}

void BufferView::take_cuda_array(const py::handle& object, Access access, const std::string& what,
                                 std::optional<DataType> override_type) {
  const std::optional<CudaArray> array = cuda_array_of(object, what);
  object_ = py::reinterpret_borrow<py::object>(object);
  if (access == Access::write && array->readonly)
    throw py::value_error(what + " is a read-only CUDA array but this call writes into it");
  type_ = checked_type(what, array->itemsize, "__cuda_array_interface__ typestr", array->typestr, array->type,
                       override_type);
  count_ = array->count;
  data_ = array->data;
  stream_ = array->stream;
  described_shape_ = array->shape;
  place_on_cuda_device(what, "its __cuda_array_interface__ points");
}

void BufferView::place_on_cuda_device(const std::string& what, const char* pointer_described) {
  // An empty array may have no pointer, so no device: nothing moves.
  if (count_ == 0) {
    fits_any_memory_ = true;
    return;
  }
  // The device the pointer belongs to, as the CUDA runtime says (in a
  // process or build without CUDA, every pointer is host memory).
  memory_ = memory_of(data_);
  if (memory_.on_host())
    throw py::value_error(what + ": " + pointer_described + " at memory that this process's CUDA runtime does "
                          "not know as device memory (host memory, or a process or build of chorus without CUDA: "
                          "docs/cuda.md)");
}

void BufferView::take_dlpack(const py::handle& object, Access, const std::string& what,
                             std::optional<DataType> override_type) {
  std::optional<DlpackArray> array = dlpack_array_of(object, what);
  dlpack_ = array->managed;  // released by the destructor, or below
  object_ = py::reinterpret_borrow<py::object>(object);
  try {
    type_ = checked_type(what, array->itemsize, "DLPack dtype", array->type_name, array->type, override_type);
    count_ = array->count;
    data_ = array->data;
    described_shape_ = array->shape;
    if (array->on_cuda) place_on_cuda_device(what, "its DLPack tensor, on a CUDA device, points");
  } catch (...) {
    release_dlpack(dlpack_);
    dlpack_ = nullptr;
    throw;
  }
}

BufferView::~BufferView() {
  if (exported_) PyBuffer_Release(&view_);
  if (dlpack_) release_dlpack(dlpack_);
}

py::tuple BufferView::shape() const {
  if (!exported_) return described_shape_;
  if (view_.shape == nullptr) return py::make_tuple(count_);
  py::tuple shape(static_cast<size_t>(view_.ndim));
  for (int axis = 0; axis < view_.ndim; ++axis) shape[static_cast<size_t>(axis)] = view_.shape[axis];
  return shape;
}

}  // namespace chorus::python
