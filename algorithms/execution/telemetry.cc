// Counters and trace track of one Communicator.
#include "algorithms/execution/telemetry.h"

namespace chorus::algorithms {

Telemetry::Telemetry(std::shared_ptr<TraceFile> trace, bool trace_steps, const std::string& track_name)
    : trace_(std::move(trace)), trace_steps_(trace_steps) {
  if (trace_) track_ = trace_->add_track(track_name);
}

// A Context that closes puts its events on disk: a program that reads its
// trace after closing the Context finds them all.
Telemetry::~Telemetry() {
  if (trace_) trace_->flush();
}

namespace {

// One writer: a load and a store, which cost no more than plain arithmetic
// (an atomic read-modify-write is a locked instruction per counter per call).
template <class T>
void add_single_writer(std::atomic<T>& counter, T value) {
  counter.store(counter.load(std::memory_order_relaxed) + value, std::memory_order_relaxed);
}

}  // namespace

void Telemetry::count_collective(bool succeeded, uint64_t bytes_sent, uint64_t bytes_received,
                                 std::chrono::nanoseconds running) {
  add_single_writer(collectives_, uint64_t{1});
  if (!succeeded) add_single_writer(failed_collectives_, uint64_t{1});
  add_single_writer(bytes_sent_, bytes_sent);
  add_single_writer(bytes_received_, bytes_received);
  add_single_writer(running_ns_, static_cast<int64_t>(running.count()));
}

void Telemetry::count_message(bool sent, uint64_t bytes) {
  (sent ? messages_sent_ : messages_received_).fetch_add(1, std::memory_order_relaxed);
  (sent ? message_bytes_sent_ : message_bytes_received_).fetch_add(bytes, std::memory_order_relaxed);
}

void Telemetry::count_waiting(std::chrono::nanoseconds waited) {
  waiting_ns_.fetch_add(waited.count(), std::memory_order_relaxed);
}

ContextStatistics Telemetry::statistics() const {
  ContextStatistics now;
  now.collectives = collectives_.load(std::memory_order_relaxed);
  now.failed_collectives = failed_collectives_.load(std::memory_order_relaxed);
  now.messages_sent = messages_sent_.load(std::memory_order_relaxed);
  now.messages_received = messages_received_.load(std::memory_order_relaxed);
  now.bytes_sent = bytes_sent_.load(std::memory_order_relaxed) + message_bytes_sent_.load(std::memory_order_relaxed);
  now.bytes_received =
      bytes_received_.load(std::memory_order_relaxed) + message_bytes_received_.load(std::memory_order_relaxed);
  now.time_in_collectives = std::chrono::nanoseconds(running_ns_.load(std::memory_order_relaxed));
  now.time_waiting = std::chrono::nanoseconds(waiting_ns_.load(std::memory_order_relaxed));
  return now;
}

TraceArgs describe_for_trace(const Call& call, uint32_t sequence) {
  TraceArgs args;
  args.add("seq", static_cast<uint64_t>(sequence));
  if (call.collective == Collective::barrier) return args;
  args.add("count", static_cast<uint64_t>(call.variable() ? call.total_count() : call.count));
  args.add("dtype", to_string(call.type));
  switch (call.collective) {
    case Collective::allreduce:
    case Collective::reduce_scatter: args.add("op", to_string(call.op)); break;
    case Collective::reduce: args.add("op", to_string(call.op)).add("root", call.root); break;
    case Collective::broadcast:
    case Collective::gather:
    case Collective::scatter: args.add("root", call.root); break;
    default: break;
  }
  if (call.variable()) args.add("variable", "true");
  return args;
}

}  // namespace chorus::algorithms
