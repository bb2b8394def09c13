#include "adapters/python_module/dlpack.h"

#include <cstdint>
#include <vector>

namespace chorus::python {

namespace {

// DLPack's C ABI (dlpack.h, versions 0.5-0.8: the "dltensor" capsule), as
// its specification lays the structs out.
struct DlDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DlDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DlTensor {
  void* data;
  DlDevice device;
  int32_t ndim;
  DlDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: C-contiguous
  uint64_t byte_offset;
};
struct DlManagedTensor {
  DlTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DlManagedTensor* self);
};

// Device types and type codes of the specification.
constexpr int32_t kDlCpu = 1, kDlCuda = 2, kDlCudaHost = 3, kDlCudaManaged = 13;
constexpr uint8_t kDlInt = 0, kDlUInt = 1, kDlFloat = 2, kDlBfloat = 4;

std::string dlpack_type_name(const DlDataType& dtype) {
  const char* kind = "code" ;
  switch (dtype.code) {
    case kDlInt: kind = "int"; break;
    case kDlUInt: kind = "uint"; break;
    case kDlFloat: kind = "float"; break;
    case kDlBfloat: kind = "bfloat"; break;
    case 5: kind = "complex"; break;
    case 6: kind = "bool"; break;
    default: return "type code " + std::to_string(dtype.code) + " of " + std::to_string(dtype.bits) + " bits";
  }
  std::string name = std::string(kind) + std::to_string(dtype.bits);
  if (dtype.lanes != 1) name += "x" + std::to_string(dtype.lanes);
  return name;
}

std::optional<DataType> chorus_type_of_dlpack(const DlDataType& dtype) {
  if (dtype.lanes != 1) return std::nullopt;
  switch (dtype.code) {
    case kDlInt:
      if (dtype.bits == 8) return DataType::int8;
      if (dtype.bits == 32) return DataType::int32;
      if (dtype.bits == 64) return DataType::int64;
      return std::nullopt;
    case kDlUInt:
      if (dtype.bits == 8) return DataType::uint8;
      if (dtype.bits == 32) return DataType::uint32;
      if (dtype.bits == 64) return DataType::uint64;
      return std::nullopt;
    case kDlFloat:
      if (dtype.bits == 16) return DataType::float16;
      if (dtype.bits == 32) return DataType::float32;
      if (dtype.bits == 64) return DataType::float64;
      return std::nullopt;
    case kDlBfloat: return dtype.bits == 16 ? std::optional(DataType::bfloat16) : std::nullopt;
    default: return std::nullopt;
  }
}

// Releases the tensor unless disarmed (the error paths).
struct HeldTensor {
  DlManagedTensor* managed;
  ~HeldTensor() {
    if (managed) release_dlpack(managed);
  }
};

}  // namespace

void release_dlpack(void* managed) {
  auto* tensor = static_cast<DlManagedTensor*>(managed);
  if (tensor && tensor->deleter) tensor->deleter(tensor);
}

std::optional<DlpackArray> dlpack_array_of(const py::handle& object, const std::string& what) {
  if (!py::hasattr(object, "__dlpack__")) return std::nullopt;
  int32_t device_type = kDlCpu;
  if (py::hasattr(object, "__dlpack_device__")) {
    const py::tuple device = object.attr("__dlpack_device__")().cast<py::tuple>();
    if (device.size() != 2) throw py::type_error(what + ": __dlpack_device__() is not a (type, id) pair");
    device_type = device[0].cast<int32_t>();
  }
  if (device_type != kDlCpu && device_type != kDlCuda && device_type != kDlCudaHost &&
      device_type != kDlCudaManaged)
    throw py::value_error(what + ": its DLPack device type is " + std::to_string(device_type) +
                          "; chorus takes the CPU's (1), CUDA's (2), CUDA host (3) and CUDA managed (13) memory");
  const bool on_cuda = device_type == kDlCuda || device_type == kDlCudaManaged;
  // A CUDA producer orders the stream named here after its writes.
  const py::object capsule = on_cuda ? object.attr("__dlpack__")(py::arg("stream") = 1) : object.attr("__dlpack__")();
  if (!PyCapsule_IsValid(capsule.ptr(), "dltensor"))
    throw py::type_error(what + ": __dlpack__() did not return an unused \"dltensor\" capsule");
  auto* managed = static_cast<DlManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (managed == nullptr) throw py::error_already_set();
  // Consumed: the capsule no longer deletes it; HeldTensor (then the BufferView) does.
  if (PyCapsule_SetName(capsule.ptr(), "used_dltensor") != 0) throw py::error_already_set();
  HeldTensor held{managed};
  const DlTensor& tensor = managed->dl_tensor;
  if (tensor.device.device_type != device_type)
    throw py::value_error(what + ": its DLPack tensor is on device type " + std::to_string(tensor.device.device_type) +
                          " but __dlpack_device__() said " + std::to_string(device_type));
  if (tensor.ndim < 0) throw py::value_error(what + ": its DLPack tensor has " + std::to_string(tensor.ndim) + " dimensions");
  DlpackArray array;
  array.type = chorus_type_of_dlpack(tensor.dtype);
  array.type_name = dlpack_type_name(tensor.dtype);
  array.itemsize = (static_cast<size_t>(tensor.dtype.bits) * tensor.dtype.lanes + 7) / 8;
  array.on_cuda = on_cuda;
  array.count = 1;
  py::tuple shape(static_cast<size_t>(tensor.ndim));
  std::vector<int64_t> extents(static_cast<size_t>(tensor.ndim));
  for (int32_t axis = 0; axis < tensor.ndim; ++axis) {
    const int64_t extent = tensor.shape[axis];
    if (extent < 0) throw py::value_error(what + ": its DLPack tensor has a negative extent");
    extents[static_cast<size_t>(axis)] = extent;
    shape[static_cast<size_t>(axis)] = extent;
    array.count *= static_cast<size_t>(extent);
  }
  // C order's strides (in elements), skipping axes of one element, whose stride means nothing.
  if (tensor.strides != nullptr && array.count > 1) {
    int64_t expected = 1;
    for (int32_t axis = tensor.ndim - 1; axis >= 0; --axis) {
      const int64_t extent = extents[static_cast<size_t>(axis)];
      if (extent != 1 && tensor.strides[axis] != expected)
        throw py::value_error(what + " is a DLPack tensor that is not C-contiguous; chorus reads and writes "
                              "buffers in place (pass a contiguous copy and copy the result back)");
      expected *= extent;
    }
  }
  array.shape = shape;
  array.data = static_cast<std::byte*>(tensor.data) + tensor.byte_offset;
  array.managed = managed;
  held.managed = nullptr;
  return array;
}

}  // namespace chorus::python
