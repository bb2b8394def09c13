// Setting a board up and running calls on it (algorithms/board.h).
#include "algorithms/board.h"

#include <array>
#include <chrono>
#include <cstring>
#include <exception>
#include <utility>
#include <vector>

#include "algorithms/board_exchange.h"
#include "algorithms/communicator.h"
#include "algorithms/run.h"
#include "algorithms/telemetry.h"
#include "base/error.h"
#include "base/little_endian.h"
#include "base/log.h"
#include "transport/transport.h"

namespace chorus::algorithms {
namespace {

// The color of the helper group the set-up messages travel in (derived from
// the call's sequence, so no message is needed to agree on it).
constexpr int kBoardColor = 0x4244;  // "BD"

// One board call in this many is timed for the statistics (run_on_board).
constexpr uint64_t kTimedEvery = 64;
// Past this many members, reading every peer's line costs more than the
// log2(members) rounds of messages it replaces.
constexpr int kMaxBoardMembers = 64;
// Whether this Communicator may have a board at all: alike on every member.
bool may_have_board(const Communicator& communicator) {
  return communicator.settings().board_bytes > 0 && communicator.size() >= 2 &&
         communicator.size() <= kMaxBoardMembers && communicator.topology().hosts() == 1;
}

bool fits(const Communicator& communicator, const Call& call, const std::string& algorithm) {
  const size_t limit = communicator.board_cell()->board->capacity();
  if (algorithm != "auto" || !call.memory.on_host()) return false;
  const auto& overrides = communicator.settings().algorithm_overrides;
  if (!overrides.empty() && overrides.contains(call.collective)) return false;
  switch (call.collective) {
    // Larger ones in pieces (board_exchange.h): measured faster than the
    // messages at every size and rank count (benchmarks/README.md).
    case Collective::allreduce: return call.count > 0;
    case Collective::broadcast: return call.count > 0 && call.bytes() <= limit;
    // Each rank's block in its own slot (fixed counts only).
    case Collective::allgather: return !call.variable() && call.count > 0 && call.bytes() <= limit;
    case Collective::barrier: return true;
    default: return false;
  }
}

// One helper collective on `data` (the set-up's own messages), on ring
// neighbours only (chain, ring): with connections on demand it opens no
// pair the application's own ring would not.
void helper_collective(const Communicator& helpers, Collective collective, void* data, size_t count,
                       DataType type, ReduceOp op, uint32_t sequence, Deadline deadline) {
  Call call = make_call(collective, helpers.rank(), helpers.size(), count, type, op, 0, true);
  call.topology = helpers.shared_topology();
  run_collective(helpers, call, data, data, collective == Collective::broadcast ? "chain" : "ring", sequence,
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
  CHORUS_LOG(debug, rank, "board: ", communicator.size(), " members, calls of up to ", capacity,
             " bytes through shared memory");
  return std::make_unique<Board>(std::move(region), rank, communicator.size(), capacity, slot_bytes);
}

// What a board call counts as sent and received: the bytes peers read out
// of this member's slot, and those it reads out of theirs. Summed over the
// members, sent equals received, as on messages.
std::pair<uint64_t, uint64_t> bytes_moved(const Call& call, size_t one_shot_bytes) {
  const uint64_t bytes = call.bytes();
  const auto peers = static_cast<uint64_t>(call.size - 1);
  switch (call.collective) {
    case Collective::allreduce: {
      // In pieces: each member's chunk of every slot in, every chunk out.
      const uint64_t moved = bytes <= one_shot_bytes ? bytes * peers : 2 * bytes * peers / (peers + 1);
      return {moved, moved};
    }
    case Collective::allgather: return {bytes * peers, bytes * peers};
    case Collective::broadcast: return call.rank == call.root ? std::pair{bytes * peers, uint64_t{0}}
                                                              : std::pair{uint64_t{0}, bytes};
    default: return {0, 0};
  }
}

void trace_board_call(const Communicator& communicator, const Call& call, uint32_t sequence, double start_us,
                      const std::exception_ptr& error) {
  const Telemetry& telemetry = communicator.telemetry();
  TraceArgs args = describe_for_trace(call, sequence);
  args.add("bytes", static_cast<uint64_t>(call.bytes()));
  args.add("algorithm", error ? "board set-up" : "board").add("transport", "board");
  args.add_error(error);
  telemetry.trace().span(telemetry.track(), to_string(call.collective), "collective", start_us,
                         trace_clock_us() - start_us, args);
}

}  // namespace

BoardCell::BoardCell() = default;
BoardCell::~BoardCell() = default;

bool run_on_board(const Communicator& communicator, const Call& call, const void* input, void* output,
                  const std::string& algorithm, uint32_t sequence, Deadline deadline, bool caller_waits) {
  BoardCell* cell = communicator.board_cell();
  if (!cell || cell->state == BoardCell::State::unusable) return false;
  // Set up in the first collective, whichever it is: every member reaches
  // that point alike, even one whose first call differs from the others'
  // (which the board or the messages then report as a mismatch). A failure
  // here is the call's: counted, traced and thrown as its own.
  if (cell->state == BoardCell::State::untried) {
    Telemetry& telemetry = communicator.telemetry();
    const double start_us = telemetry.tracing() ? trace_clock_us() : 0;
    try {
      if (may_have_board(communicator)) cell->board = set_up(communicator, sequence, deadline);
    } catch (...) {
      telemetry.count_collective(false, 0, 0, std::chrono::nanoseconds(0));
      if (telemetry.tracing()) trace_board_call(communicator, call, sequence, start_us, std::current_exception());
      throw;
    }
    cell->state = cell->board ? BoardCell::State::ready : BoardCell::State::unusable;
    if (!cell->board) return false;
  }
  if (!fits(communicator, call, algorithm)) return false;
  Board& board = *cell->board;
  Telemetry& telemetry = communicator.telemetry();
  const double start_us = telemetry.tracing() ? trace_clock_us() : 0;
  // Timing every call would double what a small one costs (a read of the
  // clock is about 20 ns): the statistics' time comes from every 64th call,
  // weighed as the 64 it stands for.
  const uint64_t number = cell->calls++;
  const bool logged = log_enabled(LogLevel::debug);
  const bool timed = number % kTimedEvery == 0 || telemetry.tracing() || logged;
  const Clock::time_point started = timed ? Clock::now() : Clock::time_point{};
  communicator.note_started(sequence);
  std::exception_ptr error;
  try {
    switch (call.collective) {
      case Collective::allreduce: board.allreduce(communicator, call, input, output, sequence, deadline); break;
      case Collective::broadcast: board.broadcast(communicator, call, output, sequence, deadline); break;
      case Collective::allgather: board.allgather(communicator, call, input, output, sequence, deadline); break;
      default: board.barrier(communicator, call, sequence, deadline); break;
    }
  } catch (...) {
    error = std::current_exception();
  }
  communicator.note_finished(sequence);
  // Every call timed (tracing, logging): each weighs itself.
  const uint64_t weight = number == 0 || telemetry.tracing() || logged ? 1 : kTimedEvery;
  const auto call_took = timed ? std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - started)
                               : std::chrono::nanoseconds(0);
  const auto took = call_took * static_cast<int64_t>(weight);
  const auto [sent, received] = bytes_moved(call, board.capacity());
  telemetry.count_collective(!error, error ? 0 : sent, error ? 0 : received, took);
  if (caller_waits) telemetry.count_waiting(took);
  // As run_collective's line for a call on messages.
  CHORUS_LOG(debug, communicator.rank(), to_string(call.collective), " #", sequence, " (", call.count, " ",
             to_string(call.type), "): board", call.bytes() > board.capacity() ? " in pieces" : "", ", ",
             std::chrono::duration_cast<std::chrono::microseconds>(call_took).count(), " us",
             error ? ", failed" : "");
  if (telemetry.tracing()) trace_board_call(communicator, call, sequence, start_us, error);
  if (error) std::rethrow_exception(error);
  return true;
}

void announce_on_board(const Communicator& communicator, const Call& call, uint32_t sequence) {
  BoardCell* cell = communicator.board_cell();
  if (cell && cell->board) cell->board->announce(sequence, call_signature(call), call.root, /*on_board=*/false);
}

}  // namespace chorus::algorithms
