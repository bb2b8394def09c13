// The members, their topology and the cost model per level.
#include "algorithms/execution/communicator.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "algorithms/execution/deferred_root_checks.h"
#include "algorithms/execution/late_root_checks.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {
Communicator::Communicator(std::shared_ptr<transport::Mesh> mesh, std::vector<int> members, uint64_t group,
                           std::shared_ptr<const Topology> mesh_topology, CommunicatorSettings settings)
    : mesh_(std::move(mesh)),
      mesh_topology_(std::move(mesh_topology)),
      members_(std::move(members)),
      group_(group),
      settings_(std::move(settings)),
      plan_cache_(std::make_unique<PlanCache>()),
      backend_states_(std::make_unique<BackendStates>()) {
  if (!mesh_ || members_.empty()) throw InvalidArgument("a communicator needs a mesh and at least one member");
  if (!mesh_topology_) throw InvalidArgument("a communicator needs the topology of its mesh");
  for (size_t i = 0; i < members_.size(); ++i) {
    const int member = members_[i];
    if (member < 0 || member >= mesh_->size())
      throw InvalidArgument(cat("rank ", mesh_->rank(), ": member ", member, " is not a rank of the job"));
    if (member == mesh_->rank()) rank_ = static_cast<int>(i);
  }
  if (rank_ < 0) throw InvalidArgument(cat("rank ", mesh_->rank(), " is not a member of its own communicator"));
  topology_ = std::make_shared<const Topology>(mesh_topology_->subset(members_));
  position_ = &mesh_->positions().slot(group_);
  telemetry_ = std::make_shared<Telemetry>(
      settings_.trace, settings_.trace_steps,
      group_ == 0 ? cat("rank ", rank_, " of ", size())
                  : cat("rank ", rank_, " of ", size(), " (split group ", std::hex, group_, ")"));

  const LinkModel local = apply_link_model_override(settings_.link_model, LinkLevel::local, settings_.local);
  const LinkModel remote = apply_link_model_override(settings_.link_model, LinkLevel::remote, settings_.remote);
  cost_model_ = CostModel::from_levels(local, remote, topology_->hosts() > 1);
  cost_model_.cores_per_rank = settings_.cores_per_rank;
  // Every rank of the job that may run on this rank's cores competes for
  // them, whichever Context it runs a collective on: ranks of other "hosts"
  // on the same machine too (network namespaces or containers of one
  // kernel, which a test or a simulated cluster gives host ids of their
  // own), but not ranks of this host pinned to other cores.
  cpu_set_t usable;
  CPU_ZERO(&usable);
  const int cores = ::sched_getaffinity(0, sizeof(usable), &usable) == 0 ? CPU_COUNT(&usable)
                                                                        : static_cast<int>(std::thread::hardware_concurrency());
  const int competing = settings_.ranks_sharing_cores > 0 ? settings_.ranks_sharing_cores
                                                          : mesh_topology_->local_size(mesh_->rank());
  oversubscribed_ = cores > 0 && competing > cores;
  // Asked on every call: computed once.
  all_accept_host_ = true;
  for (int member = 0; member < size(); ++member) {
    if (member == rank_) continue;
    striped_ = striped_ || streams(member) > 1;
    all_accept_host_ = all_accept_host_ && mesh_->device_of(mesh_rank(member)).accepts(Memory::host());
  }
}

Communicator Communicator::subgroup(const std::vector<int>& members, uint64_t group, bool traced) const {
  std::vector<int> mesh_ranks;
  mesh_ranks.reserve(members.size());
  for (int member : members) {
    if (member < 0 || member >= size())
      throw InvalidArgument(cat("rank ", rank_, ": member ", member, " of a subgroup is not one of ", size()));
    mesh_ranks.push_back(mesh_rank(member));
  }
  if (traced) return Communicator(mesh_, std::move(mesh_ranks), group, mesh_topology_, settings_);
  CommunicatorSettings untraced = settings_;
  untraced.trace = nullptr;
  Communicator helper(mesh_, std::move(mesh_ranks), group, mesh_topology_, std::move(untraced));
  auto shown = std::make_shared<std::vector<int>>();
  shown->reserve(members.size());
  for (int member : members) shown->push_back(shown_rank(member));
  helper.shown_ranks_ = std::move(shown);
  // Positions are kept per group: only a helper under this group can ask
  // this Communicator's other ranks where they are in its calls.
  if (group == group_) helper.probed_ = std::make_shared<const std::vector<ProbedRank>>(probed_ranks());
  return helper;
}

std::vector<Communicator::ProbedRank> Communicator::probed_ranks() const {
  if (probed_) return *probed_;
  std::vector<ProbedRank> ranks;
  ranks.reserve(members_.size());
  for (int member = 0; member < size(); ++member) ranks.push_back({shown_rank(member), mesh_rank(member)});
  return ranks;
}

void Communicator::enable_late_root_checks() {
  if (!late_root_checks_) late_root_checks_ = std::make_shared<LateRootChecks>();
}

void Communicator::enable_deferred_root_checks() {
  if (!deferred_root_checks_) deferred_root_checks_ = std::make_shared<DeferredRootChecks>();
}

bool Communicator::accepts(const Memory& memory) const {
  if (memory.on_host()) return all_accept_host_;
  if (size() == 1) return true;  // no peer: the memory backend does it all
  // Decided from what every member learnt at connect, not from this rank's
  // own pairs: every member must choose device or staged alike, or one
  // would send device descriptors where another expects host bytes.
  for (int member = 0; member < size(); ++member)
    if (!mesh_->moves_device_memory(mesh_rank(member))) return false;
  return true;
}

bool Communicator::maps_peer_memory(const Memory& memory) const {
  if (memory.on_host() || size() == 1) return false;
  for (int member = 0; member < size(); ++member)
    if (!mesh_->maps_peer_memory(mesh_rank(member))) return false;
  return true;
}

bool Communicator::shares_one_time_sliced_device(const Memory& memory) const {
  return !memory.on_host() && size() > 1 && mesh_->one_time_sliced_device();
}

uint64_t child_group(uint64_t parent, uint32_t sequence, int color) {
  // splitmix64 over the three inputs: cheap, and a good spread of bits.
  uint64_t x = parent ^ (static_cast<uint64_t>(sequence) << 32 | static_cast<uint32_t>(color));
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x == 0 ? 1 : x;  // 0 is the root Context's group
}

}  // namespace chorus::algorithms
