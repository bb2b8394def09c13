// The one registry of candidates (candidate.h): each Plan of the table in
// registry.cc as a candidate, the shared-memory collectives, the wrappers,
// and what the layers above add.
#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "algorithms/shared_memory/board.h"
#include "algorithms/shared_memory/host_boards.h"
#include "algorithms/execution/candidate.h"
#include "algorithms/execution/communicator.h"
#include "algorithms/execution/in_place_copy.h"
#include "algorithms/shared_memory/mapped_allreduce.h"
#include "algorithms/shared_memory/mapped_leader.h"
#include "algorithms/selection/plan_candidate.h"
#include "algorithms/selection/registry.h"
#include "algorithms/execution/staging.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {
namespace {

// Room for every candidate: 25 Plans and a dozen others today.
constexpr size_t kMostCandidates = 128;

struct Registry {
  std::array<const Candidate*, kMostCandidates> candidates{};
  std::atomic<size_t> count{0};
  // Those that run at issue (NCCL), apart: the API asks on every call.
  std::array<const Candidate*, 8> at_issue{};
  std::atomic<size_t> at_issue_count{0};
  std::mutex adding;
  std::vector<Candidate> plan_candidates;

  void add(const Candidate* candidate) {
    const size_t at = count.load(std::memory_order_relaxed);
    if (at == kMostCandidates) throw InvalidArgument(cat("more than ", kMostCandidates, " candidates registered"));
    candidates[at] = candidate;
    count.store(at + 1, std::memory_order_release);
  }

  Registry() {
    plan_candidates.reserve(all_algorithms().size());
    for (const Algorithm& algorithm : all_algorithms()) plan_candidates.push_back(plan_candidate(algorithm));
    for (const Candidate& candidate : plan_candidates) add(&candidate);
    for (const Candidate& candidate : board_candidates()) add(&candidate);
    for (const Candidate& candidate : host_board_candidates()) add(&candidate);
    for (const Candidate& candidate : mapped_candidates()) add(&candidate);
    for (const Candidate& candidate : mapped_leader_candidates()) add(&candidate);
    add(&staging_candidate());
    add(&in_place_copy_candidate());
  }
};

Registry& registry() {
  static Registry instance;
  return instance;
}

bool names_collective(const Candidate& candidate, Collective collective) {
  return !candidate.collective || *candidate.collective == collective;
}

}  // namespace

std::span<const Candidate* const> all_candidates() {
  Registry& table = registry();
  return {table.candidates.data(), table.count.load(std::memory_order_acquire)};
}

const Candidate* find_candidate(Collective collective, std::string_view name) {
  for (const Candidate* candidate : all_candidates())
    if (candidate->name == name && names_collective(*candidate, collective)) return candidate;
  return nullptr;
}

std::string candidate_names(Collective collective) {
  std::string names;
  for (const Candidate* candidate : all_candidates()) {
    if (!names_collective(*candidate, collective)) continue;
    if (!names.empty()) names += ", ";
    names += candidate->name;
  }
  return names;
}

void add_candidates(std::span<const Candidate> candidates) {
  Registry& table = registry();
  std::lock_guard lock(table.adding);
  for (const Candidate& candidate : candidates) {
    if (candidate.collective && find_candidate(*candidate.collective, candidate.name)) continue;  // added before
    table.add(&candidate);
    const size_t at = table.at_issue_count.load(std::memory_order_relaxed);
    if (candidate.runs_at_issue && at < table.at_issue.size()) {
      table.at_issue[at] = &candidate;
      table.at_issue_count.store(at + 1, std::memory_order_release);
    }
  }
}

bool names_candidate_run_at_issue(Collective collective, std::string_view name) {
  const Registry& table = registry();
  const size_t count = table.at_issue_count.load(std::memory_order_acquire);
  for (size_t i = 0; i < count; ++i)
    if (table.at_issue[i]->name == name && names_collective(*table.at_issue[i], collective)) return true;
  return false;
}

}  // namespace chorus::algorithms
