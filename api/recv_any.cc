// recv_any / recv_any_async: a receive from whichever rank's message with
// the tag has arrived first (chorus/point_to_point.h).
//
// How: no receive is posted to every peer (a posted receive is bound to
// its pair, and withdrawing the others once one matched would race with
// their arrivals). Instead the receive *claims* a message that has already
// arrived: Pair::post_recv_if_arrived checks a pair's buffered messages and
// posts the receive onto the first one with the tag under the pair's own
// lock, so a specific recv on another thread cannot take that message in
// between, and two receives from any peer can never claim the same one.
// Nothing needs serializing: each claim is atomic per pair, and a claim that
// finds nothing leaves no trace. Between looks the receive sleeps on the
// Mesh's arrival signal (Mesh::arrivals), which every transport bumps when it
// buffers a message nobody received and the Mesh bumps when it fails. The
// count is read before each look, so an arrival during the look is not
// slept through.
//
// Connections on demand: a peer whose pair is not up cannot have sent. The
// receive dials every lower rank itself (a lower rank waits for the higher
// one to dial before it can send) and takes the dials of higher ranks as
// they come (Mesh::connect_if_ready). A dial is seen by the device's
// listener, which tells nobody, so while some pair is still down the
// receive also looks every kSlice: the one poll here, and only on demand.
// Meanwhile it knocks on the listeners of the peers it waits for, as
// Mesh::connect does, so a peer that died or aborted before connecting fails
// the receive as it would over the full mesh instead of leaving it to time out.
#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "api/collective_checks.h"
#include "api/context_state.h"
#include "api/message_tag.h"
#include "api/work_queue.h"
#include "base/error.h"
#include "base/log.h"
#include "base/trace.h"
#include "chorus/point_to_point.h"
#include "transport/mesh.h"
#include "transport/transport.h"

namespace chorus {
namespace {

// How often a receive looks for dials of peers not connected yet (on demand).
constexpr std::chrono::milliseconds kSlice{20};
// When it first knocks on peers that have not dialed yet, and how often after.
constexpr std::chrono::milliseconds kFirstKnock{200};
constexpr std::chrono::milliseconds kKnockEvery{500};

struct AnySourceReceive {
  AnySourceReceive(Context& owner, void* buffer, size_t elements, DataType element_type, uint32_t user_tag,
                   std::chrono::milliseconds limit)
      : context(owner), data(buffer), count(elements), type(element_type), tag(user_tag), timeout(limit),
        deadline(Deadline::after(limit)) {
    request.attach(&signal);
  }

  const algorithms::Communicator& communicator() const { return detail::communicator_of(context); }
  transport::Mesh& mesh() const { return communicator().mesh(); }
  size_t bytes() const { return count * element_size(type); }
  std::string describe() const {
    return cat("rank ", context.rank(), ": recv_any of ", count, " ", to_string(type), " from any peer with tag ", tag);
  }

  // One look over every other member, starting after the last one taken
  // from; true once a message is claimed (or the claim failed at once: the
  // request says). Throws the Mesh's failure.
  bool look() {
    if (mesh().failed()) std::rethrow_exception(mesh().failure());
    const transport::Tag wire_tag =
        detail::point_to_point_tag(count, type, Memory::host(), tag, communicator().group(), false);
    const std::span<std::byte> buffer(static_cast<std::byte*>(data), bytes());
    const int size = context.size();
    std::atomic<int>& next = detail::state_of(context).next_any_source;
    const int first = next.load(std::memory_order_relaxed) % size;
    waiting_for_dials = false;
    const bool knock = !mesh().fully_connected() && Clock::now() >= next_knock;
    if (knock) next_knock = Clock::now() + kKnockEvery;
    for (int step = 0; step < size; ++step) {
      const int member = (first + step) % size;
      if (member == context.rank()) continue;
      if (!mesh().connect_if_ready(communicator().mesh_rank(member), deadline, knock)) {
        waiting_for_dials = true;
        continue;
      }
      if (communicator().pair(member).post_recv_if_arrived(request, wire_tag, buffer, Memory::host())) {
        source = member;
        next.store((member + 1) % size, std::memory_order_relaxed);
        return true;
      }
    }
    return false;
  }

  // Looks and sleeps until a message is claimed; then waits for it to land.
  // Any failure (the deadline too) aborts the Context first, as recv does,
  // so the transport never touches the buffer again.
  void run() {
    try {
      // shm moves bytes on its own thread only while someone waits.
      transport::WaitingScope waiting(mesh());
      while (source < 0) {
        const uint64_t seen = mesh().arrivals().count();
        if (look()) break;
        if (deadline.expired()) throw timed_out();
        const Deadline until = waiting_for_dials ? Deadline(std::min(deadline.at(), Clock::now() + kSlice)) : deadline;
        mesh().arrivals().wait_change(seen, until);
      }
      request.wait(deadline, cat(describe(), ": timed out after ", timeout.count(), " ms waiting for the rest of ",
                                 "the message from rank ", source));
    } catch (...) {
      fail(std::current_exception());
    }
  }

  TimeoutError timed_out() const {
    return TimeoutError(cat(describe(), ": timed out after ", timeout.count(), " ms waiting for a message from any ",
                            "peer, tag ", tag));
  }

  // One look without sleeping (Work::test); true once settled either way.
  bool poll() {
    try {
      if (source < 0 && !look()) {
        if (!deadline.expired()) return false;
        throw timed_out();
      }
      if (!request.finished()) mesh().progress();
      if (!request.finished()) return false;
      if (request.state() == transport::Request::State::failed) std::rethrow_exception(request.error());
    } catch (...) {
      fail(std::current_exception());
    }
    return true;
  }

  [[noreturn]] void fail(std::exception_ptr error) {
    error = mesh().explain_loss(error);
    detail::abort_for(context, error);
    std::rethrow_exception(error);
  }

  void record(double started_us, std::chrono::nanoseconds took, const std::exception_ptr& error) const {
    algorithms::Telemetry& telemetry = communicator().telemetry();
    if (!error) telemetry.count_message(false, bytes());
    if (!telemetry.tracing()) return;
    TraceArgs args;
    args.add("source", source).add("tag", static_cast<uint64_t>(tag));
    args.add("count", static_cast<uint64_t>(count)).add("dtype", to_string(type));
    args.add("bytes", static_cast<uint64_t>(bytes()));
    args.add_error(error);
    telemetry.trace().span(telemetry.track(), "recv_any", "message", started_us,
                           std::chrono::duration<double, std::micro>(took).count(), args);
  }

  Context& context;
  void* data;
  size_t count;
  DataType type;
  uint32_t tag;
  std::chrono::milliseconds timeout;
  Deadline deadline;
  int source = -1;  // the member claimed from
  bool waiting_for_dials = false;
  Clock::time_point next_knock = Clock::now() + kFirstKnock;
  // The signal outlives the request attached to it.
  transport::CompletionSignal signal;
  transport::Request request;
};

void check(Context& context, const void* data, size_t count, DataType type, const CollectiveOptions& options) {
  detail::check_type(context, "recv_any", type);
  detail::check_bytes(context, "recv_any", count, type);
  detail::check_not_null(context, "recv_any", "data", data, count);
  if (!options.memory.on_host())
    throw InvalidArgument(cat("rank ", context.rank(), ": recv_any receives into host memory only, not ",
                              to_string(options.memory)));
  if (context.size() < 2)
    throw InvalidArgument(cat("rank ", context.rank(), ": recv_any on a context of one rank: no peer can send"));
}

// An async receive from any peer: settled by whichever thread calls
// Work::wait/test, as an async recv is.
struct PendingAnySource : detail::WorkState {
  PendingAnySource(Context& owner, void* data, size_t count, DataType type, uint32_t tag,
                   std::chrono::milliseconds limit)
      : receive(owner, data, count, type, tag, limit) {
    drive = [this](bool blocking) { progress(blocking); };
    telemetry = detail::communicator_of(owner).shared_telemetry();
    if (telemetry->tracing()) started_us = trace_clock_us();
  }
  // Nothing to wait for while nothing is claimed (no transport holds the
  // buffer); a claimed message must land (or the device abort) first.
  ~PendingAnySource() {
    if (receive.source >= 0) progress(true);
  }

  void progress(bool blocking) {
    std::lock_guard<std::mutex> lock(progress_mutex);
    if (settled) return;
    std::exception_ptr outcome;
    try {
      if (blocking) receive.run();
      else if (!receive.poll()) return;
    } catch (...) {
      outcome = std::current_exception();
    }
    settled = true;
    receive.record(started_us, std::chrono::steady_clock::now() - started, outcome);
    {
      std::lock_guard<std::mutex> state_lock(mutex);
      source_rank = receive.source;
    }
    finish(outcome);
  }

  AnySourceReceive receive;
  std::mutex progress_mutex;
  bool settled = false;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  double started_us = 0;
};

}  // namespace

int recv_any(Context& context, void* data, size_t count, DataType type, uint32_t tag,
             const CollectiveOptions& options) {
  int source = -1;
  detail::aborting_on_invalid_argument(context, [&]() -> Work {
    check(context, data, count, type, options);
    context.throw_if_failed();
    CHORUS_LOG(debug, context.rank(), "recv_any of ", count, " ", to_string(type), " with tag ", tag);
    AnySourceReceive receive(context, data, count, type, tag, detail::operation_timeout(context, options));
    algorithms::Telemetry& telemetry = detail::communicator_of(context).telemetry();
    const auto started = std::chrono::steady_clock::now();
    const double started_us = telemetry.tracing() ? trace_clock_us() : 0;
    std::exception_ptr error;
    try {
      receive.run();
    } catch (...) {
      error = std::current_exception();
    }
    const auto took = std::chrono::steady_clock::now() - started;
    telemetry.count_waiting(took);
    receive.record(started_us, took, error);
    if (error) std::rethrow_exception(error);
    source = receive.source;
    return Work();
  });
  return source;
}

Work recv_any_async(Context& context, void* data, size_t count, DataType type, uint32_t tag,
                    const CollectiveOptions& options) {
  return detail::aborting_on_invalid_argument(context, [&]() -> Work {
    check(context, data, count, type, options);
    context.throw_if_failed();
    CHORUS_LOG(debug, context.rank(), "recv_any_async of ", count, " ", to_string(type), " with tag ", tag);
    auto pending = std::make_shared<PendingAnySource>(context, data, count, type, tag,
                                                      detail::operation_timeout(context, options));
    // A first look now: a message already here is taken before any receive
    // the caller posts after this one, as a posted receive would take it.
    pending->progress(false);
    return Work(std::move(pending));
  });
}

}  // namespace chorus
