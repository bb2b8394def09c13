// Direct reads on a board (board_exchange.h): allgather and alltoall in
// which each member copies its peers' blocks straight out of their buffers
// with process_vm_readv, instead of through the slots.
//
// Why: through the slots a block is copied twice, and both copies move
// cache lines between cores: the writer's stores must take back the lines
// its reader holds from the last call, and the reader's loads fetch lines
// the writer holds modified. On an Intel Xeon (Emerald Rapids) 2 processes
// exchanging 1 MiB each took 298 us through a shared buffer and 219 us with
// one process_vm_readv each (benchmarks/README.md, "Direct reads"). The
// kernel's copy has a fixed cost (a system call, pinning the peer's pages),
// so small calls stay on the slots: the cost model decides, from a direct
// alltoall timed at set-up.
//
// One board call: every member writes the address of its input into its
// slot and stamps it; each reads its block of every peer's input; then it
// waits until every peer finished the call, since the caller may write its
// input as soon as the call returns. The stamps and signatures are the
// slots' own, so a peer in another call (or the same one with another
// count), dead or late, is found as on any board call. No broadcast runs
// this way: its root would wait for the slowest reader, where the slots
// pipeline its copy with theirs (it lost at every size measured). A peer's address is only ever read from, by this process,
// into memory this call's sizes bound; a wrong one makes the kernel refuse
// (EFAULT), which fails the call on every member.
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <span>

#include "algorithms/shared_memory/board_exchange.h"
#include "algorithms/shared_memory/board_wait.h"
#include "base/copy.h"
#include "base/error.h"
#include "base/peer_order.h"

namespace chorus::algorithms {

namespace {

// The most one process_vm_readv copies before the reader looks whether the
// Mesh failed meanwhile (so an abort never waits long for it).
constexpr size_t kReadChunkBytes = size_t{8} << 20;

uint64_t address_of(const void* pointer) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pointer)); }

}  // namespace

void Board::publish_identity() {
  probe_word_ = address_of(this) ^ (static_cast<uint64_t>(::getpid()) << 32) ^ 0x6469726563747264ull;
  MemberLine& mine = line(rank_);
  mine.process_id.store(static_cast<uint64_t>(::getpid()), std::memory_order_relaxed);
  mine.probe_address.store(address_of(&probe_word_), std::memory_order_relaxed);
  mine.probe_value.store(probe_word_, std::memory_order_release);
}

bool Board::can_read_every_peer() const {
  for (int member = 0; member < size_; ++member) {
    if (member == rank_) continue;
    const MemberLine& theirs = line(member);
    const uint64_t value = theirs.probe_value.load(std::memory_order_acquire);
    const auto pid = static_cast<pid_t>(theirs.process_id.load(std::memory_order_relaxed));
    uint64_t read = ~value;
    iovec local{&read, sizeof(read)};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(theirs.probe_address.load(std::memory_order_relaxed))),
                 sizeof(read)};
    // Another user's process, a seccomp filter, a Yama ptrace scope or
    // another pid namespace: the read fails, or finds another value.
    if (pid <= 0 || ::process_vm_readv(pid, &local, 1, &remote, 1, 0) != sizeof(read) || read != value) return false;
  }
  return true;
}

void Board::read_directly(const Wait& wait, int member, std::byte* to, uint64_t address, size_t bytes) const {
  const auto pid = static_cast<pid_t>(line(member).process_id.load(std::memory_order_relaxed));
  for (size_t done = 0; done < bytes;) {
    transport::Mesh& mesh = wait.communicator.mesh();
    if (mesh.failed()) fail(wait, mesh.explain_loss(mesh.failure()));
    const size_t ask = std::min(kReadChunkBytes, bytes - done);
    iovec local{to + done, ask};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(address + done)), ask};
    const ssize_t copied = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (copied <= 0) {
      const int error = copied < 0 ? errno : EIO;
      fail(wait, std::make_exception_ptr(IoError(
                     cat("rank ", wait.communicator.shown_rank(rank_), ": ", wait.this_collective(),
                         ": reading ", ask, " bytes of peer rank ", wait.communicator.shown_rank(member),
                         "'s buffer at offset ", done, " of ", bytes, " (process ", pid,
                         ") on the shared-memory board failed: ", std::strerror(error)))));
    }
    done += static_cast<size_t>(copied);
  }
}

void Board::finish_with_everyone(const Wait& wait) {
  const uint64_t number = wait.call_number;
  finish(number);
  for (int member = 0; member < size_; ++member) {
    if (member == rank_) continue;
    const WordAtLeast finished{line(member).finished, number};
    if (!finished()) wait_until(wait, member, nullptr, finished);
    known_finished_[static_cast<size_t>(member)] = number;
  }
  after_peer_heard();
  least_known_finished_ = number;
}

void Board::direct_blocks(const Communicator& communicator, const Call& call, const void* input, void* output,
                          uint32_t sequence, Deadline deadline) {
  const size_t block = call.bytes();
  const bool allgather = call.collective == Collective::allgather;
  auto* to = static_cast<std::byte*>(output);
  const auto* from = static_cast<const std::byte*>(input);
  const size_t rank = static_cast<size_t>(rank_);
  // An allgather's input in place is its own block of the output, which
  // only the peers read; an alltoall's never overlaps its output (the API
  // refuses that), so no member writes what a peer reads.
  const Wait wait = next_call(communicator, call, sequence, deadline);
  const uint64_t address = address_of(from);
  std::memcpy(claim_slot(wait), &address, sizeof(address));
  stamp_slot(wait, 0);
  const std::byte* own = allgather ? from : from + rank * block;
  if (to + rank * block != own) copy_bytes(to + rank * block, own, block);
  // Each member starts with the next member's buffer, so they spread their reads.
  for (int step = 1; step < size_; ++step) {
    const int member = (rank_ + step) % size_;
    await_slot(wait, member);
    uint64_t theirs = 0;
    std::memcpy(&theirs, slot_data(member, wait), sizeof(theirs));
    read_directly(wait, member, to + static_cast<size_t>(member) * block, allgather ? theirs : theirs + rank * block,
                  block);
  }
  finish_with_everyone(wait);
}

// Direct reads against the slots on an input its owner has just written,
// as a training step's fresh gradient is: a direct read then fetches every
// line from the owner's cache, and the owner's next write takes each back.
// On the Xeon, 2 ranks, a direct alltoall of 256 KiB a member took 15 us on
// an unchanged input and 35 on a fresh one, where the slots took 23 and 31:
// priced on unchanged inputs (a benchmark's), direct reads would win a case
// applications do not have.
//
// Each try is timed from a barrier to a barrier, and the set-up keeps the
// slowest member's time of each: a whole call, the same on every member.
// Until stop 72 each member timed the call alone, and a member that came
// late found its peers' slots full and timed a fraction of it; where ranks
// share cores the slots' luckiest member then measured 104-153 us of an
// alltoall (1 MiB a member, 4 ranks on 2 cores) that took 386, direct
// reads (each member's own copies, nothing to find done) 2.4-3.2x that,
// and `auto` kept the slots where direct reads took 0.74-0.93 of their
// time (benchmarks/README.md, "Direct reads priced by whole calls").
// Tries of the two alternate, so a slow spell of the host falls on both.
double Board::measure_direct_ratio(const Communicator& communicator, std::span<float> data, std::span<float> result,
                                   uint32_t sequence, Deadline deadline) {
  constexpr size_t kTries = 5;
  const size_t block_count = std::max<size_t>(1, kDirectAlltoallMinBytes / (sizeof(float) * static_cast<size_t>(size_)));
  const Call exchange =
      make_call(Collective::alltoall, rank_, size_, block_count, DataType::float32, ReduceOp::sum, 0, false);
  const Call barrier_call = make_call(Collective::barrier, rank_, size_, 0, DataType::uint8, ReduceOp::sum, 0, false);
  const std::span<float> input = data.first(block_count * static_cast<size_t>(size_));
  const auto run = [&](bool direct) {
    if (direct)
      direct_blocks(communicator, exchange, input.data(), result.data(), sequence, deadline);
    else
      blocks(communicator, exchange, input.data(), result.data(), sequence, deadline);
  };
  run(false);
  run(true);
  // Microseconds: the slots' tries, then direct reads'.
  std::array<double, 2 * kTries> took{};
  for (size_t attempt = 0; attempt < 2 * kTries; ++attempt) {
    const bool direct = attempt % 2 == 1;
    std::fill(input.begin(), input.end(), 1.0f);
    barrier(communicator, barrier_call, sequence, deadline);
    const Clock::time_point started = Clock::now();
    run(direct);
    barrier(communicator, barrier_call, sequence, deadline);
    took[(direct ? kTries : 0) + attempt / 2] = std::chrono::duration<double, std::micro>(Clock::now() - started).count();
  }
  const Call slowest =
      make_call(Collective::allreduce, rank_, size_, took.size(), DataType::float64, ReduceOp::max, 0, false);
  allreduce(communicator, slowest, took.data(), took.data(), sequence, deadline);
  const double slots = *std::min_element(took.begin(), took.begin() + kTries);
  const double direct = *std::min_element(took.begin() + kTries, took.end());
  return slots > 0 ? direct / slots : 1.0;
}

}  // namespace chorus::algorithms
