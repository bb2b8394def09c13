// The few names that differ between the torch versions chorus.torch is
// written for. torch 2.0 moved the collectives a backend implements from
// c10d::ProcessGroup to c10d::Backend (a ProcessGroup now dispatches to one
// Backend per device type) and made Work a top-level class; upstream 1.13
// nests it as ProcessGroup::Work, Debian's 1.13 packaging already has
// c10d/Work.hpp. One source, branches only here.
#pragma once

#include <torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

// allgather_into_tensor_coalesced and reduce_scatter_tensor_coalesced (what
// torch's _coalescing_manager calls) exist from torch 2.1 on.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define CHORUS_TORCH_HAS_TENSOR_COALESCED 1
#else
#define CHORUS_TORCH_HAS_TENSOR_COALESCED 0
#endif

// c10d::Store::clone() (a store handle for another thread), pure virtual
// from torch 2.4 on.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define CHORUS_TORCH_STORE_HAS_CLONE 1
#else
#define CHORUS_TORCH_STORE_HAS_CLONE 0
#endif

// CUDA tensors: the caller's current stream comes from torch's own runtime
// as a cudaStream_t through c10::Stream::native_handle(), with no CUDA
// header here, so the backend builds against a CPU-only torch as well. The
// CUDA path is written against torch 2.3 and later; older torch refuses
// CUDA tensors with an error that says so.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define CHORUS_TORCH_CUDA_TENSORS 1
#else
#define CHORUS_TORCH_CUDA_TENSORS 0
#endif

namespace chorus::torch_backend {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

#if __has_include(<torch/csrc/distributed/c10d/Work.hpp>)
using TorchWork = c10d::Work;
#else
using TorchWork = c10d::ProcessGroup::Work;
#endif

}  // namespace chorus::torch_backend
