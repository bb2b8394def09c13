#include "transport/rejection_log.h"

#include "base/log.h"

namespace chorus::transport {

namespace {
// Sources remembered at most: past it, those quiet for an interval go.
constexpr size_t kMaxSources = 4096;
}  // namespace

std::optional<std::string> RejectionLog::admit(const std::string& source, Clock::time_point now) {
  if (now - interval_started_ >= interval_) {
    interval_started_ = now;
    lines_this_interval_ = 0;
  }
  if (sources_.size() >= kMaxSources && !sources_.contains(source))
    std::erase_if(sources_, [&](const auto& entry) { return now - entry.second.logged_at >= interval_; });
  auto found = sources_.find(source);
  const bool quiet = found == sources_.end() || now - found->second.logged_at >= interval_;
  if (!quiet || lines_this_interval_ >= kMaxLinesPerInterval || sources_.size() >= kMaxSources) {
    if (found != sources_.end()) ++found->second.since_logged;
    else ++others_since_logged_;
    ++unlogged_;
    return std::nullopt;
  }
  ++lines_this_interval_;
  uint64_t unlogged_here = 0;
  if (found == sources_.end()) {
    found = sources_.emplace(source, Source{now, 0}).first;
  } else {
    unlogged_here = found->second.since_logged;
    found->second = Source{now, 0};
  }
  std::string note;
  if (unlogged_here > 0) note += cat(" (", unlogged_here, " more from it since its last line, not logged)");
  if (others_since_logged_ > 0) {
    note += cat(" (", others_since_logged_, " from other sources not logged: too many rejections)");
    others_since_logged_ = 0;
  }
  return note;
}

}  // namespace chorus::transport
