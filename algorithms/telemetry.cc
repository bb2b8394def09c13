// Counters and trace track of one Communicator.
#include "algorithms/telemetry.h"

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

void Telemetry::count_collective(bool succeeded, uint64_t bytes_sent, uint64_t bytes_received,
                                 std::chrono::nanoseconds running) {
  collectives_.fetch_add(1, std::memory_order_relaxed);
  if (!succeeded) failed_collectives_.fetch_add(1, std::memory_order_relaxed);
  bytes_sent_.fetch_add(bytes_sent, std::memory_order_relaxed);
  bytes_received_.fetch_add(bytes_received, std::memory_order_relaxed);
  running_ns_.fetch_add(running.count(), std::memory_order_relaxed);
}

void Telemetry::count_message(bool sent, uint64_t bytes) {
  (sent ? messages_sent_ : messages_received_).fetch_add(1, std::memory_order_relaxed);
  (sent ? bytes_sent_ : bytes_received_).fetch_add(bytes, std::memory_order_relaxed);
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
  now.bytes_sent = bytes_sent_.load(std::memory_order_relaxed);
  now.bytes_received = bytes_received_.load(std::memory_order_relaxed);
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
