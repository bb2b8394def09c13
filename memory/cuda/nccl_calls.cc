// The NCCL half of libchorus_cuda.so (module_api.h): NCCL is dlopen'ed on
// first use, so the module loads on machines without it and a job that
// never asks for NCCL never maps it. Compiled with nccl.h's types where the
// build found it; without, every call says the build has no NCCL.
#include <dlfcn.h>

#include <cstring>
#include <string>

#include "memory/cuda/module_api.h"
#include "memory/cuda/nccl_calls.h"
#include "base/types.h"

#if CHORUS_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace chorus::cuda {
namespace {

thread_local std::string nccl_error;

CudaStatus say(std::string text) {
  nccl_error = std::move(text);
  return nccl_error.c_str();
}

}  // namespace

#if CHORUS_HAVE_NCCL
namespace {

struct Nccl {
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) init_rank = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclReduce) reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  std::string missing;  // why there is no NCCL
};

const Nccl& nccl() {
  static const Nccl loaded = [] {
    Nccl found;
    void* library = ::dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      const char* why = ::dlerror();
      found.missing = std::string("NCCL cannot be loaded: ") + (why ? why : "libnccl.so.2 not found");
      return found;
    }
    const auto bind = [&](auto& function, const char* name) {
      function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(::dlsym(library, name));
      if (!function && found.missing.empty()) found.missing = std::string("libnccl.so.2 lacks ") + name;
    };
    bind(found.get_unique_id, "ncclGetUniqueId");
    bind(found.init_rank, "ncclCommInitRank");
    bind(found.destroy, "ncclCommDestroy");
    bind(found.all_reduce, "ncclAllReduce");
    bind(found.reduce, "ncclReduce");
    bind(found.broadcast, "ncclBroadcast");
    bind(found.error_string, "ncclGetErrorString");
    return found;
  }();
  return loaded;
}

CudaStatus check(ncclResult_t result, const char* what) {
  if (result == ncclSuccess) return nullptr;
  return say(std::string(what) + ": " + nccl().error_string(result));
}

bool nccl_type(int type, ncclDataType_t& out) {
  switch (static_cast<DataType>(type)) {
    case DataType::int8: out = ncclInt8; return true;
    case DataType::uint8: out = ncclUint8; return true;
    case DataType::int32: out = ncclInt32; return true;
    case DataType::uint32: out = ncclUint32; return true;
    case DataType::int64: out = ncclInt64; return true;
    case DataType::uint64: out = ncclUint64; return true;
    case DataType::float16: out = ncclFloat16; return true;
    case DataType::bfloat16: out = ncclBfloat16; return true;
    case DataType::float32: out = ncclFloat32; return true;
    case DataType::float64: out = ncclFloat64; return true;
  }
  return false;
}

bool nccl_op(int op, ncclRedOp_t& out) {
  switch (static_cast<ReduceOp>(op)) {
    case ReduceOp::sum: out = ncclSum; return true;
    case ReduceOp::prod: out = ncclProd; return true;
    case ReduceOp::min: out = ncclMin; return true;
    case ReduceOp::max: out = ncclMax; return true;
    case ReduceOp::avg: out = ncclAvg; return true;
    default: return false;  // NCCL has no bitwise reductions
  }
}

CudaStatus ready() { return nccl().missing.empty() ? nullptr : say(nccl().missing); }

CudaStatus type_and_op(int type, int op, ncclDataType_t& nccl_data, ncclRedOp_t& nccl_reduction) {
  if (!nccl_type(type, nccl_data)) return say("NCCL: no such data type");
  if (!nccl_op(op, nccl_reduction)) return say("NCCL has no bitwise reductions (band, bor, bxor)");
  return nullptr;
}

}  // namespace

CudaStatus nccl_unique_id(unsigned char id[128]) {
  if (CudaStatus status = ready()) return status;
  static_assert(sizeof(ncclUniqueId) == 128);
  ncclUniqueId unique{};
  if (CudaStatus status = check(nccl().get_unique_id(&unique), "ncclGetUniqueId")) return status;
  std::memcpy(id, &unique, sizeof(unique));
  return nullptr;
}

CudaStatus nccl_init(int ranks, const unsigned char id[128], int rank, int device, void** communicator) {
  if (CudaStatus status = ready()) return status;
  if (cudaError_t error = cudaSetDevice(device); error != cudaSuccess)
    return say(std::string("cudaSetDevice: ") + cudaGetErrorString(error));
  ncclUniqueId unique{};
  std::memcpy(&unique, id, sizeof(unique));
  ncclComm_t comm = nullptr;
  if (CudaStatus status = check(nccl().init_rank(&comm, ranks, unique, rank), "ncclCommInitRank")) return status;
  *communicator = comm;
  return nullptr;
}

CudaStatus nccl_destroy(void* communicator) {
  if (CudaStatus status = ready()) return status;
  return check(nccl().destroy(static_cast<ncclComm_t>(communicator)), "ncclCommDestroy");
}

CudaStatus nccl_allreduce(const void* input, void* output, size_t count, int type, int op, void* communicator,
                          void* stream) {
  if (CudaStatus status = ready()) return status;
  ncclDataType_t data;
  ncclRedOp_t reduction;
  if (CudaStatus status = type_and_op(type, op, data, reduction)) return status;
  return check(nccl().all_reduce(input, output, count, data, reduction, static_cast<ncclComm_t>(communicator),
                                 static_cast<cudaStream_t>(stream)),
               "ncclAllReduce");
}

CudaStatus nccl_reduce(const void* input, void* output, size_t count, int type, int op, int root, void* communicator,
                       void* stream) {
  if (CudaStatus status = ready()) return status;
  ncclDataType_t data;
  ncclRedOp_t reduction;
  if (CudaStatus status = type_and_op(type, op, data, reduction)) return status;
  return check(nccl().reduce(input, output, count, data, reduction, root, static_cast<ncclComm_t>(communicator),
                             static_cast<cudaStream_t>(stream)),
               "ncclReduce");
}

CudaStatus nccl_broadcast(void* data, size_t count, int type, int root, void* communicator, void* stream) {
  if (CudaStatus status = ready()) return status;
  ncclDataType_t nccl_data;
  if (!nccl_type(type, nccl_data)) return say("NCCL: no such data type");
  return check(nccl().broadcast(data, data, count, nccl_data, root, static_cast<ncclComm_t>(communicator),
                                static_cast<cudaStream_t>(stream)),
               "ncclBroadcast");
}

#else

namespace {
CudaStatus absent() { return say("this build of chorus has no NCCL support (nccl.h was not found)"); }
}  // namespace

CudaStatus nccl_unique_id(unsigned char*) { return absent(); }
CudaStatus nccl_init(int, const unsigned char*, int, int, void**) { return absent(); }
CudaStatus nccl_destroy(void*) { return absent(); }
CudaStatus nccl_allreduce(const void*, void*, size_t, int, int, void*, void*) { return absent(); }
CudaStatus nccl_reduce(const void*, void*, size_t, int, int, int, void*, void*) { return absent(); }
CudaStatus nccl_broadcast(void*, size_t, int, int, void*, void*) { return absent(); }

#endif

}  // namespace chorus::cuda
