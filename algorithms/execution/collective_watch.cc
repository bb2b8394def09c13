// Timeouts, stall warnings and failures of a waiting collective (collective_watch.h).
#include "algorithms/execution/collective_watch.h"

#include <cstdio>

#include "algorithms/execution/arrivals.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {
namespace {

std::string one_decimal(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", seconds);
  return text;
}

}  // namespace

CollectiveWatch::CollectiveWatch(const Communicator& communicator, const Call& call, uint32_t sequence,
                                 Deadline deadline, Clock::time_point started)
    : communicator_(communicator),
      call_(call),
      sequence_(sequence),
      deadline_(deadline),
      started_(started),
      last_progress_(started) {
  const Clock::duration setting = communicator.settings().stall_warning;
  quiet_before_warning_ = setting == Clock::duration::zero()
                              ? Clock::duration::max() / 2
                              : std::min<Clock::duration>((deadline_.at() - started) / 2, setting);
}

std::string CollectiveWatch::this_collective() const { return cat(to_string(call_.collective), " #", sequence_); }

Clock::time_point CollectiveWatch::next_warning() const {
  if (quiet_before_warning_ >= Clock::duration::max() / 4) return Clock::time_point::max();
  const int doublings = std::min(warnings_, 20);
  return last_progress_ + quiet_before_warning_ * (int64_t{1} << doublings);
}

// Who has arrived (arrivals.h): a frozen rank stalls its neighbours too,
// and they time out waiting on each other; a rank that never called the
// collective does the same while answering probes. Only asking every
// member tells them apart.
std::exception_ptr CollectiveWatch::timeout_error(const std::string& waiting_for) const {
  // The timeout the call had, not the moment this thread noticed it (a
  // wake-up a millisecond late would print 2001 ms for a 2 s timeout), nor
  // the time since this wait started.
  const auto elapsed = deadline_.timeout().count() > 0
                           ? deadline_.timeout().count()
                           : std::chrono::round<std::chrono::milliseconds>(deadline_.at() - started_).count();
  const Arrivals arrivals = take_arrivals(communicator_, sequence_, kLivenessGrace);
  // A peer that timed out first may have aborted the job while this rank
  // was asking around: a rank it aborted answers no more probes, and would
  // read here as frozen. Its report came first and saw them answer.
  if (std::exception_ptr first = communicator_.mesh().failure()) return first;
  return std::make_exception_ptr(
      TimeoutError(cat("rank ", communicator_.shown_rank(communicator_.rank()), ": timed out after ", elapsed, " ms in ", this_collective(),
                       " (", describe_call(call_), "): waiting for ", waiting_for,
                       describe_arrivals(arrivals, this_collective(), kLivenessGrace))));
}

void CollectiveWatch::warn_stall(const std::string& waiting_for) {
  ++warnings_;
  const double quiet = std::chrono::duration<double>(Clock::now() - last_progress_).count();
  const Arrivals arrivals = take_arrivals(communicator_, sequence_, kStallProbeGrace);
  const double left = std::chrono::duration<double>(deadline_.remaining()).count();
  const int rank = communicator_.shown_rank(communicator_.rank());
  CHORUS_LOG(warn, rank, "rank ", rank, ": ", this_collective(), " (",
             describe_call(call_), ") has not moved for ", one_decimal(quiet), " s (",
             left < 1e7 ? cat("it times out in ", one_decimal(left), " s") : std::string("it has no timeout"),
             "): waiting for ", waiting_for, describe_arrivals(arrivals, this_collective(), kStallProbeGrace));
}

void CollectiveWatch::fail(std::exception_ptr error) const {
  communicator_.mesh().abort(error);
  std::rethrow_exception(error);
}

}  // namespace chorus::algorithms
