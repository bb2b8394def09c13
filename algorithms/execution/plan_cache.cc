// The per-Communicator cache of selections and plans.
#include "algorithms/execution/plan_cache.h"

#include <algorithm>
#include <atomic>

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

namespace {
std::atomic<uint64_t> caches_made{0};

// The calling thread's last hit: a steady loop of fixed-count calls finds
// its choice here without the lock (a lock and unlock are a sixth of an
// 8-byte call on the board). It holds its choice alive, so a hit is valid
// while the cache it came from, by id, lives.
struct LastHit {
  uint64_t cache = 0;
  Collective collective{};
  size_t count = 0;
  DataType type{};
  ReduceOp op{};
  int root = 0;
  bool in_place = false;
  Memory memory;
  std::string requested;
  std::shared_ptr<const Choice> choice;
};
thread_local LastHit last_hit;

bool plain(const Call& call) { return call.counts.empty() && call.send_counts.empty() && call.recv_counts.empty(); }
}  // namespace

PlanCache::PlanCache() : id_(caches_made.fetch_add(1, std::memory_order_relaxed) + 1) {}

bool PlanCache::Entry::matches(const Call& call, const std::string& algorithm) const {
  // Every field selection or a Plan builder reads: the root of any rooted
  // collective, the per-rank counts of the v variants. rank, size and the
  // topology are the Communicator's.
  return collective == call.collective && count == call.count && type == call.type && op == call.op &&
         root == call.root && in_place == call.in_place && memory == call.memory && counts == call.counts && send_counts == call.send_counts &&
         recv_counts == call.recv_counts && requested == algorithm;
}

std::shared_ptr<const Choice> PlanCache::find(const Call& call, const std::string& requested, bool remember) {
  LastHit& last = last_hit;
  if (last.cache == id_ && last.collective == call.collective && last.count == call.count && last.type == call.type &&
      last.op == call.op && last.root == call.root && last.in_place == call.in_place && last.memory == call.memory &&
      plain(call) && last.requested == requested)
    return last.choice;
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = entries_.size(); i-- > 0;) {
    if (!entries_[i].matches(call, requested)) continue;
    if (i + 1 != entries_.size())
      std::rotate(entries_.begin() + static_cast<long>(i), entries_.begin() + static_cast<long>(i) + 1, entries_.end());
    const Entry& entry = entries_.back();
    if (remember && plain(call))
      last = {id_,     call.collective, call.count, call.type, call.op, call.root, call.in_place, call.memory,
              requested, entry.choice};
    return entry.choice;
  }
  return nullptr;
}

void PlanCache::add(const Call& call, const std::string& requested, std::shared_ptr<const Choice> choice) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (entries_.size() >= kCapacity) entries_.erase(entries_.begin());
  entries_.push_back({call.collective, call.count, call.type, call.op, call.root, call.in_place, call.memory,
                      call.counts, call.send_counts, call.recv_counts, requested, std::move(choice)});
}

}  // namespace chorus::algorithms
