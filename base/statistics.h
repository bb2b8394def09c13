// The counters a Context keeps of its calls (Context::statistics(); the C
// API's chorus_statistics_t and the Python module's Context.statistics()
// read the same). Kept in the base because the algorithm layer counts them
// and the public API shows them.
#pragma once

#include <chrono>
#include <cstdint>

namespace chorus {

// What one Context has done since it was made (a split child counts its
// own calls, not its parent's). Read at any time, from any thread.
struct ContextStatistics {
  uint64_t collectives = 0;         // finished, successfully or not
  uint64_t failed_collectives = 0;  // of those, how many failed
  uint64_t messages_sent = 0;       // point-to-point sends completed
  uint64_t messages_received = 0;   // point-to-point receives completed
  // By this rank, over every transport (collectives and messages); a call
  // on the shared-memory board counts the bytes its peers read out of this
  // rank's slot as sent, those it reads out of theirs as received.
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  // Inside collectives: from the start of each run to its end.
  std::chrono::nanoseconds time_in_collectives{0};
  // Callers blocked: in blocking collectives and messages (queue included)
  // and in Work::wait / wait_for.
  std::chrono::nanoseconds time_waiting{0};
};

}  // namespace chorus
