#include "adapters/torch/placement.h"

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "base/error.h"
#include "base/log.h"
#include "base/memory.h"

namespace chorus::torch_backend {

void expect_one_device(const std::vector<at::Tensor>& tensors, const char* collective, int rank) {
  for (const at::Tensor& tensor : tensors) {
    if (tensor.device() != tensors[0].device()) {
      throw InvalidArgument(cat("rank ", rank, ": chorus.torch ", collective, ": tensors on ",
                                tensors[0].device().str(), " and on ", tensor.device().str(),
                                "; expected every tensor of the call on one device"));
    }
  }
}

Placement placement_of(const std::vector<at::Tensor>& tensors, const char* collective, int rank) {
  Placement placement;
  if (tensors.empty()) return placement;
  expect_one_device(tensors, collective, rank);
  placement.device = tensors[0].device();
  if (placement.on_cuda()) {
#if CHORUS_TORCH_CUDA_TENSORS
    // torch's own runtime answers (a guard of the CUDA device type, found
    // in c10's registry), so no CUDA header is needed here.
    placement.stream = c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).getStream(placement.device);
#else
    throw InvalidArgument(cat("rank ", rank, ": chorus.torch ", collective, ": CUDA tensors need torch 2.3 or later"));
#endif
  }
  return placement;
}

void place(CollectiveOptions& options, const Placement& placement) {
  if (!placement.on_cuda()) return;
  options.memory = Memory::cuda(placement.device.index());
#if CHORUS_TORCH_CUDA_TENSORS
  // Null for torch's default stream: the legacy default stream, as chorus reads it.
  options.cuda_stream = placement.stream->native_handle();
  // As NCCL: the stream is ordered after the call by wait() (work.cc), not
  // from the issue on, so DDP's backward goes on while its buckets reduce.
  options.cuda_stream_waits_for_async = false;
#endif
}

void order_current_stream_after(const Placement& placement) {
  if (!placement.stream) return;
  c10::Event done(c10::DeviceType::CUDA);
  done.record(*placement.stream);
  done.block(c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).getStream(placement.device));
}

}  // namespace chorus::torch_backend
