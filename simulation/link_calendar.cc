// Interval bookings of a link with one or more lanes.
#include "simulation/link_calendar.h"

#include <iterator>

namespace chorus::algorithms {

int LinkCalendar::busy_at(double time) const {
  auto after = busy_.upper_bound(time);
  return after == busy_.begin() ? busy_before_ : std::prev(after)->second;
}

double LinkCalendar::earliest_fit(double from, double length) const {
  double start = from;
  while (true) {
    auto next = busy_.upper_bound(start);
    int busy = next == busy_.begin() ? busy_before_ : std::prev(next)->second;
    // Move to the first moment a lane is free (every booking ends).
    for (; busy >= lanes_ && next != busy_.end(); ++next) {
      start = next->first;
      busy = next->second;
    }
    // Does a lane stay free for the whole length?
    bool fits = true;
    for (; next != busy_.end() && next->first < start + length; ++next) {
      if (next->second >= lanes_) {
        start = next->first;
        fits = false;
        break;
      }
    }
    if (fits) return start;
  }
}

void LinkCalendar::book(double start, double length) {
  if (length <= 0) return;
  const double end = start + length;
  busy_.try_emplace(end, busy_at(end));
  busy_.try_emplace(start, busy_at(start));
  for (auto entry = busy_.find(start); entry->first < end; ++entry) ++entry->second;
  // Entries that repeat the level before them say nothing: dropping them
  // keeps a run of back-to-back bookings one entry, so the next message
  // skips it in one step.
  for (double time : {end, start}) {
    auto entry = busy_.find(time);
    const int before = entry == busy_.begin() ? busy_before_ : std::prev(entry)->second;
    if (entry->second == before) busy_.erase(entry);
  }
}

void LinkCalendar::forget_until(double now) {
  while (!busy_.empty() && busy_.begin()->first <= now) {
    busy_before_ = busy_.begin()->second;
    busy_.erase(busy_.begin());
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
