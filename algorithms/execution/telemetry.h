// What one Communicator counts and traces about the calls run on it: the
// counters behind Context::statistics() and, when CHORUS_TRACE is set, its
// track in the process's trace file (base/trace.h): one span per collective
// or message, and, with CHORUS_TRACE_STEPS, one per step of each Plan.
//
// Counting is always on: a few relaxed atomic additions per call, next to a
// collective of at least a few microseconds. Tracing costs a formatted event
// per call and is off unless asked for.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/model/call.h"
#include "base/statistics.h"
#include "base/trace.h"

namespace chorus::algorithms {

// What one run of a Plan step took, for the step-level trace.
struct StepTiming {
  double start_us = 0;
  double end_us = 0;
};

class Telemetry {
 public:
  Telemetry() = default;
  // `trace` may be null (no tracing); `track_name` labels this
  // Communicator's track ("rank 1 of 4, group 0").
  Telemetry(std::shared_ptr<TraceFile> trace, bool trace_steps, const std::string& track_name);
  ~Telemetry();

  // From the thread running the Communicator's collectives, one at a time
  // (a Context runs them in issue order): no atomic read-modify-write.
  void count_collective(bool succeeded, uint64_t bytes_sent, uint64_t bytes_received,
                        std::chrono::nanoseconds running);
  void count_message(bool sent, uint64_t bytes);
  void count_waiting(std::chrono::nanoseconds waited);
  ContextStatistics statistics() const;

  bool tracing() const { return trace_ != nullptr; }
  bool tracing_steps() const { return trace_ != nullptr && trace_steps_; }
  TraceFile& trace() const { return *trace_; }
  int track() const { return track_; }

 private:
  std::atomic<uint64_t> collectives_{0};
  std::atomic<uint64_t> failed_collectives_{0};
  std::atomic<uint64_t> messages_sent_{0};
  std::atomic<uint64_t> messages_received_{0};
  // Collectives' and messages' bytes apart: messages finish on any thread.
  std::atomic<uint64_t> bytes_sent_{0};
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> message_bytes_sent_{0};
  std::atomic<uint64_t> message_bytes_received_{0};
  std::atomic<int64_t> running_ns_{0};
  std::atomic<int64_t> waiting_ns_{0};
  std::shared_ptr<TraceFile> trace_;
  bool trace_steps_ = false;
  int track_ = 0;
};

// The trace arguments every event of a call carries: its sequence number,
// count, type, op and root where they apply, and its payload bytes.
TraceArgs describe_for_trace(const Call& call, uint32_t sequence);

}  // namespace chorus::algorithms
