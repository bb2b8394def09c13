// One collective test case run through the public API on a real Context and
// checked bit-exactly against reference_data: out of place, in place, v
// variants, raw or typed (std::span) forms, blocking or async.
#pragma once

#include <string>

#include "algorithms/call.h"
#include "chorus/context.h"

namespace chorus::collective_test {

struct Case {
  // The test's description of the call: count is the per-rank block (the
  // whole buffer for allreduce/broadcast/reduce; the scale of alltoallv_count
  // when send_counts is non-empty, which marks alltoallv); counts non-empty
  // marks a v variant.
  algorithms::Call call;
  std::string algorithm = "auto";
  bool async = false;
  bool typed = false;  // std::span overloads (float32 only)
};

// The Call the library builds from this case on this rank (what selection sees).
algorithms::Call library_call(const Case& test);

// Runs the case; returns "" when every checked byte is right, else what went wrong.
std::string run_case(Context& context, const Case& test);

// "allgatherv ring count 7 int32 in place async" for failure reports.
std::string describe(const Case& test);

}  // namespace chorus::collective_test
