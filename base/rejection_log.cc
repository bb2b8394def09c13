#include "base/rejection_log.h"

#include "base/log.h"

namespace chorus {

namespace {
// Sources remembered at most, so a stranger with many addresses costs
// bounded memory: past it, sources quiet for an interval are forgotten, and
// a summary counts at most this many distinct sources ("4096 or more").
constexpr size_t kMaxSources = 4096;
}  // namespace

bool RejectionLog::admit(const std::string& source, Clock::time_point now) {
  if (now - interval_started_ >= interval_) {
    interval_started_ = now;
    lines_this_interval_ = 0;
  }
  if (logged_at_.size() >= kMaxSources && !logged_at_.contains(source))
    std::erase_if(logged_at_, [&](const auto& entry) { return now - entry.second >= interval_; });
  auto found = logged_at_.find(source);
  const bool quiet = found == logged_at_.end() || now - found->second >= interval_;
  if (quiet && lines_this_interval_ < kMaxLinesPerInterval && logged_at_.size() < kMaxSources) {
    ++lines_this_interval_;
    logged_at_[source] = now;
    return true;
  }
  if (counted_ == 0) counting_since_ = now;
  ++counted_;
  if (counted_sources_.size() < kMaxSources) counted_sources_.insert(source);
  ++unlogged_;
  return false;
}

RejectionLog::Clock::time_point RejectionLog::summary_due() const {
  return counted_ == 0 ? Clock::time_point::max() : counting_since_ + interval_;
}

std::optional<std::string> RejectionLog::summary(Clock::time_point now) {
  if (counted_ == 0 || now < summary_due()) return std::nullopt;
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(now - counting_since_).count();
  const size_t sources = counted_sources_.size();
  std::string line = cat("dropped ", counted_, counted_ == 1 ? " more connection" : " more connections", " from ",
                         sources >= kMaxSources ? "at least " : "", sources, sources == 1 ? " source" : " sources",
                         " in the last ", seconds, " s (the first from each source is logged; the rest at debug)");
  counted_ = 0;
  counted_sources_.clear();
  return line;
}

}  // namespace chorus
