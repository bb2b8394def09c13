// The CUDA Array Interface read as cuda_interface.h says.
#include "adapters/python_module/cuda_interface.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace chorus::python {

namespace {

// cudaStreamPerThread's handle in the CUDA runtime API (driver_types.h); no
// CUDA header is included here.
constexpr uintptr_t kPerThreadStream = 0x2;

size_t size_of_typestr(std::string_view code) {
  size_t bytes = 0;
  for (char digit : code) {
    if (digit < '0' || digit > '9') return 0;
    bytes = bytes * 10 + static_cast<size_t>(digit - '0');
  }
  return bytes;
}

}  // namespace

std::optional<DataType> data_type_of_typestr(const std::string& typestr) {
  std::string_view code = typestr;
  // Little-endian, native or not applicable (one byte): what the GPU computes with.
  if (code.size() < 3 || (code[0] != '<' && code[0] != '|' && code[0] != '=')) return std::nullopt;
  const char kind = code[1];
  const size_t bytes = size_of_typestr(code.substr(2));
  switch (kind) {
    case 'i':
      if (bytes == 1) return DataType::int8;
      if (bytes == 4) return DataType::int32;
      if (bytes == 8) return DataType::int64;
      return std::nullopt;
    case 'u':
      if (bytes == 1) return DataType::uint8;
      if (bytes == 4) return DataType::uint32;
      if (bytes == 8) return DataType::uint64;
      return std::nullopt;
    case 'f':
      if (bytes == 2) return DataType::float16;
      if (bytes == 4) return DataType::float32;
      if (bytes == 8) return DataType::float64;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

std::optional<CudaArray> cuda_array_of(const py::handle& object, const std::string& what) {
  // A property that raises for some objects (PyTorch's CPU tensors raise
  // AttributeError): hasattr says no for those.
  if (!py::hasattr(object, "__cuda_array_interface__")) return std::nullopt;
  const py::object described = object.attr("__cuda_array_interface__");
  if (!py::isinstance<py::dict>(described))
    throw py::type_error(what + ": __cuda_array_interface__ is not a dict");
  const py::dict interface = described.cast<py::dict>();
  auto field = [&](const char* name) -> py::object {
    return interface.contains(name) ? py::reinterpret_borrow<py::object>(interface[name]) : py::none();
  };
  CudaArray array;
  const py::object version = field("version");
  if (version.is_none() || version.cast<int>() < 2)
    throw py::value_error(what + ": __cuda_array_interface__ version " +
                          (version.is_none() ? std::string("(missing)") : py::str(version).cast<std::string>()) +
                          "; chorus reads versions 2 and 3");
  if (!field("mask").is_none())
    throw py::value_error(what + ": a masked CUDA array (__cuda_array_interface__ 'mask'); chorus moves whole arrays");
  // shape and count
  const py::object shape = field("shape");
  if (!py::isinstance<py::tuple>(shape)) throw py::type_error(what + ": __cuda_array_interface__ 'shape' is not a tuple");
  array.shape = shape.cast<py::tuple>();
  array.count = 1;
  std::vector<size_t> extents;
  for (const py::handle extent : array.shape) {
    extents.push_back(extent.cast<size_t>());
    array.count *= extents.back();
  }
  // type
  array.typestr = field("typestr").is_none() ? std::string() : field("typestr").cast<std::string>();
  array.itemsize = array.typestr.size() > 2 ? size_of_typestr(std::string_view(array.typestr).substr(2)) : 0;
  if (array.itemsize == 0)
    throw py::value_error(what + ": __cuda_array_interface__ typestr '" + array.typestr + "' is not a valid typestr");
  array.type = data_type_of_typestr(array.typestr);
  // data
  const py::object data = field("data");
  if (!py::isinstance<py::tuple>(data) || py::len(data) != 2)
    throw py::type_error(what + ": __cuda_array_interface__ 'data' is not a (pointer, read_only) tuple");
  const py::tuple pointer_and_flag = data.cast<py::tuple>();
  array.data = reinterpret_cast<void*>(pointer_and_flag[0].cast<uintptr_t>());
  array.readonly = pointer_and_flag[1].cast<bool>();
  // strides: absent or None means C-contiguous; otherwise they must be it.
  const py::object strides = field("strides");
  if (!strides.is_none()) {
    const py::tuple given = strides.cast<py::tuple>();
    if (given.size() != extents.size())
      throw py::value_error(what + ": __cuda_array_interface__ has " + std::to_string(given.size()) +
                            " strides for " + std::to_string(extents.size()) + " dimensions");
    size_t expected = array.itemsize;
    for (size_t axis = extents.size(); axis-- > 0;) {
      // An axis of one element may have any stride: it is never stepped.
      if (extents[axis] > 1 && given[axis].cast<long long>() != static_cast<long long>(expected))
        throw py::value_error(what + " is a CUDA array that is not C-contiguous; chorus reads and writes buffers in "
                              "place (pass a contiguous copy, e.g. cupy.ascontiguousarray(x), and copy the "
                              "result back)");
      expected *= extents[axis];
    }
  }
  // stream (version 3): 0 is disallowed by the interface, 1 is the legacy
  // default stream, 2 the per-thread default stream.
  const py::object stream = field("stream");
  if (!stream.is_none()) {
    const uintptr_t handle = stream.cast<uintptr_t>();
    if (handle == 0)
      throw py::value_error(what + ": __cuda_array_interface__ stream 0, which the interface disallows");
    array.stream = handle == 1 ? nullptr : handle == kPerThreadStream ? reinterpret_cast<void*>(kPerThreadStream)
                                                                       : reinterpret_cast<void*>(handle);
  }
  return array;
}

}  // namespace chorus::python
