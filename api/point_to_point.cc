// send/recv between two ranks, posted straight on the Pair to the peer, with
// the tags of api/message_tag.h.
#include "chorus/point_to_point.h"

#include <memory>
#include <mutex>
#include <string>

#include "algorithms/model/call.h"
#include "api/collective_checks.h"
#include "api/context_state.h"
#include "api/device_memory.h"
#include "api/message_tag.h"
#include "api/work_queue.h"
#include "base/error.h"
#include "base/log.h"
#include "base/trace.h"
#include "transport/transport.h"

namespace chorus {
namespace {

enum class Direction { send, recv };

struct Message {
  Direction direction;
  const void* data;
  size_t count;
  DataType type;
  int peer;
  uint32_t user_tag;
  Memory memory;

  const char* name() const { return direction == Direction::send ? "send" : "recv"; }
  size_t bytes() const { return count * element_size(type); }
  transport::Tag tag(uint64_t group) const {
    return detail::point_to_point_tag(count, type, memory, user_tag, group, direction == Direction::send);
  }
  std::string describe(int rank) const {
    return cat("rank ", rank, ": ", name(), " of ", count, " ", to_string(type),
               direction == Direction::send ? " to" : " from", " rank ", peer, " with tag ", user_tag);
  }
};

void check(Context& context, const Message& message) {
  detail::check_type(context, message.name(), message.type);
  detail::check_bytes(context, message.name(), message.count, message.type);
  detail::check_not_null(context, message.name(), "data", message.data, message.count);
  if (message.peer == context.rank())
    throw InvalidArgument(cat("rank ", context.rank(), ": ", message.name(), " to itself (peer ", message.peer,
                              "); a message needs another rank of the context"));
  if (message.peer < 0 || message.peer >= context.size())
    throw InvalidArgument(cat("rank ", context.rank(), ": ", message.name(), " peer ", message.peer,
                              " is out of range for a context of size ", context.size(), " (expected 0..",
                              context.size() - 1, ")"));
}

// On demand (transport/mesh.h), the first message between two ranks
// connects them here, on the calling thread: a higher rank dials at once; a
// lower one waits (until `deadline`) for the higher one to post something to
// it or to reach a collective that needs the pair (docs/connections.md).
void post(Context& context, const Message& message, transport::Request& request, Deadline deadline) {
  CHORUS_LOG(debug, context.rank(), message.describe(context.rank()));
  const algorithms::Communicator& communicator = detail::communicator_of(context);
  communicator.mesh().connect(communicator.mesh_rank(message.peer), deadline);
  if (!communicator.mesh().device_of(communicator.mesh_rank(message.peer)).accepts(message.memory))
    throw InvalidArgument(cat(message.describe(context.rank()), ": the ",
                              communicator.mesh().transport_of(communicator.mesh_rank(message.peer)),
                              " transport to that rank cannot move ", to_string(message.memory), " memory"));
  transport::Pair& pair = communicator.pair(message.peer);
  const transport::Tag tag = message.tag(communicator.group());
  if (message.direction == Direction::send)
    pair.post_send(request, tag,
                   std::span<const std::byte>(static_cast<const std::byte*>(message.data), message.bytes()),
                   message.memory);
  else
    pair.post_recv(request, tag,
                   std::span<std::byte>(static_cast<std::byte*>(const_cast<void*>(message.data)), message.bytes()),
                   message.memory);
}

// The Context's counters and trace for one message, once it is settled.
void record(Context& context, const Message& message, double started_us, std::chrono::nanoseconds took,
            const std::exception_ptr& error) {
  algorithms::Telemetry& telemetry = detail::communicator_of(context).telemetry();
  if (!error) telemetry.count_message(message.direction == Direction::send, message.bytes());
  if (!telemetry.tracing()) return;
  TraceArgs args;
  args.add("peer", message.peer).add("tag", static_cast<uint64_t>(message.user_tag));
  args.add("count", static_cast<uint64_t>(message.count)).add("dtype", to_string(message.type));
  args.add("bytes", static_cast<uint64_t>(message.bytes()));
  args.add("transport", detail::communicator_of(context).mesh().transport_of(
                            detail::communicator_of(context).mesh_rank(message.peer)));
  args.add_error(error);
  telemetry.trace().span(telemetry.track(), message.name(), "message", started_us,
                         std::chrono::duration<double, std::micro>(took).count(), args);
}

// Waits for the request; on any failure (its own error or the deadline) the
// device is aborted first, so the transport never touches the buffer again.
void wait_for(Context& context, const Message& message, transport::Request& request, Deadline deadline,
              std::chrono::milliseconds timeout) {
  try {
    transport::WaitingScope waiting(detail::communicator_of(context).mesh());
    request.wait(deadline, cat(message.describe(context.rank()), ": timed out after ", timeout.count(),
                               " ms waiting for the peer"));
  } catch (...) {
    const std::exception_ptr error =
        detail::communicator_of(context).mesh().explain_loss(std::current_exception());
    detail::abort_for(context, error);
    std::rethrow_exception(error);
  }
}

// An async message: owns its request, and finishes its Work from whichever
// thread calls Work::wait/test.
struct PendingMessage : detail::WorkState {
  PendingMessage(Context& owner, const Message& posted, std::chrono::milliseconds limit)
      : context(owner), message(posted), timeout(limit), deadline(Deadline::after(limit)) {
    request.attach(&signal);
    drive = [this](bool blocking) { progress(blocking); };
    telemetry = detail::communicator_of(owner).shared_telemetry();
    if (telemetry->tracing()) started_us = trace_clock_us();
  }
  // Dropping an unfinished Work must not free a request the transport still
  // holds: finish it (or abort the device at the deadline) first.
  ~PendingMessage() {
    if (request.state() != transport::Request::State::idle) progress(true);
  }

  void progress(bool blocking) {
    std::lock_guard<std::mutex> lock(progress_mutex);
    if (settled) return;
    // Work::test() moves the bytes itself, as a polling collective does:
    // transports need not run their own thread for a caller that polls.
    if (!blocking && !request.finished()) detail::communicator_of(context).mesh().progress();
    if (!blocking && !request.finished()) return;
    std::exception_ptr outcome;
    try {
      wait_for(context, message, request, deadline, timeout);
    } catch (...) {
      outcome = std::current_exception();
    }
    settled = true;
    record(context, message, started_us, std::chrono::steady_clock::now() - started, outcome);
    finish(outcome);
  }

  Context& context;
  Message message;
  std::chrono::milliseconds timeout;
  Deadline deadline;
  std::mutex progress_mutex;
  bool settled = false;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  double started_us = 0;
  // The signal outlives the request attached to it.
  transport::CompletionSignal signal;
  transport::Request request;
};

Work transfer(Context& context, Message message, const CollectiveOptions& options, bool async) {
  message.memory = options.memory;
  return detail::aborting_on_invalid_argument(context, [&]() -> Work {
    check(context, message);
    context.throw_if_failed();
    // Device memory: the buffer checked, and the message ordered after the
    // work already queued on the caller's stream. The stream is not held
    // for an async message (nothing would release it before the caller's
    // Work::wait); a blocking one returns with the bytes in place.
    const auto timeout = detail::operation_timeout(context, options);
    if (std::unique_ptr<StreamOrder> order =
            detail::prepare_device_call(context, message.name(), options, {{"data", message.data}}, false))
      detail::wait_for_inputs(*order, Deadline::after(timeout), context.rank(), message.name());
    if (async) {
      auto pending = std::make_shared<PendingMessage>(context, message, timeout);
      post(context, message, pending->request, pending->deadline);
      return Work(std::move(pending));
    }
    transport::CompletionSignal signal;
    transport::Request request;
    request.attach(&signal);
    const Deadline deadline = Deadline::after(timeout);
    algorithms::Telemetry& telemetry = detail::communicator_of(context).telemetry();
    const auto started = std::chrono::steady_clock::now();
    const double started_us = telemetry.tracing() ? trace_clock_us() : 0;
    std::exception_ptr error;
    try {
      post(context, message, request, deadline);
      wait_for(context, message, request, deadline, timeout);
    } catch (...) {
      error = std::current_exception();
    }
    const auto took = std::chrono::steady_clock::now() - started;
    telemetry.count_waiting(took);
    record(context, message, started_us, took, error);
    if (error) std::rethrow_exception(error);
    return Work();
  });
}

}  // namespace

void send(Context& context, const void* data, size_t count, DataType type, int peer, uint32_t tag,
          const CollectiveOptions& options) {
  transfer(context, {Direction::send, data, count, type, peer, tag, Memory::host()}, options, false);
}

Work send_async(Context& context, const void* data, size_t count, DataType type, int peer, uint32_t tag,
                const CollectiveOptions& options) {
  return transfer(context, {Direction::send, data, count, type, peer, tag, Memory::host()}, options, true);
}

void recv(Context& context, void* data, size_t count, DataType type, int peer, uint32_t tag,
          const CollectiveOptions& options) {
  transfer(context, {Direction::recv, data, count, type, peer, tag, Memory::host()}, options, false);
}

Work recv_async(Context& context, void* data, size_t count, DataType type, int peer, uint32_t tag,
                const CollectiveOptions& options) {
  return transfer(context, {Direction::recv, data, count, type, peer, tag, Memory::host()}, options, true);
}

}  // namespace chorus
