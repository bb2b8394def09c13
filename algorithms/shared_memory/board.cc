// Setting a board up and running calls on it (algorithms/shared_memory/board.h).
#include "algorithms/shared_memory/board.h"

#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "algorithms/shared_memory/board_exchange.h"
#include "algorithms/shared_memory/host_boards.h"
#include "algorithms/execution/communicator.h"
#include "algorithms/execution/helper_plan.h"
#include "algorithms/plans/flat_plans.h"
#include "algorithms/execution/telemetry.h"
#include "base/error.h"
#include "base/little_endian.h"
#include "base/log.h"
#include "transport/transport.h"

namespace chorus::algorithms {
namespace {

// The color of the helper group the set-up messages travel in (derived from
// the call's sequence, so no message is needed to agree on it).
constexpr int kBoardColor = 0x4244;  // "BD"

// Past this many members, reading every peer's line costs more than the
// log2(members) rounds of messages it replaces.
constexpr int kMaxBoardMembers = 64;
// Whether this Communicator may have a board at all: alike on every member.
bool may_have_board(const Communicator& communicator) {
  return communicator.settings().board_bytes > 0 && communicator.size() >= 2 &&
         communicator.size() <= kMaxBoardMembers && communicator.topology().hosts() == 1;
}

// One helper collective on `data` (the set-up's own messages), on ring
// neighbours only (chain, ring): with connections on demand it opens no
// pair the application's own ring would not.
void helper_collective(const Communicator& helpers, Collective collective, void* data, size_t count,
                       DataType type, ReduceOp op, uint32_t sequence, Deadline deadline) {
  const Call call = make_call(collective, helpers.rank(), helpers.size(), count, type, op, 0, true);
  run_helper_collective(helpers, call, data, data, collective == Collective::broadcast ? "chain" : "ring", sequence,
                        deadline);
}

// The device serving every peer, or null where peers are served by several
// (or by none that shares memory: that is create_shared_region's to say).
transport::Device* one_device(const Communicator& communicator) {
  transport::Device* device = nullptr;
  for (int member = 0; member < communicator.size(); ++member) {
    if (member == communicator.rank()) continue;
    transport::Device& serving = communicator.mesh().device_of(communicator.mesh_rank(member));
    if (device && device != &serving) return nullptr;
    device = &serving;
  }
  return device;
}

// How the cost model prices messages against how they run now: the
// predicted time of the cheapest Plan for `call` over its measured time
// (fastest of `timed_rounds` after one that warms up). The board's byte cost is
// measured by the clock, the messages' is the link probe's pair transfer
// priced by a formula; the board's, multiplied by this, is in the same
// terms as the Plans' costs it is compared with (on 4 ranks of the 2-core
// VM the formula priced a 4 MiB ring allreduce at 2.9 ms that took 5.8-7.5,
// and the board's 4.6 ms took 4.8-5.1).
//
// Each collective by its own: the formula is wrong by different factors
// for different Plans. At 2 ranks on the VM it priced a 4 MiB allreduce
// about 2x too high and a pairwise alltoall of 16 MiB a member about
// right, so the alltoall priced by the allreduce's factor lost to
// `pairwise` where the board was 1.3-1.5x faster.
// `input` and `output` hold what `call` needs (the board's measure() buffers).
double messages_model_scale(const Communicator& helpers, const Call& call, std::span<float> input,
                            std::span<float> output, uint32_t sequence, Deadline deadline, int timed_rounds = 2) {
  const Algorithm* plan = cheapest_flat_plan(call, helpers.cost_model());
  if (!plan) return 1;
  float* const result = call.in_place ? input.data() : output.data();
  double fastest = std::numeric_limits<double>::max();
  for (int round = 0; round < 1 + timed_rounds; ++round) {
    const Clock::time_point started = Clock::now();
    run_helper_collective(helpers, call, input.data(), result, plan->name, sequence, deadline);
    const double took = std::chrono::duration<double>(Clock::now() - started).count();
    if (round > 0) fastest = std::min(fastest, took);
  }
  return fastest > 0 ? plan->cost_seconds(call, helpers.cost_model()) / fastest : 1;
}

// The set-up (board.h): null where some member cannot take part, alike on
// every member. Failures of the helper collectives are the call's.
std::unique_ptr<Board> set_up(const Communicator& communicator, uint32_t sequence, Deadline deadline) {
  std::vector<int> everyone(static_cast<size_t>(communicator.size()));
  for (int member = 0; member < communicator.size(); ++member) everyone[static_cast<size_t>(member)] = member;
  // Untraced: the application's trace shows its own calls. The helpers'
  // calls carry the call's number, which their errors then name.
  // Two groups, so the broadcast's and the allreduce's messages never meet.
  const Communicator helpers = communicator.subgroup(
      everyone, child_group(communicator.group(), sequence, kBoardColor), /*traced=*/false);
  const Communicator agreement = communicator.subgroup(
      everyone, child_group(communicator.group(), sequence, kBoardColor + 1), /*traced=*/false);
  const int rank = communicator.rank();
  const size_t capacity = communicator.settings().board_bytes;
  const size_t slot_bytes = Board::slot_bytes(communicator.size(), capacity);
  const size_t bytes = Board::region_bytes(communicator.size(), slot_bytes);
  transport::Device* device = one_device(communicator);
  std::string why_not = device ? std::string() : "its peers are served by different transports";

  // Member 0 creates and describes: [1 if created][length][its capacity, 8
  // bytes][description]. A member whose CHORUS_BOARD_BYTES differs does not
  // take part, so every member runs the same calls on the board.
  constexpr size_t kCapacityAt = 2;
  constexpr size_t kDescriptionAt = kCapacityAt + 8;
  std::unique_ptr<transport::SharedRegion> region;
  std::array<std::byte, kDescriptionAt + transport::kMaxExportedMemoryBytes> message{};
  if (rank == 0 && device) {
    try {
      region = device->create_shared_region(bytes);
      if (!region) why_not = cat("the ", device->name(), " transport shares no memory");
    } catch (const Error& error) {
      why_not = error.what();
    }
    const std::vector<std::byte> description = region ? region->description() : std::vector<std::byte>();
    if (region && description.size() <= transport::kMaxExportedMemoryBytes) {
      message[0] = std::byte{1};
      message[1] = static_cast<std::byte>(description.size());
      store_le(message.data() + kCapacityAt, capacity, 8);
      std::memcpy(message.data() + kDescriptionAt, description.data(), description.size());
    }
  }
  helper_collective(helpers, Collective::broadcast, message.data(), message.size(), DataType::uint8, ReduceOp::sum,
                    sequence, deadline);
  const size_t their_capacity = load_le(message.data() + kCapacityAt, 8);
  if (rank != 0 && message[0] != std::byte{1} && why_not.empty()) why_not = "rank 0 could not make one";
  if (rank != 0 && message[0] == std::byte{1} && their_capacity != capacity)
    why_not = cat("rank 0 has CHORUS_BOARD_BYTES ", their_capacity, " and this rank ", capacity);
  else if (rank != 0 && message[0] == std::byte{1} && device) {
    const size_t length = std::min(static_cast<size_t>(message[1]), transport::kMaxExportedMemoryBytes);
    try {
      region = device->open_shared_region(communicator.mesh_rank(0), {message.data() + kDescriptionAt, length},
                                          bytes);
    } catch (const Error& error) {
      why_not = error.what();
    }
  }
  // Everyone agrees: the minimum of "I have it".
  uint8_t everyone_has_it = region ? 1 : 0;
  helper_collective(agreement, Collective::allreduce, &everyone_has_it, 1, DataType::uint8, ReduceOp::min, sequence,
                    deadline);
  if (!everyone_has_it) {
    CHORUS_LOG(debug, rank, "board: collectives stay on messages",
               why_not.empty() ? std::string(" (another rank could not take part)") : cat(": ", why_not));
    return nullptr;
  }
  // Every member has it mapped (the allreduce above says so): nobody else may open it.
  region->seal();
  auto board = std::make_unique<Board>(std::move(region), rank, communicator.size(), capacity, slot_bytes);
  // Measured as the links are at connect, and agreed as they are: the
  // slowest member's numbers, so every member's selection reads the same.
  // The board calls carry the number before this call's, which no call of
  // this Communicator has (a peer already in this call is then ahead).
  // One pair of buffers for every timing below: fresh pages are slow to
  // fault in on some VMs (0.5 GB/s on the project's).
  std::vector<float> data(board->measure_floats(), 1.0f), result(board->measure_floats());
  // Direct reads (board_direct.cc) where every member can read every
  // peer's memory: each publishes where a word of its own is, and, after a
  // board barrier, reads every peer's; all agree on the least.
  board->publish_identity();
  board->barrier(communicator,
                 make_call(Collective::barrier, rank, communicator.size(), 0, DataType::uint8, ReduceOp::sum, 0, false),
                 sequence - 1, deadline);
  uint8_t every_member_reads = board->can_read_every_peer() ? 1 : 0;
  helper_collective(agreement, Collective::allreduce, &every_member_reads, 1, DataType::uint8, ReduceOp::min,
                    sequence, deadline);
  if (every_member_reads) board->enable_direct_reads();
  BoardModel measured = board->measure(communicator, data, result, sequence - 1, deadline);
  const Communicator measurement = communicator.subgroup(
      everyone, child_group(communicator.group(), sequence, kBoardColor + 2), /*traced=*/false);
  // Its own group too: its calls and the agreement's never meet.
  const Communicator timing = communicator.subgroup(
      everyone, child_group(communicator.group(), sequence, kBoardColor + 3), /*traced=*/false);
  const int size = communicator.size();
  const size_t alltoall_block = measured.large_alltoall_bytes / (sizeof(float) * static_cast<size_t>(size));
  const auto allreduce_scale_at = [&](size_t bytes, int timed_rounds) {
    return messages_model_scale(
        timing, make_call(Collective::allreduce, rank, size, bytes / sizeof(float), DataType::float32, ReduceOp::sum, 0,
                          true),
        data, result, sequence, deadline, timed_rounds);
  };
  const double allreduce_scale = allreduce_scale_at(Board::kMeasuredBytes, 2);
  measured.seconds_per_byte *= allreduce_scale;
  // One timed round past the cache (Board::measure says why).
  measured.large_allreduce_seconds_per_byte *= measured.large_allreduce_bytes > Board::kMeasuredBytes
                                                   ? allreduce_scale_at(measured.large_allreduce_bytes, 1)
                                                   : allreduce_scale;
  // The messages' alltoall talks to every peer: with connections on demand
  // it would open pairs that the application's own calls may never need,
  // so there the alltoall takes the allreduce's factor (every member alike).
  uint8_t every_pair_open = size == 2 || communicator.mesh().fully_connected() ? 1 : 0;
  if (size > 2)
    helper_collective(agreement, Collective::allreduce, &every_pair_open, 1, DataType::uint8, ReduceOp::min,
                      sequence, deadline);
  const double alltoall_scale =
      every_pair_open ? messages_model_scale(timing,
                                             make_call(Collective::alltoall, rank, size, alltoall_block,
                                                       DataType::float32, ReduceOp::sum, 0, false),
                                             data, result, sequence, deadline)
                      : allreduce_scale;
  measured.small_alltoall_seconds_per_byte *= alltoall_scale;
  measured.alltoall_seconds_per_byte *= alltoall_scale;
  uint64_t model[6] = {static_cast<uint64_t>(measured.call_seconds * 1e12),
                       static_cast<uint64_t>(measured.seconds_per_byte * 1e15),
                       static_cast<uint64_t>(measured.large_allreduce_seconds_per_byte * 1e15),
                       static_cast<uint64_t>(measured.small_alltoall_seconds_per_byte * 1e15),
                       static_cast<uint64_t>(measured.alltoall_seconds_per_byte * 1e15),
                       static_cast<uint64_t>(measured.direct_ratio * 1e6)};
  helper_collective(measurement, Collective::allreduce, model, 6, DataType::uint64, ReduceOp::max, sequence,
                    deadline);
  board->set_model({.call_seconds = static_cast<double>(model[0]) * 1e-12,
                    .seconds_per_byte = static_cast<double>(model[1]) * 1e-15,
                    .large_allreduce_seconds_per_byte = static_cast<double>(model[2]) * 1e-15,
                    .large_allreduce_bytes = measured.large_allreduce_bytes,
                    .small_alltoall_seconds_per_byte = static_cast<double>(model[3]) * 1e-15,
                    .alltoall_seconds_per_byte = static_cast<double>(model[4]) * 1e-15,
                    .large_alltoall_bytes = measured.large_alltoall_bytes,
                    .direct_ratio = static_cast<double>(model[5]) * 1e-6});
  const BoardModel& agreed = board->model();
  CHORUS_LOG(debug, rank, "board: ", communicator.size(), " members, calls of up to ", capacity,
             " bytes through shared memory; measured ", agreed.call_seconds * 1e6, " us a call, ",
             agreed.seconds_per_byte * 1e12, " / ", agreed.large_allreduce_seconds_per_byte * 1e12,
             " ps a byte of an allreduce in pieces of ", Board::kMeasuredBytes, " / ", agreed.large_allreduce_bytes,
             " bytes, ",
             agreed.small_alltoall_seconds_per_byte * 1e12, " / ", agreed.alltoall_seconds_per_byte * 1e12,
             " ps a byte of a member's input to an alltoall of ", Board::kSmallAlltoallBytes, " / ",
             agreed.large_alltoall_bytes, " bytes",
             board->direct_reads() ? cat("; an alltoall of ", Board::kDirectAlltoallMinBytes,
                                         " bytes read directly took ", agreed.direct_ratio, "x the slots' time")
                                   : std::string("; no direct reads"));
  return board;
}

// What a board call counts as sent and received: the bytes peers read out
// of this member's slot, and those it reads out of theirs. Summed over the
// members, sent equals received, as on messages.
Moved bytes_moved(const Call& call, bool in_pieces) {
  const uint64_t bytes = call.bytes();
  const auto peers = static_cast<uint64_t>(call.size - 1);
  switch (call.collective) {
    case Collective::allreduce: {
      // In pieces: each member's chunk of every slot in, every chunk out.
      const uint64_t moved = in_pieces ? 2 * bytes * peers / (peers + 1) : bytes * peers;
      return {moved, moved};
    }
    case Collective::allgather:
    case Collective::reduce_scatter:
    case Collective::alltoall: return {bytes * peers, bytes * peers};
    case Collective::broadcast: return call.rank == call.root ? Moved{bytes * peers, 0} : Moved{0, bytes};
    default: return {};
  }
}

// ---------------------------------------------------------------- the candidates

// One shot: a call that fits a slot, in one board call.
bool serves_one_shot(const Candidate&, const Communicator& communicator, const Call& call) {
  const Board* board = ready_board(communicator);
  if (!board || !call.memory.on_host()) return false;
  switch (call.collective) {
    case Collective::allreduce: return call.count > 0 && call.bytes() <= board->capacity();
    case Collective::broadcast: return call.count > 0 && call.bytes() <= board->one_shot_broadcast_bytes();
    // Each rank's block in its own slot (fixed counts only).
    case Collective::allgather: return !call.variable() && call.count > 0 && call.bytes() <= board->capacity();
    // The whole input but this member's own block in its own slot.
    case Collective::reduce_scatter:
    case Collective::alltoall:
      return !call.variable() && call.count > 0 &&
             call.bytes() <= board->capacity() / static_cast<size_t>(call.size - 1);
    case Collective::barrier: return true;
    default: return false;
  }
}

bool serves_pieces(const Candidate&, const Communicator& communicator, const Call& call) {
  const Board* board = ready_board(communicator);
  if (!board || !call.memory.on_host() || call.count == 0) return false;
  switch (call.collective) {
    case Collective::allreduce: return true;
    // What one shot (the ring, or a slot) does not take.
    case Collective::broadcast: return call.bytes() > board->one_shot_broadcast_bytes();
    case Collective::allgather:
    case Collective::reduce_scatter:
    case Collective::alltoall: return !call.variable();
    default: return false;
  }
}

// From the board's model, measured when it was set up (Board::measure):
// one board call, and each byte as a piece of an allreduce moves it, or,
// for an alltoall, as a piece of an alltoall does.
double one_shot_cost(const Candidate&, const Communicator& communicator, const Call& call) {
  const BoardModel& model = ready_board(communicator)->model();
  const double bytes = static_cast<double>(call.bytes());
  switch (call.collective) {
    // Every member reads every slot: the peers' data and its own, once.
    case Collective::allgather: return model.call_seconds + bytes * call.size * model.seconds_per_byte / 2;
    // The peers' blocks into the slot, then a block from every slot
    // (summed, for reduce_scatter): about the whole input's bytes.
    case Collective::reduce_scatter: return model.call_seconds + bytes * call.size * model.seconds_per_byte;
    case Collective::alltoall: {
      const size_t input = call.bytes() * static_cast<size_t>(call.size);
      return model.call_seconds + static_cast<double>(input) * model.alltoall_byte_seconds(input);
    }
    case Collective::broadcast: return model.call_seconds + bytes * model.seconds_per_byte / 2;
    case Collective::barrier: return model.call_seconds;
    default: return model.call_seconds + bytes * model.seconds_per_byte;
  }
}

double pieces_cost(const Candidate&, const Communicator& communicator, const Call& call) {
  const Board& board = *ready_board(communicator);
  const BoardModel& model = board.model();
  if (call.collective == Collective::broadcast) {
    // A one-shot broadcast's bytes, in as many board calls as pieces.
    const double pieces = std::ceil(static_cast<double>(call.bytes()) / static_cast<double>(board.piece_bytes()));
    return pieces * model.call_seconds + static_cast<double>(call.bytes()) * model.seconds_per_byte / 2;
  }
  if (call.collective != Collective::allreduce) {
    // One board call a piece; the bytes as the one shot moves them.
    const double pieces = std::ceil(static_cast<double>(call.count) / static_cast<double>(board.block_piece_count(call)));
    // A byte of an alltoall as measured; allgather and reduce_scatter by
    // the allreduce's byte (half of it for allgather, which copies one
    // block out). Priced by the alltoall's byte, reduce_scatter went to the
    // board at 2 ranks from 256 KiB, 1.1-1.2x slower there than the
    // messages' recursive halving and ring (the Xeon). The allreduce's byte
    // at the call's size: past the caches, as for the allreduce, the
    // messages slowed down more than the pieces (a 16 MiB reduce_scatter at
    // 2 ranks on the EPYC took 1.4x the pieces' time on the ring).
    const size_t total = call.bytes() * static_cast<size_t>(call.size);
    const double bytes = static_cast<double>(total);
    switch (call.collective) {
      case Collective::alltoall: return pieces * model.call_seconds + bytes * model.alltoall_byte_seconds(total);
      case Collective::allgather:
        return pieces * model.call_seconds + bytes * model.allreduce_byte_seconds(total) / 2;
      default: return pieces * model.call_seconds + bytes * model.allreduce_byte_seconds(total);
    }
  }
  const double pieces = std::ceil(static_cast<double>(call.bytes()) / static_cast<double>(board.piece_bytes()));
  const size_t bytes = call.bytes();
  return 2 * pieces * model.call_seconds + static_cast<double>(bytes) * model.allreduce_byte_seconds(bytes);
}

// Direct reads (board_direct.cc): allgather and alltoall of fixed counts,
// where every member reads every peer's memory.
bool serves_direct(const Candidate&, const Communicator& communicator, const Call& call) {
  const Board* board = ready_board(communicator);
  return board && board->direct_reads() && call.memory.on_host() && call.count > 0 && !call.variable() &&
         (call.collective == Collective::allgather || call.collective == Collective::alltoall);
}

// An alltoall from Board::kDirectAlltoallMinBytes: the board's own cost
// for the call, in one shot where it fits, else in pieces, times what
// direct reads took over the slots in an alltoall of that size, measured
// at set-up (BoardModel::direct_ratio). An allgather of 3 or more
// members, and a smaller call, only by name: an allgather through the
// slots copies one block per member where an alltoall packs every peer's,
// so the alltoall's ratio flatters direct reads there (on 4 ranks of the
// 2-core Xeon a direct allgather of 1-16 MiB on fresh inputs took
// 1.26-1.53x the slots' time, where the alltoall's took 0.88-0.99x). Of
// 2 members, an allgather moves what an alltoall of the same input does,
// on the slots and directly: it takes the alltoall's ratio (at 2 ranks on
// fresh inputs 2-16 MiB then took 0.80-0.89 of the time, stop 72).
double direct_cost(const Candidate& self, const Communicator& communicator, const Call& call) {
  const Board& board = *ready_board(communicator);
  const size_t input = call.bytes() * static_cast<size_t>(call.size);
  const bool priced = call.collective == Collective::alltoall ||
                      (call.collective == Collective::allgather && call.size == 2);
  if (!priced || input < Board::kDirectAlltoallMinBytes) return std::numeric_limits<double>::infinity();
  const double slots = serves_one_shot(self, communicator, call) ? one_shot_cost(self, communicator, call)
                                                                 : pieces_cost(self, communicator, call);
  return slots * board.model().direct_ratio;
}

Moved run_direct(const Candidate&, const CandidateRun& run) {
  ready_board(run.communicator)->direct_blocks(run.communicator, run.call, run.input, run.output, run.sequence,
                                               run.deadline);
  return bytes_moved(run.call, false);
}

Moved run_one_shot(const Candidate&, const CandidateRun& run) {
  Board& board = *ready_board(run.communicator);
  switch (run.call.collective) {
    case Collective::allreduce:
      board.allreduce(run.communicator, run.call, run.input, run.output, run.sequence, run.deadline);
      break;
    case Collective::broadcast:
      board.broadcast(run.communicator, run.call, run.output, run.sequence, run.deadline, run.call.root);
      break;
    case Collective::allgather:
    case Collective::reduce_scatter:
    case Collective::alltoall:
      board.blocks(run.communicator, run.call, run.input, run.output, run.sequence, run.deadline);
      break;
    default: board.barrier(run.communicator, run.call, run.sequence, run.deadline); break;
  }
  return bytes_moved(run.call, false);
}

Moved run_pieces(const Candidate&, const CandidateRun& run) {
  Board& board = *ready_board(run.communicator);
  if (run.call.collective == Collective::broadcast) {
    board.broadcast_in_pieces(run.communicator, run.call, run.output, run.sequence, run.deadline);
    return bytes_moved(run.call, false);
  }
  if (run.call.collective != Collective::allreduce) {
    board.blocks(run.communicator, run.call, run.input, run.output, run.sequence, run.deadline);
    return bytes_moved(run.call, false);
  }
  board.allreduce_in_pieces(run.communicator, run.call, run.input, run.output, run.sequence, run.deadline);
  return bytes_moved(run.call, true);
}

std::string why_not(const Candidate& self, const Communicator& communicator, const Call& call) {
  const BoardCell* cell = communicator.board_cell();
  const std::string where = cat("rank ", communicator.rank(), ": ", to_string(call.collective), " algorithm '",
                                self.name, "' runs on the shared-memory board, ");
  if (!cell) return where + "which only the Contexts the application holds have";
  if (cell->state != BoardCell::State::ready)
    return where + cat("which this Context has not (its ", communicator.size(),
                       " members must share one host and memory; CHORUS_BOARD_BYTES not 0)");
  if (!call.memory.on_host()) return where + cat("which holds host memory, not ", to_string(call.memory));
  if (self.name == kBoardDirect)
    return where + (cell->board->direct_reads()
                        ? cat("which reads peers' memory directly for allgather and alltoall of fixed counts",
                              " (this call: ", to_string(call.collective),
                              call.variable() ? std::string(" of variable counts") : std::string(), ")")
                        : std::string("whose members cannot read each other's memory (process_vm_readv: another "
                                      "user, a seccomp filter, Yama's ptrace scope or another pid namespace)"));
  if (self.name == kBoardPieces)
    return where + cat("which takes allreduce, broadcast past ", cell->board->one_shot_broadcast_bytes(),
                       " bytes, and allgather, reduce_scatter and alltoall of fixed counts (this call: ",
                       call.variable() ? std::string("variable counts") : cat(call.bytes(), " bytes"), ")");
  if (call.collective == Collective::broadcast)
    return where + cat("which takes a broadcast of up to ", cell->board->one_shot_broadcast_bytes(),
                       " bytes (this call: ", cat(call.bytes(), " bytes"), ")");
  if (call.collective != Collective::reduce_scatter && call.collective != Collective::alltoall)
    return where + cat("which takes allreduce, allgather",
                       " of up to ", cell->board->capacity(), " bytes, broadcast of up to ",
                       cell->board->one_shot_broadcast_bytes(), " bytes and barrier (this call: ",
                       call.variable() ? std::string("variable counts") : cat(call.bytes(), " bytes"), ")");
  return where + cat("which takes reduce_scatter and alltoall of fixed counts whose input for the other ranks (",
                     call.size - 1, " blocks) is at most ", cell->board->capacity(), " bytes (this call: ",
                     call.variable() ? std::string("variable counts")
                                     : cat(call.bytes() * static_cast<size_t>(call.size - 1), " bytes"),
                     ")");
}

constexpr Candidate kBoardCandidates[] = {
    {.name = kBoard, .collective = Collective::allreduce, .serves = serves_one_shot, .cost_seconds = one_shot_cost,
     .run = run_one_shot, .why_not = why_not, .first_call = set_up_board, .on_board = true},
    {.name = kBoardPieces, .collective = Collective::allreduce, .serves = serves_pieces, .cost_seconds = pieces_cost,
     .run = run_pieces, .why_not = why_not, .on_board = true},
    {.name = kBoard, .collective = Collective::broadcast, .serves = serves_one_shot, .cost_seconds = one_shot_cost,
     .run = run_one_shot, .why_not = why_not, .on_board = true},
    {.name = kBoardPieces, .collective = Collective::broadcast, .serves = serves_pieces, .cost_seconds = pieces_cost,
     .run = run_pieces, .why_not = why_not, .on_board = true},
    {.name = kBoard, .collective = Collective::allgather, .serves = serves_one_shot, .cost_seconds = one_shot_cost,
     .run = run_one_shot, .why_not = why_not, .on_board = true},
    {.name = kBoard, .collective = Collective::barrier, .serves = serves_one_shot, .cost_seconds = one_shot_cost,
     .run = run_one_shot, .why_not = why_not, .on_board = true},
    {.name = kBoard, .collective = Collective::reduce_scatter, .serves = serves_one_shot,
     .cost_seconds = one_shot_cost, .run = run_one_shot, .why_not = why_not, .on_board = true},
    {.name = kBoard, .collective = Collective::alltoall, .serves = serves_one_shot, .cost_seconds = one_shot_cost,
     .run = run_one_shot, .why_not = why_not, .on_board = true},
    {.name = kBoardPieces, .collective = Collective::allgather, .serves = serves_pieces, .cost_seconds = pieces_cost,
     .run = run_pieces, .why_not = why_not, .on_board = true},
    {.name = kBoardPieces, .collective = Collective::reduce_scatter, .serves = serves_pieces,
     .cost_seconds = pieces_cost, .run = run_pieces, .why_not = why_not, .on_board = true},
    {.name = kBoardPieces, .collective = Collective::alltoall, .serves = serves_pieces, .cost_seconds = pieces_cost,
     .run = run_pieces, .why_not = why_not, .on_board = true},
    {.name = kBoardDirect, .collective = Collective::allgather, .serves = serves_direct, .cost_seconds = direct_cost,
     .run = run_direct, .why_not = why_not, .on_board = true},
    {.name = kBoardDirect, .collective = Collective::alltoall, .serves = serves_direct, .cost_seconds = direct_cost,
     .run = run_direct, .why_not = why_not, .on_board = true},
};

}  // namespace

BoardCell::BoardCell() = default;
BoardCell::~BoardCell() = default;

void enable_board(Communicator& communicator) {
  if (!communicator.board_cell()) communicator.set_board_cell(std::make_shared<BoardCell>());
}

void set_up_board(const Communicator& communicator, uint32_t sequence, Deadline deadline) {
  BoardCell* cell = communicator.board_cell();
  if (!cell || cell->state != BoardCell::State::untried) return;
  if (may_have_board(communicator)) cell->board = set_up(communicator, sequence, deadline);
  cell->state = cell->board ? BoardCell::State::ready : BoardCell::State::unusable;
}

Board* ready_board(const Communicator& communicator) {
  BoardCell* cell = communicator.board_cell();
  return cell && cell->state == BoardCell::State::ready ? cell->board.get() : nullptr;
}

std::span<const Candidate> board_candidates() { return kBoardCandidates; }

void announce_on_board(const Communicator& communicator, const Call& call, uint32_t sequence) {
  BoardCell* cell = communicator.board_cell();
  if (cell && cell->host_boards) announce_on_host_board(communicator, call, sequence);
  if (!cell || !cell->board) return;
  cell->board->announce(sequence, call_signature(call), call.root, /*on_board=*/false);
  // What arrived of the ring's root checks (board_ring.cc), without waiting.
  if (cell->board->ring_checks_pending()) cell->board->settle_ring_checks(communicator, Deadline::never(), 0);
}

void settle_board_checks(const Communicator& communicator, Deadline deadline) {
  BoardCell* cell = communicator.board_cell();
  if (cell && cell->host_boards) settle_host_board_checks(communicator, deadline);
  if (!cell || !cell->board || !cell->board->ring_checks_pending()) return;
  cell->board->settle_ring_checks(communicator, deadline, std::numeric_limits<uint64_t>::max());
}

}  // namespace chorus::algorithms
