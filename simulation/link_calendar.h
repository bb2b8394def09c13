// The bookings of one link of the model network over simulated time: how
// many of its `lanes` transfers hold at each moment. A transfer books the
// earliest interval of its length that has a free lane throughout, which
// may lie in a gap between earlier bookings: a message that can go now does
// not wait behind one booked for later (first-come first-served with
// back-filling, as a link that is idle carries whatever is ready).
#pragma once

#include <cstddef>
#include <map>
#include <span>

namespace chorus::algorithms {

class LinkCalendar {
 public:
  explicit LinkCalendar(int lanes = 1) : lanes_(lanes) {}

  // The earliest start >= `from` with a lane free for [start, start + length).
  double earliest_fit(double from, double length) const;
  void book(double start, double length);
  // Forgets the bookings that ended by `now`: simulated time only moves on.
  void forget_until(double now);

 private:
  int busy_at(double time) const;

  int lanes_;
  int busy_before_ = 0;         // lanes held before the first change
  std::map<double, int> busy_;  // time -> lanes held from then until the next entry
};

// The earliest start >= `from` at which every calendar has a lane free for
// `length`.
double earliest_common_fit(std::span<LinkCalendar* const> calendars, double from, double length);

}  // namespace chorus::algorithms
