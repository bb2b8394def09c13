// Launchers of the device reduction kernels (reduce_kernels.cu), for
// module.cc. `type` and `op` are chorus::DataType and chorus::ReduceOp;
// a pair the host kernels reject (bitwise ops on floating point) returns
// cudaErrorInvalidValue, though libchorus validates every call first.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace chorus::cuda {

cudaError_t launch_reduce(int type, int op, void* accumulator, const void* operand, size_t count,
                          cudaStream_t stream);
cudaError_t launch_average(int type, void* data, size_t count, size_t contributors, cudaStream_t stream);

}  // namespace chorus::cuda
