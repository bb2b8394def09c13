// What a Plan runs on: one Context's view of its rank's Mesh. A Context made
// by split sees a subset of the parent's ranks (its members, renumbered
// 0..size-1) over the same Pairs; its messages carry its own group in the
// tag, so its collectives never match the parent's or a sibling's, whatever
// their numbers. The Communicator also holds what selection needs: the
// topology of the members, the cost model per level, the CHORUS_ALGO
// overrides, and how long a waiting collective polls.
//
// Every member must select the same algorithm for the same call, so the cost
// model must be equal on all of them: its link models per level are the
// ones the whole job agreed on at connect (transport/connect_mesh.h), which a
// split child inherits (its links are a subset of them).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/execution/backend_state.h"
#include "algorithms/model/call.h"
#include "algorithms/model/cost_model.h"
#include "algorithms/execution/plan_cache.h"
#include "algorithms/execution/telemetry.h"
#include "base/config.h"
#include "base/memory.h"
#include "base/topology.h"
#include "transport/mesh.h"

namespace chorus::algorithms {

// The shared-memory board's state (shared_memory/board.h), which only the
// Contexts the application holds have.
class BoardCell;
class DeferredRootChecks;
class LateRootChecks;

struct CommunicatorSettings {
  // The job's agreed slowest link within a host and between hosts.
  LinkModel local;
  LinkModel remote;
  std::array<bool, 2> measured{};  // local, remote: measured at connect, not built in
  std::chrono::microseconds poll_time{200};
  // Quiet (no progress) before a collective's first stall warning, at most
  // half its timeout; each further warning waits for the quiet to double.
  // Zero: no warnings (CHORUS_STALL_WARNING_S).
  std::chrono::milliseconds stall_warning{60000};
  // CHORUS_LINK_MODEL / ConnectOptions::link_model text (base/link_model.h).
  std::string link_model;
  // Parsed CHORUS_ALGO / ConnectOptions overrides.
  std::map<Collective, std::string> algorithm_overrides;
  // CHORUS_BOARD_BYTES (algorithms/shared_memory/board.h): the largest call on the board; 0: none.
  size_t board_bytes = kDefaultBoardBytes;
  // CHORUS_TRACE's file (null: no trace) and CHORUS_TRACE_STEPS. A split
  // child writes into its parent's file, on a track of its own.
  std::shared_ptr<TraceFile> trace;
  bool trace_steps = false;
  // The job's ranks that may run on this rank's cores (this one included):
  // on its machine (one kernel), whatever hosts they name, with affinities
  // that meet its own. 0: unknown (then its host's ranks are counted).
  int ranks_sharing_cores = 0;
  // The job's fewest cores per rank on one machine, the same on every rank
  // (CostModel::cores_per_rank); 0: a core each, or unknown.
  double cores_per_rank = 0;
};

class Communicator {
 public:
  // members[i] is the Mesh rank of member i; this rank must be one of them.
  // `mesh_topology` is the Mesh's (by Mesh rank). Throws InvalidArgument for
  // a malformed link model override.
  Communicator(std::shared_ptr<transport::Mesh> mesh, std::vector<int> members, uint64_t group,
               std::shared_ptr<const Topology> mesh_topology, CommunicatorSettings settings);

  // A Communicator of some of these members (in this numbering, in the
  // order given; this rank among them) over the same Mesh and settings,
  // under `group`: a split whose members every rank knows already, so it
  // exchanges nothing. The caller derives `group` alike on every member.
  // traced = false: a helper group's; its calls stay out of the trace, and
  // its errors name members by this Communicator's ranks (shown_rank).
  Communicator subgroup(const std::vector<int>& members, uint64_t group, bool traced = true) const;

  int rank() const { return rank_; }
  // The rank an error or warning names for `member`: its own number in a
  // Context (a split child too), the enclosing Context's in a helper group
  // (subgroup with traced = false: a host's board, a rail, an agreement),
  // so that the words say which of the caller's ranks failed or waited.
  int shown_rank(int member) const {
    return shown_ranks_ ? (*shown_ranks_)[static_cast<size_t>(member)] : member;
  }
  // Whom a stalled call asks where they are (arrivals.h): its members; in a
  // helper group under its Context's own group (a host's board, a rail),
  // every rank of the Context, so that a rank outside the helper that never
  // came is named as the cause, not the helper's members waiting for it.
  struct ProbedRank {
    int shown = 0;
    int mesh_rank = 0;
  };
  std::vector<ProbedRank> probed_ranks() const;
  int size() const { return static_cast<int>(members_.size()); }
  uint64_t group() const { return group_; }
  int mesh_rank(int member) const { return members_[static_cast<size_t>(member)]; }
  const std::vector<int>& members() const { return members_; }

  transport::Mesh& mesh() const { return *mesh_; }
  const std::shared_ptr<transport::Mesh>& shared_mesh() const { return mesh_; }
  transport::Pair& pair(int member, int stream = 0) const { return mesh_->pair(mesh_rank(member), stream); }
  int streams(int member) const { return mesh_->streams(mesh_rank(member)); }
  // Whether the transport serving every member moves this memory.
  bool accepts(const Memory& memory) const;
  // Whether every member maps its peers' device memory (agreed at connect,
  // so all members answer alike): a collective on it may then read and
  // write their buffers itself (algorithms/shared_memory/mapped_allreduce.h).
  bool maps_peer_memory(const Memory& memory) const;
  // Whether every member works on one device that its processes share by
  // time slices (agreed at connect; transport/mesh.h): each member's device
  // work then waits for that member's turn.
  bool shares_one_time_sliced_device(const Memory& memory) const;
  // Whether some member's transport keeps several streams (the executor stripes).
  bool striped() const { return striped_; }

  // Of the members, in member numbering.
  const Topology& topology() const { return *topology_; }
  const std::shared_ptr<const Topology>& shared_topology() const { return topology_; }
  const CostModel& cost_model() const { return cost_model_; }
  const CommunicatorSettings& settings() const { return settings_; }
  std::chrono::microseconds poll_time() const { return settings_.poll_time; }
  // The selections and plans of the calls run so far (plan_cache.h).
  PlanCache& plan_cache() const { return *plan_cache_; }
  // Where this rank is in this Communicator's collectives (its slot of the
  // Mesh's transport::PositionTable): set when a collective starts and ends,
  // read by the peers' liveness probes.
  void note_started(uint32_t sequence) const {
    position_->store(transport::encode_position({.known = true, .running = true, .sequence = sequence}),
                     std::memory_order_relaxed);
  }
  void note_finished(uint32_t sequence) const {
    position_->store(transport::encode_position({.known = true, .running = false, .sequence = sequence}),
                     std::memory_order_relaxed);
  }
  // Counters and trace track of the calls run on this Communicator.
  Telemetry& telemetry() const { return *telemetry_; }
  // For what may outlive the Communicator (a Work the caller still holds).
  const std::shared_ptr<Telemetry>& shared_telemetry() const { return telemetry_; }
  // More of the job's ranks on this rank's host than it has cores to run
  // them: a waiting rank then gives its core away at once.
  bool oversubscribed() const { return oversubscribed_; }
  // What backends (registry.h) built for this Communicator on first use.
  BackendStates& backend_states() const { return *backend_states_; }
  // Its board (shared_memory/board.h: enable_board); null: none.
  BoardCell* board_cell() const { return board_.get(); }
  void set_board_cell(std::shared_ptr<BoardCell> cell) { board_ = std::move(cell); }
  // The root checks its calls left to settle later (deferred_root_checks.h);
  // null: every rooted call waits for its own (a helper group's).
  DeferredRootChecks* deferred_root_checks() const { return deferred_root_checks_.get(); }
  void enable_deferred_root_checks();
  // Its rooted calls' checks without a message of their own
  // (late_root_checks.h); null: every rooted call sends its check (a helper
  // group's).
  LateRootChecks* late_root_checks() const { return late_root_checks_.get(); }
  void enable_late_root_checks();
  // Whether the candidates' set-up of the first call ran (run.h).
  bool set_up() const { return run_counters_->set_up.load(std::memory_order_acquire); }
  void mark_set_up() const { run_counters_->set_up.store(true, std::memory_order_release); }
  // Numbers the calls whose time is sampled (run.h), from 0; only for
  // statistics, so calls racing from two threads may share a number.
  uint64_t count_sampled_call() const {
    std::atomic<uint64_t>& calls = run_counters_->sampled_calls;
    const uint64_t number = calls.load(std::memory_order_relaxed);
    calls.store(number + 1, std::memory_order_relaxed);
    return number;
  }
  // The last one-way Plan (a broadcast's tree or chain) run here: its
  // call's sequence number and when it ended, on the steady clock. The
  // executor's sign that such calls come back to back (executor.cc,
  // poll_for_change); only kept where the host is oversubscribed, the one
  // place it is read.
  struct OneWayEnd {
    uint32_t sequence = 0;
    std::chrono::steady_clock::time_point when;
  };
  OneWayEnd last_one_way_end() const {
    return {run_counters_->one_way_sequence.load(std::memory_order_relaxed),
            std::chrono::steady_clock::time_point(
                std::chrono::steady_clock::duration(run_counters_->one_way_ended.load(std::memory_order_relaxed)))};
  }
  void note_one_way_end(uint32_t sequence, std::chrono::steady_clock::time_point when) const {
    run_counters_->one_way_sequence.store(sequence, std::memory_order_relaxed);
    run_counters_->one_way_ended.store(when.time_since_epoch().count(), std::memory_order_relaxed);
  }

 private:
  std::shared_ptr<transport::Mesh> mesh_;
  std::shared_ptr<const Topology> mesh_topology_;
  std::vector<int> members_;
  int rank_ = -1;
  uint64_t group_;
  std::shared_ptr<const Topology> topology_;
  CostModel cost_model_;
  CommunicatorSettings settings_;
  bool oversubscribed_ = false;
  bool striped_ = false;
  bool all_accept_host_ = false;
  std::unique_ptr<PlanCache> plan_cache_;
  std::shared_ptr<Telemetry> telemetry_;
  std::atomic<uint64_t>* position_ = nullptr;
  std::shared_ptr<BoardCell> board_;
  std::shared_ptr<DeferredRootChecks> deferred_root_checks_;
  std::shared_ptr<LateRootChecks> late_root_checks_;
  std::shared_ptr<const std::vector<int>> shown_ranks_;  // null: members show as themselves
  std::shared_ptr<const std::vector<ProbedRank>> probed_;  // null: the members
  struct RunCounters {
    std::atomic<bool> set_up{false};
    std::atomic<uint64_t> sampled_calls{0};
    // Far enough in the past that no call counts as back to back with it.
    std::atomic<std::chrono::steady_clock::rep> one_way_ended{std::chrono::steady_clock::duration::min().count() / 2};
    std::atomic<uint32_t> one_way_sequence{0};
  };
  std::unique_ptr<RunCounters> run_counters_ = std::make_unique<RunCounters>();
  // Last, so a backend's state (NCCL's communicators) goes first.
  std::unique_ptr<BackendStates> backend_states_;
};

// The group of a Context split from `parent` by the split collective number
// `sequence` with `color`: equal on every member of the child, different
// from the parent's and (with overwhelming probability) from any other group.
uint64_t child_group(uint64_t parent, uint32_t sequence, int color);

}  // namespace chorus::algorithms
