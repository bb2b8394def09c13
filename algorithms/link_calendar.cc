// Interval bookings of a link with one or more lanes.
#include "algorithms/link_calendar.h"

namespace chorus::algorithms {

double LinkCalendar::earliest_fit(double from, double length) const {
  int busy = busy_before_;
  auto next = changes_.begin();
  for (; next != changes_.end() && next->first <= from; ++next) busy += next->second;
  double start = from;
  while (true) {
    // Move to the first moment a lane is free.
    while (busy >= lanes_ && next != changes_.end()) {
      start = next->first;
      busy += next->second;
      ++next;
    }
    if (busy >= lanes_) return start;  // unreachable while bookings end; kept safe
    // Does the lane stay free for the whole length?
    int ahead = busy;
    auto probe = next;
    for (; probe != changes_.end() && probe->first < start + length; ++probe) {
      ahead += probe->second;
      if (ahead >= lanes_) break;
    }
    if (probe == changes_.end() || probe->first >= start + length) return start;
    // Full at `probe`: try again from there.
    for (; next != probe; ++next) busy += next->second;
    start = next->first;
    busy += next->second;
    ++next;
  }
}

void LinkCalendar::book(double start, double length) {
  if (length <= 0) return;
  for (auto [time, delta] : {std::pair{start, 1}, std::pair{start + length, -1}}) {
    auto [entry, inserted] = changes_.try_emplace(time, 0);
    entry->second += delta;
    if (entry->second == 0) changes_.erase(entry);
  }
}

void LinkCalendar::forget_until(double now) {
  while (!changes_.empty() && changes_.begin()->first <= now) {
    busy_before_ += changes_.begin()->second;
    changes_.erase(changes_.begin());
  }
}

double earliest_common_fit(std::span<LinkCalendar* const> calendars, double from, double length) {
  double start = from;
  while (true) {
    bool all_fit = true;
    for (LinkCalendar* calendar : calendars) {
      const double fit = calendar->earliest_fit(start, length);
      if (fit > start) {
        start = fit;
        all_fit = false;
      }
    }
    if (all_fit) return start;
  }
}

}  // namespace chorus::algorithms
