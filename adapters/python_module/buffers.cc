#include "adapters/python_module/buffers.h"

#include <string_view>

namespace chorus::python {

namespace {

std::string type_name_of(const py::handle& object) {
  return py::str(py::type::handle_of(object).attr("__name__")).cast<std::string>();
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
  if (!PyObject_CheckBuffer(object.ptr()))
    throw py::type_error(std::string(what) + " must support the buffer protocol (a numpy array, bytearray, "
                         "memoryview or array.array), got " + type_name_of(object));
  // Ask for strides rather than contiguity so a strided view gets our message
  // (with the remedy) instead of the exporter's generic BufferError.
  if (PyObject_GetBuffer(object.ptr(), &view_, PyBUF_RECORDS_RO) != 0) throw py::error_already_set();
  object_ = py::reinterpret_borrow<py::object>(object);
  try {
    if (!PyBuffer_IsContiguous(&view_, 'C'))
      throw py::value_error(std::string(what) + " is not C-contiguous; chorus reads and writes buffers in place "
                            "(pass numpy.ascontiguousarray(x) and copy the result back)");
    if (access == Access::write && view_.readonly)
      throw py::value_error(std::string(what) + " is read-only but this call writes into it");
    const size_t itemsize = static_cast<size_t>(view_.itemsize);
    const std::string format = view_.format != nullptr ? view_.format : "B";
    if (override_type) {
      if (element_size(*override_type) != itemsize)
        throw py::value_error(std::string(what) + ": dtype " + std::string(to_string(*override_type)) + " has " +
                              std::to_string(element_size(*override_type)) + "-byte elements but the buffer's are " +
                              std::to_string(itemsize) + " bytes (format '" + format + "')");
      type_ = *override_type;
    } else {
      const std::optional<DataType> type = data_type_of_format(format, itemsize);
      if (!type)
        throw py::type_error(std::string(what) + ": buffer format '" + format + "' (" + std::to_string(itemsize) +
                             "-byte items) has no chorus type; chorus moves int8, uint8, int32, uint32, int64, "
                             "uint64, float16, float32, float64 and, with dtype=chorus.bfloat16, bfloat16 "
                             "stored as uint16");
      type_ = *type;
    }
    count_ = static_cast<size_t>(view_.len) / itemsize;
  } catch (...) {
    PyBuffer_Release(&view_);
    throw;
  }
}

BufferView::~BufferView() { PyBuffer_Release(&view_); }

py::tuple BufferView::shape() const {
  if (view_.shape == nullptr) return py::make_tuple(count_);
  py::tuple shape(static_cast<size_t>(view_.ndim));
  for (int axis = 0; axis < view_.ndim; ++axis) shape[static_cast<size_t>(axis)] = view_.shape[axis];
  return shape;
}

}  // namespace chorus::python
