// Marks the small inline functions (16-bit float conversions, reduction
// operations) that the CUDA kernels call too: compiled by nvcc they are
// __host__ __device__, by the host compiler nothing changes.
#pragma once

#if defined(__CUDACC__)
#define CHORUS_HOST_DEVICE __host__ __device__
#else
#define CHORUS_HOST_DEVICE
#endif
