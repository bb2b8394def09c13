// The shared checks and the issuing of public collectives.
#include "chorus/collective_checks.h"
#include "chorus/device_memory.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include "algorithms/registry.h"
#include "algorithms/run.h"
#include "base/log.h"
#include "chorus/context_state.h"
#include "chorus/work_queue.h"

namespace chorus::detail {

using algorithms::Call;
using algorithms::Collective;

Call make_call(Context& context, Collective collective, size_t count, DataType type, ReduceOp op, int root,
               bool in_place) {
  return algorithms::make_call(collective, context.rank(), context.size(), count, type, op, root, in_place);
}

void abort_for(Context& context, std::exception_ptr reason) {
  communicator_of(context).mesh().abort(std::move(reason));
}

void check_type(Context& context, const char* collective, DataType type) {
  if (static_cast<unsigned>(type) > static_cast<unsigned>(DataType::float64))
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " got an unknown data type (",
                              static_cast<unsigned>(type), ")"));
}

void check_reduction(Context& context, const char* collective, DataType type, ReduceOp op) {
  check_type(context, collective, type);
  if (static_cast<unsigned>(op) > static_cast<unsigned>(ReduceOp::bxor))
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " got an unknown reduce op (",
                              static_cast<unsigned>(op), ")"));
  try {
    validate_reduction(type, op);
  } catch (const InvalidArgument& error) {
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, ": ", error.what()));
  }
}

void check_bytes(Context& context, const char* collective, size_t count, DataType type) {
  if (count > SIZE_MAX / element_size(type))
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " count ", count, " of ", to_string(type),
                              " overflows size_t bytes"));
}

void check_buffer(Context& context, const char* collective, const char* name, const void* buffer, size_t count) {
  if (count > 0 && buffer == nullptr)
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " got a null ", name, " buffer for ", count,
                              " elements"));
}

void check_root(Context& context, const char* collective, int root) {
  if (root < 0 || root >= context.size())
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " root ", root,
                              " is out of range for a context of size ", context.size(), " (expected 0..",
                              context.size() - 1, ")"));
}

void check_overlap(Context& context, const char* collective, const void* input, size_t input_bytes,
                   const void* output, size_t output_bytes) {
  if (input_bytes == 0 || output_bytes == 0 || input == nullptr || output == nullptr) return;
  auto in = reinterpret_cast<uintptr_t>(input);
  auto out = reinterpret_cast<uintptr_t>(output);
  if (in < out + output_bytes && out < in + input_bytes)
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective,
                              " input and output buffers overlap but are not the in-place layout (see the "
                              "collective's documentation)"));
}

bool block_in_place(Context& context, const char* collective, const Call& call, const void* whole,
                    const void* block) {
  const size_t element = element_size(call.type);
  const std::byte* own_block = static_cast<const std::byte*>(whole) + call.block_offset(context.rank()) * element;
  if (block == own_block) return true;
  check_overlap(context, collective, whole, call.total_count() * element, block,
                call.block_count(context.rank()) * element);
  return false;
}

size_t checked_product(Context& context, const char* collective, size_t count, size_t blocks, DataType type) {
  if (blocks != 0 && count > SIZE_MAX / blocks)
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " count ", count, " times ", blocks,
                              " blocks overflows size_t"));
  check_bytes(context, collective, count * blocks, type);
  return count * blocks;
}

size_t check_counts(Context& context, const char* collective, const char* name, std::span<const size_t> counts,
                    DataType type) {
  if (counts.size() != static_cast<size_t>(context.size()))
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " ", name, " has ", counts.size(),
                              " entries but the context has ", context.size(), " ranks (expected one per rank)"));
  size_t total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > SIZE_MAX - total)
      throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " ", name, " sum overflows size_t at entry ",
                                i));
    total += counts[i];
  }
  check_bytes(context, collective, total, type);
  return total;
}

namespace {
Deadline deadline_for(const Context& context, const CollectiveOptions& options) {
  return Deadline::after(options.timeout.value_or(context.timeout()));
}
}  // namespace

// Runs inline after every earlier async collective, or queues behind them.
// The sequence number is taken here, at issue time, so the order of issue is
// the order on the wire whichever thread ends up running the call.
Work issue(Context& context, const Call& described, const void* input, void* output,
           const CollectiveOptions& options, bool async) {
  context.throw_if_failed();
  ContextState& state = state_of(context);
  Call call = described;
  call.memory = options.memory;
  call.cuda_stream = options.cuda_stream;
  uint32_t sequence = state.next_sequence();
  CHORUS_LOG(trace, context.rank(), "issued ", algorithms::to_string(call.collective), " #", sequence, ": ",
             call.variable() ? cat("variable counts, ", call.total_count()) : cat(call.count), " ",
             to_string(call.type), async ? " (async)" : "");
  std::string algorithm = options.algorithm;
  const algorithms::Communicator& communicator = state.communicator;
  // A backend (NCCL) queues on the caller's stream itself and returns with
  // the result in place (algorithms/registry.h): it runs now, async or not,
  // after the calls queued before it, and orders itself against the stream.
  const bool backend = algorithms::find_backend(call.collective, algorithm) != nullptr;
  // CUDA memory: buffers checked, and the call ordered after the caller's
  // stream (now, at issue) and the stream after the call.
  std::shared_ptr<cuda::StreamOrder> stream_order =
      prepare_device_call(context, algorithms::to_string(call.collective), options,
                          {{"input", input}, {"output", output}}, async && !backend);
  if (backend) stream_order.reset();
  if (!async || backend) {
    // The caller waits for the whole call: the queue of earlier async calls
    // (timed only when there is one) and the run (timed by the run itself).
    if (!state.work_queue().idle()) {
      const auto drain_started = std::chrono::steady_clock::now();
      state.work_queue().drain();
      communicator.telemetry().count_waiting(std::chrono::steady_clock::now() - drain_started);
    }
    if (stream_order) stream_order->inputs_ready();
    algorithms::run_collective(communicator, call, input, output, algorithm, sequence, deadline_for(context, options),
                               /*caller_waits=*/true);
    return Work();
  }
  // The deadline starts when the collective starts running, not when queued.
  auto timeout = options.timeout.value_or(context.timeout());
  auto work = state.work_queue().submit([&communicator, call, input, output, algorithm, sequence, timeout,
                                         stream_order] {
    // The caller's stream goes on when the call ends, failed or not (the
    // error is Work::wait's to report).
    struct ReleaseStream {
      cuda::StreamOrder* order;
      ~ReleaseStream() {
        if (order) order->finished();
      }
    } release{stream_order.get()};
    if (stream_order) stream_order->inputs_ready();
    algorithms::run_collective(communicator, call, input, output, algorithm, sequence, Deadline::after(timeout));
  });
  // Read by the caller's Work::wait only, never by the worker.
  work->telemetry = communicator.shared_telemetry();
  return Work(std::move(work));
}

}  // namespace chorus::detail
