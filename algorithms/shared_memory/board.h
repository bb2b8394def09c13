// The board: small collectives of the ranks of one host through memory they
// all map, instead of messages.
//
// A message costs a send and a receive on each side: the Plan, the
// executor, tag matching, a ring frame, a completion (thousands of
// instructions), where the hardware needs one cache line to travel. So a
// Communicator whose members all share one host, and whose transport shares
// memory with each of them (Device::create_shared_region), gets a board in
// its first collective: a region in which every member owns two slots, each
// a 32-byte header (a stamp, the call's signature, its root) followed by the
// data. An 8-byte allreduce writes one line (its data, then its stamp) and
// polls one line per peer, reducing the peers' data straight from their
// slots, in member order, so every member computes bit-identical results.
// Allreduce, broadcast, allgather, reduce_scatter and alltoall (fixed
// counts) and barrier run on it; a small broadcast on a ring of entries of
// its own, where the root does not wait (board_ring.cc).
//
// An allreduce past that size runs on the board too, in pieces as large as
// a slot (1 MiB at up to 4 members, less beyond, board_exchange.h), each
// piece one board call in two shots: every member copies its piece into its
// slot (but for its own chunk); member m reduces chunk m of its input and
// of every peer's slot into its own slot and stamps it; every member copies
// each chunk from the member that reduced it. Two waits per piece on the
// calling thread, where messages cost 2(N - 1) sends and receives through
// each rank's progress thread; measured 1.3-2x faster than messages at
// 8 KiB-64 MiB on 2 to 8 ranks (benchmarks/README.md).
//
// Why two slots are enough: a member writes slot n % 2 in board call n only
// after every peer finished call n - 2 (so read what it wrote there). In an
// allreduce, allgather or barrier that is free: having seen a peer arrive in
// call n - 1 means it finished n - 2. A broadcast's root waits for nobody, so it
// reads the peers' `finished` words when it must.
//
// What a board never gives up against messages: a peer that called
// something else is a MismatchError naming it (each slot carries the call's
// signature, and every call a member makes while the board exists, board
// or not, is announced in its line), a dead or aborted peer ends the wait
// with the Mesh's failure, a peer that never comes is the timeout naming the
// ranks that have not called the collective, and a long wait warns
// (CHORUS_STALL_WARNING_S) as the executor does.
//
// Setting up is part of a Context's first collective, whatever it is, which
// every member reaches alike (even one whose first call differs from the
// others', which is then reported as any mismatch): helper messages on a
// derived group, between ring neighbours only (connections on demand open
// no other pair); member 0 creates the region and broadcasts its
// description, the others open it, and all agree whether everyone did. Any
// "no" leaves the Context on messages for good, on every member alike.
// Only Contexts of 2 to 64 members on one host have one. Not at connect:
// a collective there would let a rank that is done and fails its first call
// fail a slower one inside connect (the store's exchanges cannot).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "algorithms/model/call.h"
#include "algorithms/execution/candidate.h"
#include "base/deadline.h"

namespace chorus::algorithms {

class Communicator;
class Board;
struct HostBoards;

// A Communicator's board: not set up, set up, or known not to work. Only the
// Contexts the application holds have one (helper groups made per call do not).
class BoardCell {
 public:
  BoardCell();
  ~BoardCell();
  BoardCell(const BoardCell&) = delete;
  BoardCell& operator=(const BoardCell&) = delete;

  enum class State : uint8_t { untried, ready, unusable };
  State state = State::untried;
  std::unique_ptr<Board> board;
  // A Context spanning hosts: a board on each host (host_boards.h); null: none.
  std::unique_ptr<HostBoards> host_boards;
};

// Gives the Communicator a board, set up on its first call: for the
// Contexts the application holds, not for helper groups made per call.
void enable_board(Communicator& communicator);
// Sets the board of a Communicator that enable_board gave a cell up (the
// first call's set-up, which every member runs alike); nothing where it was
// tried already.
void set_up_board(const Communicator& communicator, uint32_t sequence, Deadline deadline);
// Its board if it is set up; null otherwise.
Board* ready_board(const Communicator& communicator);

// The board's candidates (candidate.h): "board" (one shot: allreduce,
// broadcast, allgather of up to CHORUS_BOARD_BYTES, reduce_scatter and
// alltoall whose whole input fits it, and barrier) and
// "board_pieces" (allreduce of any size and broadcast past
// CHORUS_BOARD_BYTES, in pieces as large as a slot; allgather,
// reduce_scatter and alltoall of fixed counts, board_blocks.cc).
// They serve host calls on a Communicator whose board is set up, cost what
// the board's model says (measured at set-up, agreed by every member:
// Board::measure), and are set up on the Communicator's first call.
inline constexpr std::string_view kBoard = "board";
inline constexpr std::string_view kBoardPieces = "board_pieces";
// "board_direct": allgather and alltoall of fixed counts, each member
// reading its peers' buffers directly (process_vm_readv), where every
// member can (board_direct.cc); under `auto` from the sizes where that won.
inline constexpr std::string_view kBoardDirect = "board_direct";
std::span<const Candidate> board_candidates();

// Tells the board (if the Communicator has one) that this member is in
// collective `sequence` of `call`, which runs on messages: a member waiting
// on the board for the same number then fails with MismatchError at once.
// run.h calls it for every candidate but the board's own.
void announce_on_board(const Communicator& communicator, const Call& call, uint32_t sequence);

// Settles, waiting up to `deadline`, the root checks the board's small
// broadcasts left (board_ring.cc), as the Context ends: a disagreement
// throws MismatchError (and fails the Communicator). Nothing without a board.
void settle_board_checks(const Communicator& communicator, Deadline deadline);

}  // namespace chorus::algorithms
