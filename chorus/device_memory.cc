// Checks and stream ordering of calls on CUDA memory.
#include "chorus/device_memory.h"

#include "base/error.h"
#include "base/log.h"

namespace chorus {

Memory memory_of(const void* pointer) {
  if (!pointer) return Memory::host();
  cuda::Runtime* runtime = nullptr;
  try {
    runtime = &cuda::cuda_runtime();
  } catch (const InvalidArgument&) {
    return Memory::host();  // no CUDA in this build or process: all memory is host memory
  }
  const cuda::PointerInfo info = runtime->describe(pointer);
  if (info.kind == cuda::PointerKind::device) return Memory::cuda(info.device);
  if (info.kind == cuda::PointerKind::managed)
    throw InvalidArgument(cat("memory_of: the buffer is CUDA managed (unified) memory of cuda:", info.device,
                              ", which chorus does not move; use device memory (cudaMalloc) or host memory"));
  return Memory::host();
}

namespace detail {

std::unique_ptr<cuda::StreamOrder> prepare_device_call(Context& context, std::string_view call,
                                                       const CollectiveOptions& options,
                                                       std::initializer_list<NamedBuffer> buffers, bool async) {
  if (options.memory.kind != MemoryKind::cuda) return nullptr;
  const int rank = context.rank();
  const int device = options.memory.device;
  cuda::Runtime* runtime = nullptr;
  try {
    runtime = &cuda::cuda_runtime();
    runtime->backend(device);  // checks the device exists
  } catch (const InvalidArgument& error) {
    throw InvalidArgument(cat("rank ", rank, ": ", call, " on cuda:", device, ": ", error.what()));
  }
  for (const NamedBuffer& buffer : buffers) {
    if (!buffer.pointer) continue;
    const cuda::PointerInfo info = runtime->describe(buffer.pointer);
    if (info.kind == cuda::PointerKind::device && info.device == device) continue;
    const std::string is =
        info.kind == cuda::PointerKind::device    ? cat("memory of cuda:", info.device)
        : info.kind == cuda::PointerKind::managed ? cat("CUDA managed (unified) memory of cuda:", info.device,
                                                        ", which chorus does not move")
                                                  : std::string("host memory");
    throw InvalidArgument(cat("rank ", rank, ": ", call, " on cuda:", device, ": its ", buffer.name, " is ", is,
                                " (the options' memory must say where every buffer lives)"));
  }
  return runtime->order_on_stream(options.cuda_stream, device, async);
}

}  // namespace detail
}  // namespace chorus
