// The plans a Communicator has run, with the algorithm selection that chose
// them. Training loops repeat the same few calls thousands of times:
// choosing an algorithm evaluates every candidate's cost, and building a
// ring plan for a large buffer costs far more than a lookup, so neither
// should happen twice for the same call. Selection and plans depend only on
// the call's shape and on what the Communicator fixes for its lifetime (its
// members, topology, cost model and overrides), so the cache lives in the
// Communicator and its key is the shape alone. The most recent entries are
// looked at first: a steady loop finds its call in the first comparison.
#pragma once

#include <cstddef>
#include <optional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/call.h"
#include "algorithms/plan.h"
#include "algorithms/registry.h"
#include "algorithms/schedule.h"

namespace chorus::algorithms {

struct PreparedPlan {
  explicit PreparedPlan(Plan built);
  Plan plan;
  PlanGraph graph;
  // What one run moves, for the Communicator's counters and trace.
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  std::vector<int> peers;  // ascending, each once
  // The trace's fields that are the same for every run of this plan
  // (algorithm, transports, peers, bytes), formatted once.
  mutable std::once_flag trace_fields_once;
  mutable std::string trace_fields;
};

struct CachedChoice {
  const Algorithm* algorithm = nullptr;
  std::shared_ptr<const PreparedPlan> prepared;
};

class PlanCache {
 public:
  // The cached choice for the call and requested algorithm name, if any.
  std::optional<CachedChoice> find(const Call& call, const std::string& requested);
  // Stores a choice made (outside any lock: a big plan takes a while to build).
  void add(const Call& call, const std::string& requested, const CachedChoice& choice);

 private:
  struct Entry {
    Collective collective;
    size_t count;
    DataType type;
    ReduceOp op;
    int root;
    bool in_place;
    std::vector<size_t> counts, send_counts, recv_counts;
    std::string requested;
    CachedChoice choice;
    bool matches(const Call& call, const std::string& algorithm) const;
  };
  // Bounded crudely: a program cycling through many shapes rebuilds, one
  // with a steady shape never does.
  static constexpr size_t kCapacity = 64;
  std::mutex mutex_;
  std::vector<Entry> entries_;  // most recently used last
};

}  // namespace chorus::algorithms
