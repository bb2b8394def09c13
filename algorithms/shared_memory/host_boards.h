// A board on every host of a Context that spans hosts, for the local phase
// of small allreduces and broadcasts ("hierarchical_board").
//
// Across hosts a small allreduce is a few round trips of the network: on
// messages, recursive doubling pays log2(P) rounds, of which the local ones
// cost a message each way through shared memory (send, receive, the
// progress thread, a completion: 5-20 us on the 2-core VM) where the board
// needs one cache line. So a Context whose hosts each hold the same number
// L >= 2 of its ranks gives every host a board of its own:
//   1. the ranks of each host allreduce on their host's board (every one of
//      them ends with the host's sum, the same bits on all, board.h);
//   2. the ranks of equal local rank, one per host (a "rail"), allreduce
//      those sums on messages, with the flat Plan the remote links favour
//      (the rails run side by side; each rail's members hold the same host
//      sums, and a Plan computes the same bits from the same inputs, so
//      every rail ends with the same result).
// No leader and no broadcast back: the network is paid once per rail, and
// nobody waits for a leader. The rails put L times the bytes on each
// uplink, so it serves only calls that fit the board in one shot
// (CHORUS_BOARD_BYTES); larger calls stay with the hierarchical Plans.
// An average is summed in both phases and divided once at the end, as the
// flat Plans do, so it rounds the same.
//
// Chosen by auto where its price is lowest: the slowest host board's model
// (measured at set-up, Board::measure; agreed by every rank) and the rail's Plan on the remote
// links, priced with the bytes of all L rails through the uplink. So every
// Context whose hosts each hold the same number L >= 2 of its ranks sets
// its host boards up in its first call, whatever that call is, as one
// host's board is: each host's ranks set their board up among themselves
// (board.h), then the whole Context agrees that every host has one (one
// helper allreduce). Where some host has none, auto passes the candidate
// by and a call naming it is refused alike on every member. (Stop 58 kept
// it named only: on the 2-core VM's network namespaces, four ranks spun on
// the board as if each host had two cores of its own. Since a rank counts
// every rank that may run on its cores, other hosts of its machine
// included (communicator.h: oversubscribed), they yield and it is the
// fastest candidate at 8 B-4 KiB there; benchmarks/README.md.)
//
// A broadcast runs on them too, by name only (host_boards.cc says why
// auto passes it by): the ranks of the root's local rank, one per host,
// carry the data across hosts on messages, then each host's board carries
// it from that rank to the others. It checks its root with no message of
// its own, as rooted calls on messages do (late_root_checks.h): the
// boards show the Context's root and the rail the root's host, so ranks
// that name different roots differ on one or the other, and its phases
// wait as the Context's call (LateRootChecks::Delegated), telling its root
// once they have waited kTellAfter. Both candidates' phases carry the
// chain (phase_call), and wait for the neighbours' words on an earlier
// rooted call as any call of the Context does.
//
// Errors: a host peer that runs the call on messages is a MismatchError at
// once (announce_on_board announces every other call on the host board
// too); a rail's messages carry the Context's group and the call's number,
// so a rail peer that runs something else is a mismatch on its messages.
// The host board and the rail are helper groups: their errors name the
// Context's ranks (Communicator::shown_rank), and the board's say which
// host's board it was.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "algorithms/execution/candidate.h"
#include "algorithms/execution/communicator.h"

namespace chorus::algorithms {

inline constexpr std::string_view kHierarchicalBoard = "hierarchical_board";

// A host's board and this rank's rail, agreed by the whole Context.
struct HostBoards {
  Communicator host;  // this host's ranks, with a board (its BoardCell)
  Communicator rail;  // the ranks of this local rank, one per host, in host order
  int host_index = 0;
  // Every host set its board up (agreed by every member).
  bool ready = false;
  // The slowest host's board model (Board::measure; each host measures its
  // own), agreed by every member: auto prices the candidate alike on every
  // host, or ranks of different hosts would choose different algorithms.
  double call_seconds = 0;
  double seconds_per_byte = 0;
};

std::span<const Candidate> host_board_candidates();

// Announces a call that runs on messages on this rank's host board, if the
// Communicator has host boards (board.h: announce_on_board).
void announce_on_host_board(const Communicator& communicator, const Call& call, uint32_t sequence);
// Settles the root checks of the broadcasts this rank's host board left
// (board.h: settle_board_checks).
void settle_host_board_checks(const Communicator& communicator, Deadline deadline);

}  // namespace chorus::algorithms
