// What every waiting collective shares, whichever candidate runs it (the
// Executor's Plans and the board alike): when it has waited too long it
// fails with a TimeoutError naming what it waits for and which ranks have
// arrived (arrivals.h); when it has been quiet long enough it warns, then
// again each time the quiet doubles; and any failure aborts the Mesh first,
// so every other member learns of it instead of waiting for this one.
//
// The first warning comes after half the time left at the start, at most
// CHORUS_STALL_WARNING_S (a minute by default; zero: never): Horovod's
// stall inspector, naming ranks, without flooding the log. A job that is
// about to fail says why while it can still be looked at, and one that
// hangs keeps saying so.
#pragma once

#include <algorithm>
#include <exception>
#include <string>

#include "algorithms/model/call.h"
#include "algorithms/execution/communicator.h"
#include "base/deadline.h"

namespace chorus::algorithms {

class CollectiveWatch {
 public:
  CollectiveWatch(const Communicator& communicator, const Call& call, uint32_t sequence, Deadline deadline,
                  Clock::time_point started);

  // The collective moved at `now`: the quiet starts again.
  void progressed(Clock::time_point now) {
    last_progress_ = now;
    warnings_ = 0;
  }
  bool timed_out(Clock::time_point now) const { return now >= deadline_.at(); }
  bool warning_due(Clock::time_point now) const { return now >= next_warning(); }
  // When the waiter must look again even if nothing arrives.
  Clock::time_point next_wake() const { return std::min(deadline_.at(), next_warning()); }
  // The TimeoutError of a collective waiting for `waiting_for`, or the
  // failure a peer that timed out first reported.
  std::exception_ptr timeout_error(const std::string& waiting_for) const;
  void warn_stall(const std::string& waiting_for);
  // Aborts the Mesh with `error` and throws it.
  [[noreturn]] void fail(std::exception_ptr error) const;
  // "allreduce #7"
  std::string this_collective() const;

 private:
  Clock::time_point next_warning() const;

  const Communicator& communicator_;
  const Call& call_;
  const uint32_t sequence_;
  const Deadline deadline_;
  const Clock::time_point started_;
  Clock::duration quiet_before_warning_{};
  Clock::time_point last_progress_;
  int warnings_ = 0;  // since the last progress
};

}  // namespace chorus::algorithms
