// One collective case run through the public API on a real Context and
// checked bit-exactly against reference_data: out of place, in place, v
// variants, raw or typed (std::span) forms, blocking or async. Every buffer
// has guard bytes after it that no collective may write, and inputs the
// library must not modify are checked too.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "algorithms/model/call.h"
#include "algorithms/selection/registry.h"
#include "base/topology.h"
#include "chorus/context.h"
#include "chorus/work.h"

namespace chorus::oracle {

struct Case {
  // The test's description of the call: count is the per-rank block (the
  // whole buffer for allreduce/broadcast/reduce; the scale of alltoallv_count
  // when send_counts is non-empty, which marks alltoallv); counts non-empty
  // marks a v variant.
  algorithms::Call call;
  std::string algorithm = "auto";
  bool async = false;
  bool typed = false;  // std::span overloads (float32 only)
  size_t salt = 0;     // shifts the reference data (reference_data.h)
};

// The Call the library builds from this case on this rank (what selection sees).
algorithms::Call library_call(const Case& test);

// A case with its buffers, from before it is issued until it is checked,
// so several async cases can be in flight at once.
class CheckedCall {
 public:
  explicit CheckedCall(const Case& test);
  ~CheckedCall();
  CheckedCall(const CheckedCall&) = delete;
  CheckedCall& operator=(const CheckedCall&) = delete;

  // Issues the call on `context`, whose rank and size the case's call
  // carries. A blocking form returns an empty Work once it finished; an
  // async one its Work, which must finish before check(). Throws whatever
  // the library throws.
  Work issue(Context& context);
  // After the call finished: "" when every checked byte is right, else what
  // is wrong (the first differing element with its expected and actual value).
  std::string check() const;
  const Case& test() const;
  // The bytes check() compares with the expected output (empty where this
  // rank has none): lets a tool prove its checking catches a wrong byte.
  std::span<std::byte> result_bytes();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Runs the case; returns "" when every checked byte is right, else what went wrong.
std::string run_case(Context& context, const Case& test);

// "allgatherv ring count 7 int32 in place async" for failure reports.
std::string describe(const Case& test);

// Whether an algorithm serves this case on every rank's view of the call,
// on none, or only on some (then some ranks would run it and others reject
// it: a library bug). The case's rank does not matter.
enum class Support { all, none, some };
Support algorithm_support(const algorithms::Algorithm& algorithm, const Case& test,
                          const std::shared_ptr<const Topology>& topology);

}  // namespace chorus::oracle
