// libchorus_cuda.so: the CUDA runtime calls of memory/cuda/module_api.h. Each
// wrapper turns a cudaError_t into the text libchorus puts in its errors;
// the kernels are in reduce_kernels.cu.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "memory/cuda/module_api.h"
#include "memory/cuda/nccl_calls.h"
#include "memory/cuda/reduce_kernels.h"

namespace chorus::cuda {
namespace {

thread_local std::string last_error;

CudaStatus failed(const std::string& what, cudaError_t error) {
  last_error = what + ": " + cudaGetErrorString(error) + " (" + cudaGetErrorName(error) + ")";
  // A failed call leaves a sticky "last error" that a later
  // cudaGetLastError (ours after a launch) would report again.
  (void)cudaGetLastError();
  return last_error.c_str();
}

CudaStatus check(cudaError_t error, const char* what) {
  return error == cudaSuccess ? nullptr : failed(what, error);
}

std::string bytes_text(size_t bytes) { return std::to_string(bytes) + " bytes"; }

CudaStatus device_count(int* count) {
  *count = 0;
  const cudaError_t error = cudaGetDeviceCount(count);
  if (error == cudaErrorNoDevice) {
    *count = 0;
    (void)cudaGetLastError();
    return nullptr;
  }
  return check(error, "cudaGetDeviceCount");
}

CudaStatus describe_pointer(const void* pointer, int* kind, int* device) {
  cudaPointerAttributes attributes{};
  const cudaError_t error = cudaPointerGetAttributes(&attributes, pointer);
  if (error != cudaSuccess) return failed("cudaPointerGetAttributes", error);
  *device = attributes.device;
  switch (attributes.type) {
    case cudaMemoryTypeDevice: *kind = 1; break;
    case cudaMemoryTypeManaged: *kind = 2; break;
    default: *kind = 0; break;  // unregistered or pinned host memory
  }
  return nullptr;
}

CudaStatus set_device(int device) { return check(cudaSetDevice(device), "cudaSetDevice"); }

CudaStatus current_device(int* device) { return check(cudaGetDevice(device), "cudaGetDevice"); }

CudaStatus mps_enabled(int device, int* enabled) {
  *enabled = 0;
#if CUDART_VERSION >= 12040
  return check(cudaDeviceGetAttribute(enabled, cudaDevAttrMpsEnabled, device), "cudaDeviceGetAttribute(MpsEnabled)");
#else
  (void)device;
  last_error = "this CUDA runtime cannot say whether MPS is on (cudaDevAttrMpsEnabled needs CUDA 12.4)";
  return last_error.c_str();
#endif
}

CudaStatus stream_create(int device, void** stream) {
  if (CudaStatus status = set_device(device)) return status;
  cudaStream_t created = nullptr;
  if (cudaError_t error = cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking); error != cudaSuccess)
    return failed("cudaStreamCreateWithFlags", error);
  *stream = created;
  return nullptr;
}

CudaStatus stream_synchronize(void* stream) {
  return check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
}

CudaStatus event_create(int device, void** event) {
  if (CudaStatus status = set_device(device)) return status;
  cudaEvent_t created = nullptr;
  if (cudaError_t error = cudaEventCreateWithFlags(&created, cudaEventDisableTiming); error != cudaSuccess)
    return failed("cudaEventCreateWithFlags", error);
  *event = created;
  return nullptr;
}

CudaStatus event_destroy(void* event) {
  return check(cudaEventDestroy(static_cast<cudaEvent_t>(event)), "cudaEventDestroy");
}

CudaStatus event_record(void* event, void* stream) {
  return check(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)), "cudaEventRecord");
}

CudaStatus event_query(void* event, int* done) {
  const cudaError_t state = cudaEventQuery(static_cast<cudaEvent_t>(event));
  *done = state == cudaSuccess;
  if (state == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not an error: nothing for a later check to report
    return nullptr;
  }
  return check(state, "cudaEventQuery");
}

CudaStatus device_allocate(int device, size_t bytes, void** pointer) {
  if (CudaStatus status = set_device(device)) return status;
  const cudaError_t error = cudaMalloc(pointer, bytes);
  if (error != cudaSuccess)
    return failed("cudaMalloc of " + bytes_text(bytes) + " on cuda:" + std::to_string(device), error);
  return nullptr;
}

CudaStatus device_free(void* pointer) { return check(cudaFree(pointer), "cudaFree"); }

CudaStatus host_allocate(size_t bytes, void** pointer) {
  const cudaError_t error = cudaHostAlloc(pointer, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
  if (error != cudaSuccess) return failed("cudaHostAlloc of " + bytes_text(bytes) + " (pinned)", error);
  return nullptr;
}

CudaStatus host_free(void* pointer) { return check(cudaFreeHost(pointer), "cudaFreeHost"); }

CudaStatus copy_async(void* to, const void* from, size_t bytes, void* stream) {
  const cudaError_t error = cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream));
  if (error != cudaSuccess) return failed("cudaMemcpyAsync of " + bytes_text(bytes), error);
  return nullptr;
}

CudaStatus reduce_async(int type, int op, void* accumulator, const void* operand, size_t count, void* stream) {
  const cudaError_t error = launch_reduce(type, op, accumulator, operand, count, static_cast<cudaStream_t>(stream));
  if (error != cudaSuccess) return failed("reduction kernel over " + std::to_string(count) + " elements", error);
  return nullptr;
}

CudaStatus average_async(int type, void* data, size_t count, size_t contributors, void* stream) {
  const cudaError_t error = launch_average(type, data, count, contributors, static_cast<cudaStream_t>(stream));
  if (error != cudaSuccess) return failed("averaging kernel over " + std::to_string(count) + " elements", error);
  return nullptr;
}

// A driver function the runtime hands out by name (no link against libcuda).
template <class Function>
Function driver_function(const char* name) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &function, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Function>(function);
}

// cuStreamWaitValue32 lives in the driver API; the runtime hands out its
// address, so the module links libcudart only.
using StreamWaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

CudaStatus stream_wait_flag(void* stream, const uint32_t* flag, uint32_t value) {
  static const auto wait_value = driver_function<StreamWaitValue32>("cuStreamWaitValue32");
  if (!wait_value) {
    last_error = "the CUDA driver lacks cuStreamWaitValue32";
    return last_error.c_str();
  }
  void* device_view = nullptr;
  if (cudaError_t error = cudaHostGetDevicePointer(&device_view, const_cast<uint32_t*>(flag), 0); error != cudaSuccess)
    return failed("cudaHostGetDevicePointer of a stream flag", error);
  const CUresult result = wait_value(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(device_view), value,
                                     CU_STREAM_WAIT_VALUE_GEQ);
  if (result != CUDA_SUCCESS) {
    last_error = "cuStreamWaitValue32 failed with CUresult " + std::to_string(static_cast<int>(result));
    return last_error.c_str();
  }
  return nullptr;
}

CudaStatus driver_failed(const char* what, CUresult result) {
  last_error = std::string(what) + " failed with CUresult " + std::to_string(static_cast<int>(result));
  return last_error.c_str();
}

CudaStatus ipc_export(int device, const void* pointer, void** base, size_t* bytes, uint64_t* buffer_id,
                      unsigned char handle[64]) {
  if (CudaStatus status = set_device(device)) return status;
  using AddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  using PointerAttribute = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
  static const auto address_range = driver_function<AddressRange>("cuMemGetAddressRange");
  static const auto pointer_attribute = driver_function<PointerAttribute>("cuPointerGetAttribute");
  if (!address_range || !pointer_attribute) {
    last_error = "the CUDA driver lacks cuMemGetAddressRange or cuPointerGetAttribute";
    return last_error.c_str();
  }
  CUdeviceptr start = 0;
  size_t size = 0;
  if (CUresult result = address_range(&start, &size, reinterpret_cast<CUdeviceptr>(pointer)); result != CUDA_SUCCESS)
    return driver_failed("cuMemGetAddressRange", result);
  unsigned long long id = 0;
  if (CUresult result = pointer_attribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, reinterpret_cast<CUdeviceptr>(pointer));
      result != CUDA_SUCCESS)
    return driver_failed("cuPointerGetAttribute(BUFFER_ID)", result);
  cudaIpcMemHandle_t exported{};
  if (cudaError_t error = cudaIpcGetMemHandle(&exported, reinterpret_cast<void*>(start)); error != cudaSuccess)
    return failed("cudaIpcGetMemHandle", error);
  static_assert(sizeof(exported) == 64);
  std::memcpy(handle, &exported, sizeof(exported));
  *base = reinterpret_cast<void*>(start);
  *bytes = size;
  *buffer_id = id;
  return nullptr;
}

CudaStatus ipc_open(const unsigned char handle[64], int device, void** pointer) {
  if (CudaStatus status = set_device(device)) return status;
  cudaIpcMemHandle_t imported{};
  std::memcpy(&imported, handle, sizeof(imported));
  return check(cudaIpcOpenMemHandle(pointer, imported, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle");
}

CudaStatus ipc_close(void* pointer) { return check(cudaIpcCloseMemHandle(pointer), "cudaIpcCloseMemHandle"); }

CudaStatus pci_bus_id(int device, char id[32]) {
  return check(cudaDeviceGetPCIBusId(id, 32, device), "cudaDeviceGetPCIBusId");
}

const ModuleApi api_table = {
    kModuleApiVersion, device_count,  describe_pointer, set_device,   current_device,   mps_enabled,
    stream_create,     stream_synchronize,
    event_create,      event_destroy, event_record,     event_query,  device_allocate, device_free,
    host_allocate,     host_free,     copy_async,       reduce_async, average_async,    stream_wait_flag,
    ipc_export,        ipc_open,      ipc_close,        pci_bus_id,   nccl_unique_id,   nccl_init,
    nccl_destroy,      nccl_allreduce, nccl_reduce,     nccl_broadcast,
};

}  // namespace
}  // namespace chorus::cuda

extern "C" {
__attribute__((visibility("default"))) const chorus::cuda::ModuleApi* chorus_cuda_module_api() {
  return &chorus::cuda::api_table;
}
__attribute__((visibility("default"))) const char* chorus_cuda_module_version() { return CHORUS_VERSION; }
}
