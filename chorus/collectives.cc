// The public collectives: check arguments locally (so a bad call fails on the
// rank that made it, before any byte moves), number the call, and hand it to
// the algorithm layer, inline or on the Context's work queue.
#include "chorus/collectives.h"

#include <cstdint>

#include "algorithms/run.h"
#include "chorus/error.h"
#include "chorus/log.h"
#include "chorus/work_queue.h"
#include "transport/transport.h"

namespace chorus {
namespace {

using algorithms::Call;
using algorithms::Collective;

Call make_call(Context& context, Collective collective, size_t count, DataType type, ReduceOp op, int root,
               bool in_place) {
  Call call;
  call.collective = collective;
  call.rank = context.rank();
  call.size = context.size();
  call.count = count;
  call.type = type;
  call.op = op;
  call.root = root;
  call.in_place = in_place;
  return call;
}

void check_type(Context& context, const char* collective, DataType type) {
  if (static_cast<unsigned>(type) > static_cast<unsigned>(DataType::float64))
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " got an unknown data type (",
                              static_cast<unsigned>(type), ")"));
}

void check_buffer(Context& context, const char* collective, const char* name, const void* buffer, size_t count) {
  if (count > 0 && buffer == nullptr)
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " got a null ", name, " buffer for ", count,
                              " elements"));
}

void check_bytes(Context& context, const char* collective, size_t count, DataType type) {
  if (count > SIZE_MAX / element_size(type))
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " count ", count, " of ", to_string(type),
                              " overflows size_t bytes"));
}

// Buffers that overlap without being identical would be read after being
// overwritten; in place means input == output exactly.
void check_overlap(Context& context, const char* collective, const void* input, const void* output, size_t bytes) {
  if (input == output || bytes == 0) return;
  auto in = reinterpret_cast<uintptr_t>(input);
  auto out = reinterpret_cast<uintptr_t>(output);
  if (in < out + bytes && out < in + bytes)
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective,
                              " input and output buffers partially overlap; pass the same pointer for in place"));
}

Deadline deadline_for(Context& context, const CollectiveOptions& options) {
  return Deadline::after(options.timeout.value_or(context.timeout()));
}

// Runs inline after every earlier async collective, or queues behind them.
// The sequence number is taken here, at issue time, so the order of issue is
// the order on the wire whichever thread ends up running the call.
Work issue(Context& context, const Call& call, const void* input, void* output, const CollectiveOptions& options,
           bool async) {
  context.throw_if_failed();
  uint32_t sequence = context.next_sequence();
  CHORUS_LOG(debug, context.rank(), algorithms::to_string(call.collective), " #", sequence, ": ", call.count, " ",
             to_string(call.type), async ? " (async)" : "");
  std::string algorithm = options.algorithm;
  if (!async) {
    context.work_queue().drain();
    algorithms::run_collective(context, call, input, output, algorithm, sequence, deadline_for(context, options));
    return Work();
  }
  // The deadline starts when the collective starts running, not when queued.
  auto timeout = options.timeout.value_or(context.timeout());
  auto state = context.work_queue().submit([&context, call, input, output, algorithm, sequence, timeout] {
    algorithms::run_collective(context, call, input, output, algorithm, sequence, Deadline::after(timeout));
  });
  return Work(std::move(state));
}

Work allreduce_impl(Context& context, const void* input, void* output, size_t count, DataType type, ReduceOp op,
                    const CollectiveOptions& options, bool async) {
  check_type(context, "allreduce", type);
  validate_reduction(type, op);
  check_bytes(context, "allreduce", count, type);
  check_buffer(context, "allreduce", "input", input, count);
  check_buffer(context, "allreduce", "output", output, count);
  check_overlap(context, "allreduce", input, output, count * element_size(type));
  Call call = make_call(context, Collective::allreduce, count, type, op, 0, input == output);
  return issue(context, call, input, output, options, async);
}

Work broadcast_impl(Context& context, void* data, size_t count, DataType type, int root,
                    const CollectiveOptions& options, bool async) {
  check_type(context, "broadcast", type);
  check_bytes(context, "broadcast", count, type);
  check_buffer(context, "broadcast", "data", data, count);
  if (root < 0 || root >= context.size())
    throw InvalidArgument(cat("rank ", context.rank(), ": broadcast root ", root,
                              " is out of range for a context of size ", context.size()));
  Call call = make_call(context, Collective::broadcast, count, type, ReduceOp::sum, root, true);
  return issue(context, call, data, data, options, async);
}

Work barrier_impl(Context& context, const CollectiveOptions& options, bool async) {
  Call call = make_call(context, Collective::barrier, 0, DataType::uint8, ReduceOp::sum, 0, true);
  return issue(context, call, nullptr, nullptr, options, async);
}

// A call this rank rejects would leave the other ranks waiting inside the
// same collective until their timeout. Aborting the Context tells them at
// once, and why ("peer rank 2 aborted: rank 2: broadcast root 7 is out of
// range ..."); the Context is unusable afterwards either way.
template <class Body>
Work rejecting_bad_arguments(Context& context, Body&& body) {
  try {
    return body();
  } catch (const InvalidArgument&) {
    context.device().abort(std::current_exception());
    throw;
  }
}

}  // namespace

void allreduce(Context& context, const void* input, void* output, size_t count, DataType type, ReduceOp op,
               const CollectiveOptions& options) {
  rejecting_bad_arguments(context, [&] { return allreduce_impl(context, input, output, count, type, op, options, false); });
}

Work allreduce_async(Context& context, const void* input, void* output, size_t count, DataType type, ReduceOp op,
                     const CollectiveOptions& options) {
  return rejecting_bad_arguments(context,
                                 [&] { return allreduce_impl(context, input, output, count, type, op, options, true); });
}

void broadcast(Context& context, void* data, size_t count, DataType type, int root, const CollectiveOptions& options) {
  rejecting_bad_arguments(context, [&] { return broadcast_impl(context, data, count, type, root, options, false); });
}

Work broadcast_async(Context& context, void* data, size_t count, DataType type, int root,
                     const CollectiveOptions& options) {
  return rejecting_bad_arguments(context, [&] { return broadcast_impl(context, data, count, type, root, options, true); });
}

void barrier(Context& context, const CollectiveOptions& options) { barrier_impl(context, options, false); }

Work barrier_async(Context& context, const CollectiveOptions& options) { return barrier_impl(context, options, true); }

void throw_size_mismatch(Context& context, const char* collective, size_t input_count, size_t output_count) {
  rejecting_bad_arguments(context, [&]() -> Work {
    throw InvalidArgument(cat("rank ", context.rank(), ": ", collective, " input has ", input_count,
                              " elements but output has ", output_count));
  });
  __builtin_unreachable();
}

}  // namespace chorus
