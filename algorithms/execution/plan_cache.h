// The choices a Communicator has made (selection.h), with their Plans.
// Training loops repeat the same few calls thousands of times: choosing
// evaluates every candidate's cost, and building a ring plan for a large
// buffer costs far more than a lookup, so neither should happen twice for
// the same call. Choices and plans depend only on the call's shape and
// memory and on what the Communicator fixes for its lifetime (its members,
// topology, cost models, board and overrides), so the cache lives in the
// Communicator and its key is the shape alone. The most recent entries are
// looked at first: a steady loop finds its call in the first comparison,
// and the calling thread's last choice is found without the lock (find).
#pragma once

#include <cstddef>
#include <optional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/model/call.h"
#include "algorithms/execution/candidate.h"
#include "algorithms/model/plan.h"
#include "algorithms/model/schedule.h"

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

class PlanCache {
 public:
  PlanCache();
  // The cached choice for the call and requested name; null if none. Held
  // by the caller for its run: another thread's add may evict it meanwhile.
  // `remember`: whether a hit becomes the thread's last (found without the
  // lock next time). A helper call inside an application's call passes
  // false, so the two do not evict each other from the one slot.
  std::shared_ptr<const Choice> find(const Call& call, const std::string& requested, bool remember = true);
  // Stores a choice made (outside any lock: a big plan takes a while to build).
  void add(const Call& call, const std::string& requested, std::shared_ptr<const Choice> choice);

 private:
  struct Entry {
    Collective collective;
    size_t count;
    DataType type;
    ReduceOp op;
    int root;
    bool in_place;
    Memory memory;
    std::vector<size_t> counts, send_counts, recv_counts;
    std::string requested;
    std::shared_ptr<const Choice> choice;
    bool matches(const Call& call, const std::string& algorithm) const;
  };
  // Bounded crudely: a program cycling through many shapes rebuilds, one
  // with a steady shape never does.
  static constexpr size_t kCapacity = 64;
  // Tells this cache's entries from those of a cache that lived at the same address.
  const uint64_t id_;
  std::mutex mutex_;
  std::vector<Entry> entries_;  // most recently used last
};

}  // namespace chorus::algorithms
