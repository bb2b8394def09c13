// The NCCL entries of the module's table (module_api.h), for module.cc.
#pragma once

#include <cstddef>

#include "memory/cuda/module_api.h"

namespace chorus::cuda {

CudaStatus nccl_unique_id(unsigned char id[128]);
CudaStatus nccl_init(int ranks, const unsigned char id[128], int rank, int device, void** communicator);
CudaStatus nccl_destroy(void* communicator);
CudaStatus nccl_allreduce(const void* input, void* output, size_t count, int type, int op, void* communicator,
                          void* stream);
CudaStatus nccl_reduce(const void* input, void* output, size_t count, int type, int op, int root, void* communicator,
                       void* stream);
CudaStatus nccl_broadcast(void* data, size_t count, int type, int root, void* communicator, void* stream);

}  // namespace chorus::cuda
