// Boards per host under a Context that spans hosts (host_boards.h).
#include "algorithms/shared_memory/host_boards.h"

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/composition/hierarchy.h"
#include "algorithms/execution/helper_plan.h"
#include "algorithms/execution/late_root_checks.h"
#include "algorithms/execution/local_steps.h"
#include "algorithms/shared_memory/board.h"
#include "algorithms/shared_memory/board_exchange.h"
#include "base/error.h"
#include "base/log.h"
#include "memory/registry.h"

namespace chorus::algorithms {
namespace {

// The color of the helper group in which the members agree on the boards.
constexpr int kHostBoardsColor = 0x4842;  // "HB"

// The rails' helper calls, by the Plan each priced (run_helper_collective
// keeps a Plan per shape under these names).
constexpr std::string_view kRailAllreduce = "rail allreduce";
constexpr std::string_view kRailBroadcast = "rail broadcast";

// Every host holds the same number (2 or more) of the members, and there
// are two hosts or more: alike on every member.
bool has_uniform_hosts(const Communicator& communicator) {
  const Topology& topology = communicator.topology();
  if (topology.hosts() < 2 || communicator.settings().board_bytes == 0) return false;
  const size_t local = topology.ranks_on(0).size();
  for (int host = 1; host < topology.hosts(); ++host)
    if (topology.ranks_on(host).size() != local) return false;
  return local >= 2;
}

const HostBoards* host_boards_of(const Communicator& communicator) {
  // Null also for a helper group (no cell).
  const BoardCell* cell = communicator.board_cell();
  return cell ? cell->host_boards.get() : nullptr;
}

// Every member sets its host's board up, then the whole Context agrees
// that every host has one (the largest of "mine failed"). In the first call
// that names the candidate, which every member makes alike.
const HostBoards& set_up_host_boards(const Communicator& communicator, uint32_t sequence, Deadline deadline) {
  BoardCell& cell = *communicator.board_cell();
  const Topology& topology = communicator.topology();
  const int host = topology.host_of(communicator.rank());
  const int local_rank = topology.local_rank(communicator.rank());
  std::vector<int> rail_members;
  for (int h = 0; h < topology.hosts(); ++h) rail_members.push_back(topology.ranks_on(h)[static_cast<size_t>(local_rank)]);
  // Both share the Context's group: the liveness probes then read the
  // Context's position, and a rail's messages meet a peer's Plan for the
  // same call as a mismatch rather than never meeting it.
  cell.host_boards = std::make_unique<HostBoards>(HostBoards{
      .host = communicator.subgroup(topology.ranks_on(host), communicator.group(), /*traced=*/false),
      .rail = communicator.subgroup(rail_members, communicator.group(), /*traced=*/false),
      .host_index = host});
  HostBoards& boards = *cell.host_boards;
  enable_board(boards.host);
  set_up_board(boards.host, sequence, deadline);
  const Board* board = ready_board(boards.host);
  // The largest over the Context of: whether a host has no board, and its
  // board's model (max is exact, so every member ends with the same bits).
  std::array<double, 3> agreed{1, 0, 0};
  if (board) agreed = {0, board->model().call_seconds, board->model().seconds_per_byte};
  std::vector<int> everyone(static_cast<size_t>(communicator.size()));
  for (int member = 0; member < communicator.size(); ++member) everyone[static_cast<size_t>(member)] = member;
  const Communicator agreement = communicator.subgroup(
      everyone, child_group(communicator.group(), sequence, kHostBoardsColor), /*traced=*/false);
  run_helper_collective(agreement,
                        make_call(Collective::allreduce, agreement.rank(), agreement.size(), agreed.size(),
                                  DataType::float64, ReduceOp::max, 0, true),
                        agreed.data(), agreed.data(), "ring", sequence, deadline);
  boards.ready = agreed[0] == 0;
  boards.call_seconds = agreed[1];
  boards.seconds_per_byte = agreed[2];
  CHORUS_LOG(debug, communicator.rank(), "host boards: ", topology.hosts(), " hosts of ", boards.host.size(),
             " ranks, ", boards.ready ? "each with a board" : "not every one with a board");
  return boards;
}

// A host call of up to CHORUS_BOARD_BYTES on a Context whose host boards
// are (or will be, in its first call) set up on every host.
bool fits_host_boards(const Communicator& communicator, const Call& call) {
  const HostBoards* boards = host_boards_of(communicator);
  return communicator.board_cell() && has_uniform_hosts(communicator) && (!boards || boards->ready) &&
         call.memory.on_host() && call.count > 0 && call.bytes() <= communicator.settings().board_bytes;
}

bool serves_on_host_boards(const Candidate&, const Communicator& communicator, const Call& call) {
  return call.collective == Collective::allreduce && fits_host_boards(communicator, call);
}

// A broadcast's phases check its root with no message of their own (below):
// only where the Context's late checks cover it.
bool serves_broadcast_on_host_boards(const Candidate&, const Communicator& communicator, const Call& call) {
  return call.collective == Collective::broadcast && fits_host_boards(communicator, call) &&
         LateRootChecks::covers(communicator, call);
}

Call rail_call_of(const HostBoards& boards, const Call& call) {
  Call across = phase_call(call, Collective::allreduce, boards.host_index, boards.rail.size(), call.count, 0, true);
  across.group_digest = call.group_digest;
  if (across.op == ReduceOp::avg) across.op = ReduceOp::sum;
  return across;
}

// The rails' Plan: the remote links' cheapest for the load the rails put on
// them together. Each host's L ranks send through its uplink at once, so
// the rail is priced with L times its bytes (as recursive doubling prices a
// crossing round, recursive_doubling_allreduce.cc); what runs is that Plan.
PhaseCost rail_plan(const HostBoards& boards, const Communicator& communicator, const Call& across) {
  Call load = across;
  load.count *= static_cast<size_t>(boards.host.size());
  return cheapest_flat(load, communicator.cost_model().at(LinkLevel::remote));
}

// The host boards' call as the slowest host's model prices it (measured
// when it was set up, Board::measure: the fastest of a few calls, and a
// byte as an allreduce moves it; agreed by the whole Context), then the
// rail's Plan. Before the boards are set up (a Context's first call sets
// them up) nothing is known: auto passes it by.
double host_boards_cost(const Candidate&, const Communicator& communicator, const Call& call) {
  const HostBoards* boards = host_boards_of(communicator);
  if (!boards || !boards->ready) return std::numeric_limits<double>::infinity();
  const double local = boards->call_seconds + static_cast<double>(call.bytes()) * boards->seconds_per_byte;
  return local + rail_plan(*boards, communicator, rail_call_of(*boards, call)).seconds;
}

// Which host's board, and its members as the Context numbers them (the
// board's own words name them already: Communicator::shown_rank).
[[noreturn]] void rethrow_naming_ranks(const HostBoards& boards) {
  std::string ranks;
  for (int member = 0; member < boards.host.size(); ++member)
    ranks += cat(member == 0 ? "" : ", ", boards.host.shown_rank(member));
  const std::string where = cat(" (on the board of host ", boards.host_index, ": this Context's ranks ", ranks, ")");
  try {
    throw;
  } catch (const MismatchError& error) {
    throw MismatchError(error.what() + where);
  } catch (const TimeoutError& error) {
    throw TimeoutError(error.what() + where);
  }
}

// With its errors in the Context's ranks.
void set_up_naming_ranks(const Communicator& communicator, uint32_t sequence, Deadline deadline) {
  try {
    set_up_host_boards(communicator, sequence, deadline);
  } catch (const MismatchError&) {
    rethrow_naming_ranks(*host_boards_of(communicator));
  } catch (const TimeoutError&) {
    rethrow_naming_ranks(*host_boards_of(communicator));
  }
}

// Every Context whose hosts each hold the same number (2 or more) of its
// ranks sets its host boards up in its first call, whatever that call is,
// as one host's board is (board.h): auto prices the candidate by the
// boards' model, which only set-up measures.
void set_up_at_first_call(const Communicator& communicator, uint32_t sequence, Deadline deadline) {
  if (communicator.board_cell() && !host_boards_of(communicator) && has_uniform_hosts(communicator))
    set_up_naming_ranks(communicator, sequence, deadline);
}

// The Context's host boards, set up on every host.
const HostBoards& ready_host_boards(const CandidateRun& run) {
  // A Context whose first call came before it was enabled (none today).
  if (!host_boards_of(run.communicator)) set_up_naming_ranks(run.communicator, run.sequence, run.deadline);
  const HostBoards& boards = *host_boards_of(run.communicator);
  if (!boards.ready)
    throw InvalidArgument(cat("rank ", run.communicator.rank(), ": ", to_string(run.call.collective), " algorithm '",
                              kHierarchicalBoard, "' cannot run: some host of this Context could not set up a board ",
                              "(CHORUS_LOG=debug says why on its ranks)"));
  return boards;
}

Moved run_on_host_boards(const Candidate&, const CandidateRun& run) {
  const Call& call = run.call;
  const HostBoards& boards = ready_host_boards(run);
  // Its phases wait as the call would: for the neighbours' words on an
  // earlier rooted call that left some rank waiting (late_root_checks.h).
  const LateRootChecks::Delegation delegation{run.communicator.late_root_checks(), &run.communicator, run.sequence};
  std::optional<LateRootChecks::Delegated> delegated;
  if (delegation.checks) delegated.emplace(delegation);
  Call local = phase_call(call, Collective::allreduce, boards.host.rank(), boards.host.size(), call.count, 0,
                          call.in_place);
  local.group_digest = call.group_digest;
  if (local.op == ReduceOp::avg) local.op = ReduceOp::sum;
  try {
    ready_board(boards.host)->allreduce(boards.host, local, run.input, run.output, run.sequence, run.deadline);
  } catch (const MismatchError&) {
    rethrow_naming_ranks(boards);
  } catch (const TimeoutError&) {
    rethrow_naming_ranks(boards);
  }
  // The Plan the cost priced (the remote links' cheapest), not the rail
  // Communicator's own choice.
  const HelperPlanChoice priced = [&](const Call& across) {
    return rail_plan(boards, run.communicator, across).algorithm;
  };
  run_helper_collective(boards.rail, rail_call_of(boards, call), run.output, run.output, kRailAllreduce, priced,
                        run.sequence, run.deadline);
  if (call.op == ReduceOp::avg) finish_collective(call, run.output, memory_backend(call.memory));
  // As the board counts its call, and the rail's as an allreduce of H
  // members moves at the least (2 (H - 1) / H of the buffer).
  const uint64_t bytes = call.bytes();
  const auto local_peers = static_cast<uint64_t>(boards.host.size() - 1);
  const auto hosts = static_cast<uint64_t>(boards.rail.size());
  const uint64_t moved = bytes * local_peers + 2 * bytes * (hosts - 1) / hosts;
  return {moved, moved};
}

// The broadcast: the root's rail (the ranks of the root's local rank, one
// per host) carries the data across hosts on messages, then every host's
// board carries it from that rank to the others. One uplink crossing per
// host, and on each host one line written and read, where `hierarchical`
// sends a shared-memory message to each local rank.
//
// The root is checked with no message of its own, as a broadcast on
// messages is (late_root_checks.h): the board's slots and entries carry
// the Context's root whole (Board::broadcast shows call.root and reads
// from `source`), so the members of a host that name different roots
// differ on the board; the rail's frames carry the root's host, and only
// ranks of the root's local rank are on it, so two rail members that name
// different roots differ there. Either way no rank takes data from a rank
// that named another root. Ranks that finish with different roots fail
// the next call (its phases carry the chain, phase_call), and a wait that
// a disagreement makes endless (a rail member waiting for a rank that is
// not on the rail) tells the Context's neighbour after kTellAfter, as
// this call's own wait would (LateRootChecks::Delegated).
Call rail_broadcast_of(const HostBoards& boards, const Communicator& communicator, const Call& call) {
  Call across = phase_call(call, Collective::broadcast, boards.host_index, boards.rail.size(), call.count,
                           communicator.topology().host_of(call.root), true);
  across.group_digest = call.group_digest;
  return across;
}

// Named only: measured on the 2-core VM (2 hosts x 2 ranks in network
// namespaces, back to back), it took 1.08-1.47x Open MPI's time where
// `chain` took 0.72-1.05 and `hierarchical` 0.94-1.70 (benchmarks/
// README.md, stop 61; why was not established). auto passes it by.
double host_boards_broadcast_cost(const Candidate&, const Communicator&, const Call&) {
  return std::numeric_limits<double>::infinity();
}

Moved run_broadcast_on_host_boards(const Candidate&, const CandidateRun& run) {
  const Call& call = run.call;
  const HostBoards& boards = ready_host_boards(run);
  const int root_local = run.communicator.topology().local_rank(call.root);
  // Remembered for the neighbours' words, as the executor remembers a
  // covered call on messages; the phases' waits are this call's.
  LateRootChecks& late = *run.communicator.late_root_checks();
  late.record(run.communicator, call, run.sequence);
  const LateRootChecks::Delegation delegation{&late, &run.communicator, run.sequence};
  const LateRootChecks::Delegated delegated(delegation);
  const uint64_t bytes = call.bytes();
  const bool on_rail = boards.host.rank() == root_local;
  Moved moved;
  const auto across_hosts = [&] {
    const Call across = rail_broadcast_of(boards, run.communicator, call);
    const HelperPlanChoice priced = [&](const Call& shape) {
      return cheapest_flat(shape, run.communicator.cost_model().at(LinkLevel::remote)).algorithm;
    };
    try {
      run_helper_collective(boards.rail, across, run.output, run.output, kRailBroadcast, priced, run.sequence,
                            run.deadline);
    } catch (const MismatchError& error) {
      throw MismatchError(cat(error.what(), " (among the ranks of local rank ", root_local,
                              ", one per host, where a root is a host's number)"));
    }
    // As a flat broadcast that sends every host a copy from the root.
    if (across.rank == across.root) {
      moved.sent += bytes * static_cast<uint64_t>(boards.rail.size() - 1);
    } else {
      moved.received += bytes;
    }
  };
  const auto on_this_host = [&] {
    Call local = phase_call(call, Collective::broadcast, boards.host.rank(), boards.host.size(), call.count,
                            call.root, true);
    local.group_digest = call.group_digest;
    try {
      ready_board(boards.host)->broadcast(boards.host, local, run.output, run.sequence, run.deadline, root_local);
    } catch (const MismatchError&) {
      rethrow_naming_ranks(boards);
    } catch (const TimeoutError&) {
      rethrow_naming_ranks(boards);
    }
    if (on_rail) {
      moved.sent += bytes * static_cast<uint64_t>(boards.host.size() - 1);
    } else {
      moved.received += bytes;
    }
  };
  // The root's host needs nothing from the rail: its board goes first, so
  // that its other ranks do not wait for the message across hosts to leave.
  if (run.communicator.rank() == call.root) {
    on_this_host();
    across_hosts();
  } else {
    if (on_rail) across_hosts();
    on_this_host();
  }
  return moved;
}

std::string why_not_host_boards(const Candidate& self, const Communicator& communicator, const Call& call) {
  const std::string where = cat("rank ", communicator.rank(), ": ", to_string(call.collective), " algorithm '",
                                self.name, "' runs on a board on every host, ");
  const HostBoards* boards = host_boards_of(communicator);
  if (!communicator.board_cell() || !has_uniform_hosts(communicator))
    return where + cat("which this Context has not (it needs two hosts or more, each holding the same number of its ",
                       "ranks, at least 2, sharing memory; CHORUS_BOARD_BYTES not 0; topology: ",
                       communicator.topology().describe(), ")");
  if (boards && !boards->ready) return where + "which some host of this Context could not set up";
  if (!call.memory.on_host()) return where + cat("which holds host memory, not ", to_string(call.memory));
  if (call.bytes() > communicator.settings().board_bytes)
    return where + cat("which takes ", to_string(call.collective), "s of up to ", communicator.settings().board_bytes,
                       " bytes (this call: ", call.bytes(), " bytes)");
  return where + cat("which checks a broadcast's root with no message of its own, on Contexts of up to ",
                     kMaxChainedRanks, " ranks (this one: ", communicator.size(), ")");
}

constexpr Candidate kHostBoardCandidates[] = {
    {.name = kHierarchicalBoard,
     .collective = Collective::allreduce,
     .serves = serves_on_host_boards,
     .cost_seconds = host_boards_cost,
     .run = run_on_host_boards,
     .why_not = why_not_host_boards,
     .first_call = set_up_at_first_call,
     .on_board = true},
    {.name = kHierarchicalBoard,
     .collective = Collective::broadcast,
     .serves = serves_broadcast_on_host_boards,
     .cost_seconds = host_boards_broadcast_cost,
     .run = run_broadcast_on_host_boards,
     .why_not = why_not_host_boards,
     .first_call = set_up_at_first_call,
     .on_board = true},
};

}  // namespace

std::span<const Candidate> host_board_candidates() { return kHostBoardCandidates; }

void announce_on_host_board(const Communicator& communicator, const Call& call, uint32_t sequence) {
  const HostBoards* boards = host_boards_of(communicator);
  if (!boards) return;
  Board* board = ready_board(boards->host);
  if (!board) return;
  board->announce(sequence, call_signature(call), call.root, false);
  // What arrived of the broadcasts' root checks, without waiting (board_ring.cc).
  if (board->ring_checks_pending()) board->settle_ring_checks(boards->host, Deadline::never(), 0);
}

void settle_host_board_checks(const Communicator& communicator, Deadline deadline) {
  const HostBoards* boards = host_boards_of(communicator);
  Board* board = boards ? ready_board(boards->host) : nullptr;
  if (!board || !board->ring_checks_pending()) return;
  try {
    board->settle_ring_checks(boards->host, deadline, std::numeric_limits<uint64_t>::max());
  } catch (const MismatchError&) {
    rethrow_naming_ranks(*boards);
  } catch (const TimeoutError&) {
    rethrow_naming_ranks(*boards);
  }
}

}  // namespace chorus::algorithms
