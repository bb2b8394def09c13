// Checks and stream ordering of calls on device memory.
#include "api/device_memory.h"

#include "base/error.h"
#include "base/log.h"
#include "memory/registry.h"

namespace chorus {

namespace {

// "memory of cuda:1", "CUDA managed (unified) memory of cuda:0, which chorus does not move"
std::string describe(MemoryKind kind, const MemoryKindSupport& support, const PointerInfo& info) {
  const Memory memory{kind, info.device};
  switch (info.kind) {
    case PointerKind::device: return cat("memory of ", to_string(memory));
    case PointerKind::managed:
      return cat(support.display_name(), " managed (unified) memory of ", to_string(memory),
                 ", which chorus does not move");
    case PointerKind::host: break;
  }
  return "host memory";
}

}  // namespace

Memory memory_of(const void* pointer) {
  if (!pointer) return Memory::host();
  for (MemoryKind kind : built_device_kinds()) {
    MemoryKindSupport* support = nullptr;
    try {
      support = &memory_kind_support(kind);
    } catch (const InvalidArgument&) {
      continue;  // the kind's support cannot load in this process: none of its memory is here
    }
    const PointerInfo info = support->describe(pointer);
    if (info.kind == PointerKind::device) return Memory{kind, info.device};
    if (info.kind == PointerKind::managed)
      throw InvalidArgument(cat("memory_of: the buffer is ", describe(kind, *support, info),
                                "; use device memory or host memory"));
  }
  return Memory::host();
}

namespace detail {

namespace {

// The kind's support, once the process is known to have the options' device.
MemoryKindSupport& checked_buffers(Context& context, std::string_view call, const CollectiveOptions& options,
                                   std::span<const NamedBuffer> buffers) {
  const int rank = context.rank();
  const Memory& memory = options.memory;
  MemoryKindSupport* support = nullptr;
  try {
    support = &memory_kind_support(memory.kind);
    support->backend(memory.device);  // checks the device exists
  } catch (const InvalidArgument& error) {
    throw InvalidArgument(cat("rank ", rank, ": ", call, " on ", to_string(memory), ": ", error.what()));
  }
  for (const NamedBuffer& buffer : buffers) {
    if (!buffer.pointer) continue;
    const PointerInfo info = support->describe(buffer.pointer);
    if (info.kind == PointerKind::device && info.device == memory.device) continue;
    throw InvalidArgument(cat("rank ", rank, ": ", call, " on ", to_string(memory), ": its ", buffer.name, " is ",
                              describe(memory.kind, *support, info),
                              " (the options' memory must say where every buffer lives)"));
  }
  return *support;
}

}  // namespace

std::unique_ptr<StreamOrder> prepare_device_call(Context& context, std::string_view call,
                                                 const CollectiveOptions& options,
                                                 std::initializer_list<NamedBuffer> buffers, bool async) {
  if (options.memory.on_host()) return nullptr;
  MemoryKindSupport& support = checked_buffers(context, call, options, std::span(buffers.begin(), buffers.size()));
  return support.order_on_stream(options.cuda_stream, options.memory.device, async);
}

void wait_for_inputs(StreamOrder& order, const Deadline& deadline, int rank, std::string_view call) {
  try {
    order.inputs_ready(deadline);
  } catch (const TimeoutError& error) {
    throw TimeoutError(cat("rank ", rank, ": ", call, ": ", error.what()));
  }
}

void check_device_buffers(Context& context, std::string_view call, const CollectiveOptions& options,
                          std::span<const NamedBuffer> buffers) {
  if (!options.memory.on_host()) checked_buffers(context, call, options, buffers);
}

}  // namespace detail
}  // namespace chorus
