// A Context's counters as the dict the Python module and chorus.torch both
// return (Context.statistics(), ProcessGroupChorus.statistics()): counts and
// bytes as ints, times in seconds.
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>

#include "base/statistics.h"

namespace chorus::python {

inline pybind11::dict statistics_dict(const ContextStatistics& counted) {
  pybind11::dict out;
  out["collectives"] = counted.collectives;
  out["failed_collectives"] = counted.failed_collectives;
  out["messages_sent"] = counted.messages_sent;
  out["messages_received"] = counted.messages_received;
  out["bytes_sent"] = counted.bytes_sent;
  out["bytes_received"] = counted.bytes_received;
  out["time_in_collectives"] = std::chrono::duration<double>(counted.time_in_collectives).count();
  out["time_waiting"] = std::chrono::duration<double>(counted.time_waiting).count();
  return out;
}

}  // namespace chorus::python
