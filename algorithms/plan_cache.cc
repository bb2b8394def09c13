// The per-Communicator cache of selections and plans.
#include "algorithms/plan_cache.h"

#include <algorithm>

namespace chorus::algorithms {

PreparedPlan::PreparedPlan(Plan built) : plan(std::move(built)), graph(plan) {
  for (const Step& step : plan.steps()) {
    if (!step.is_communication()) continue;
    (step.kind == StepKind::send ? bytes_sent : bytes_received) += step.bytes();
    peers.push_back(step.peer);
  }
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
}

bool PlanCache::Entry::matches(const Call& call, const std::string& algorithm) const {
  // Every field selection or a Plan builder reads: the root of any rooted
  // collective, the per-rank counts of the v variants. rank, size and the
  // topology are the Communicator's.
  return collective == call.collective && count == call.count && type == call.type && op == call.op &&
         root == call.root && in_place == call.in_place && counts == call.counts && send_counts == call.send_counts &&
         recv_counts == call.recv_counts && requested == algorithm;
}

std::optional<CachedChoice> PlanCache::find(const Call& call, const std::string& requested) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = entries_.size(); i-- > 0;) {
    if (!entries_[i].matches(call, requested)) continue;
    if (i + 1 != entries_.size())
      std::rotate(entries_.begin() + static_cast<long>(i), entries_.begin() + static_cast<long>(i) + 1, entries_.end());
    return entries_.back().choice;
  }
  return std::nullopt;
}

void PlanCache::add(const Call& call, const std::string& requested, const CachedChoice& choice) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (entries_.size() >= kCapacity) entries_.erase(entries_.begin());
  entries_.push_back({call.collective, call.count, call.type, call.op, call.root, call.in_place, call.counts,
                      call.send_counts, call.recv_counts, requested, choice});
}

}  // namespace chorus::algorithms
