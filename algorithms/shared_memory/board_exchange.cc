// The collectives on a board (algorithms/shared_memory/board.h, board_exchange.h).
#include "algorithms/shared_memory/board_exchange.h"
#include "algorithms/shared_memory/board_wait.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/model/aligned_chunks.h"
#include "algorithms/execution/collective_watch.h"
#include "algorithms/execution/communicator.h"
#include "algorithms/execution/late_root_checks.h"
#include "base/copy.h"
#include "base/error.h"
#include "base/log.h"
#include "base/peer_order.h"
#include "base/reduce.h"

namespace chorus::algorithms {
namespace {

constexpr size_t kCacheLine = 64;
constexpr size_t kPageBytes = 4096;
// How long a waiter spins before it yields its core, and yields before it
// sleeps between looks, each nap twice the last up to the longest. A rank
// with a core of its own answers within the spin; one that waits for a
// peer's computation (milliseconds, seconds) gives the core back to it and
// to the host's other work, and is late by at most the longest nap.
constexpr Clock::duration kSpinFor = std::chrono::microseconds(50);
constexpr Clock::duration kYieldFor = std::chrono::milliseconds(1);
constexpr long kFirstNapNanoseconds = 20'000;
constexpr long kLongestNapNanoseconds = 500'000;
// Looks between the slow checks (failure, mismatch, clock) while spinning.
constexpr uint32_t kLooksPerCheck = 64;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

size_t Board::slot_bytes(int members, size_t capacity) {
  const size_t share = kPiecesRegionBytes / (2 * static_cast<size_t>(std::max(members, 1)));
  const size_t piece = std::min(kLargestPieceBytes, share / kPageBytes * kPageBytes);
  return std::max(capacity, piece);
}

size_t Board::region_bytes(int members, size_t slot_bytes) {
  return static_cast<size_t>(members) *
         (sizeof(MemberLine) + kRingEntries * kRingEntryBytes + 2 * slot_stride(slot_bytes));
}

Board::Board(std::unique_ptr<transport::SharedRegion> region, int rank, int size, size_t capacity,
             size_t slot_bytes)
    : region_(std::move(region)),
      base_(region_ ? region_->data() : nullptr),
      rank_(rank),
      size_(size),
      capacity_(capacity),
      slot_bytes_(slot_bytes),
      slot_stride_(slot_stride(slot_bytes)),
      member_stride_(sizeof(MemberLine) + kRingEntries * kRingEntryBytes + 2 * slot_stride_),
      known_finished_(static_cast<size_t>(size), 0),
      known_ring_finished_(static_cast<size_t>(size), 0),
      pending_ring_checks_(kRingEntries) {
  static_assert(sizeof(MemberLine) == kCacheLine && sizeof(SlotHeader) == 32);
  static_assert(sizeof(RingEntry) <= kCacheLine - kRingInlineBytes && kRingEntryBytes % kCacheLine == 0);
  static_assert(std::atomic<uint64_t>::is_always_lock_free);
  if (slot_bytes < capacity || slot_bytes % kCacheLine != 0)
    throw InvalidArgument(cat("rank ", rank, ": a board's slots of ", slot_bytes, " bytes must be whole cache ",
                              "lines and hold its one-shot calls of ", capacity, " bytes"));
  if (!region_ || region_->size() < region_bytes(size, slot_bytes) ||
      reinterpret_cast<uintptr_t>(region_->data()) % kCacheLine != 0)
    throw InvalidArgument(cat("rank ", rank, ": a board's region must hold ", region_bytes(size, slot_bytes),
                              " bytes on a cache-line boundary"));
}

Board::~Board() = default;

void Board::announce(uint32_t sequence, uint64_t signature, int root, bool on_board) {
  MemberLine& mine = line(rank_);
  // A seqlock: the announcement reads 0 ("nothing known") while the
  // signature and root change, and a reader keeps what it read only if the
  // announcement is the same before and after (check_mismatch). Without the
  // 0, a reader could pair the previous announcement with this call's
  // signature, and report the peer's next call as a mismatch with this one
  // (ThreadSanitizer's timing did: broadcast #525 against #526's signature).
  // The release stores order the 0 before the new fields for any reader
  // that sees them.
  mine.announced.store(0, std::memory_order_relaxed);
  mine.announced_signature.store(signature, std::memory_order_release);
  mine.announced_root.store(static_cast<uint64_t>(root), std::memory_order_release);
  before_peers_hear();
  mine.announced.store(uint64_t{sequence} << 2 | (on_board ? 2 : 0) | 1, std::memory_order_release);
}

// ---------------------------------------------------------------- the collectives

Board::Wait Board::next_call(const Communicator& communicator, const Call& call, uint32_t sequence,
                             Deadline deadline) {
  // What arrived of this member's deferred root checks (board_ring.cc).
  if (ring_checks_pending()) settle_ring_checks(communicator, deadline, 0);
  const uint64_t number = ++calls_;
  return Wait{communicator, call, sequence, number, stamp_of(number, sequence), call_signature(call), deadline, {}};
}

void Board::publish(const Wait& wait, const void* data, size_t bytes, int root) {
  std::byte* mine = claim_slot(wait);
  if (bytes > 0) copy_bytes(mine, data, bytes);
  stamp_slot(wait, root);
}

std::byte* Board::claim_slot(const Wait& wait) {
  // Peers may still read what this member wrote here two calls ago.
  make_room(wait);
  return slot_data(rank_, wait);
}

void Board::stamp_slot(const Wait& wait, int root) {
  SlotHeader& mine = slot(rank_, wait.call_number);
  mine.signature.store(wait.signature, std::memory_order_relaxed);
  mine.root.store(static_cast<uint64_t>(root), std::memory_order_relaxed);
  before_peers_hear();
  mine.stamp.store(wait.stamp, std::memory_order_release);
}

void Board::allreduce(const Communicator& communicator, const Call& call, const void* input, void* output,
                      uint32_t sequence, Deadline deadline) {
  if (call.bytes() > capacity_) return allreduce_in_pieces(communicator, call, input, output, sequence, deadline);
  const Wait wait = next_call(communicator, call, sequence, deadline);
  publish(wait, input, call.bytes(), 0);
  reduce_slots(wait, output, 0, call.count);
  least_known_finished_ = wait.call_number - 1;  // every peer arrived in this call
  finish(wait.call_number);
}

// In member order on every member, whatever order they arrive in, so all
// of them compute the same bits.
void Board::reduce_slots(const Wait& wait, void* output, size_t offset, size_t count) {
  const Call& call = wait.call;
  for (int member = 0; member < size_; ++member) {
    if (member != rank_) await_slot(wait, member);
    const std::byte* theirs = slot_data(member, wait) + offset;
    if (member == 0)
      copy_bytes(output, theirs, count * call.element_bytes());
    else
      reduce_unchecked(call.type, call.op, output, theirs, count);
  }
  if (call.op == ReduceOp::avg) average_unchecked(call.type, output, count, static_cast<size_t>(size_));
}

void Board::allreduce_in_pieces(const Communicator& communicator, const Call& call, const void* input, void* output,
                                uint32_t sequence, Deadline deadline) {
  const size_t element = call.element_bytes();
  const size_t per_piece = slot_bytes_ / element;
  const auto* from = static_cast<const std::byte*>(input);
  auto* to = static_cast<std::byte*>(output);
  for (size_t first = 0; first < call.count; first += per_piece) {
    const size_t count = std::min(per_piece, call.count - first);
    allreduce_piece(communicator, call, from + first * element, to + first * element, count, sequence, deadline);
  }
}

namespace {
// A cost measured at two sizes: either end's at and past it, and in
// between on a line in log2 of the size.
double between_sizes(size_t bytes, size_t small_bytes, double small_cost, size_t large_bytes, double large_cost) {
  if (bytes <= small_bytes) return small_cost;
  if (bytes >= large_bytes) return large_cost;
  const double small = std::log2(static_cast<double>(small_bytes));
  const double along =
      (std::log2(static_cast<double>(bytes)) - small) / (std::log2(static_cast<double>(large_bytes)) - small);
  return small_cost + along * (large_cost - small_cost);
}
}  // namespace

double BoardModel::alltoall_byte_seconds(size_t input_bytes) const {
  return between_sizes(input_bytes, Board::kSmallAlltoallBytes, small_alltoall_seconds_per_byte,
                       large_alltoall_bytes, alltoall_seconds_per_byte);
}

double BoardModel::allreduce_byte_seconds(size_t bytes) const {
  return between_sizes(bytes, Board::kMeasuredBytes, seconds_per_byte, large_allreduce_bytes,
                       large_allreduce_seconds_per_byte);
}

size_t Board::large_alltoall_bytes(int members) {
  // The members' outputs together: members x a member's input.
  size_t input = kMeasuredBytes;
  while (input < kLargestMeasuredBytes && !streams_past_cache(input * static_cast<size_t>(members))) input *= 2;
  return input;
}

size_t Board::measure_floats() const {
  return std::max({kMeasuredBytes, slot_bytes_, large_alltoall_bytes(size_)}) / sizeof(float);
}

BoardModel Board::measure(const Communicator& communicator, std::span<float> data, std::span<float> result,
                          uint32_t sequence, Deadline deadline) {
  // As the links are measured at connect (transport/link_probe.h): the
  // fastest of a few calls is a call's cost (the others also wait for
  // members arriving late, or descheduled), and the fastest of transfers
  // of a few megabytes, less their calls, gives a byte's
  // (a core taken by other work only ever makes one slower).
  constexpr int kCalls = 16;
  const Call barrier_call = make_call(Collective::barrier, rank_, size_, 0, DataType::uint8, ReduceOp::sum, 0, false);
  BoardModel model;
  model.call_seconds = std::numeric_limits<double>::max();
  for (int call = 0; call < kCalls; ++call) {
    const Clock::time_point started = Clock::now();
    barrier(communicator, barrier_call, sequence, deadline);
    model.call_seconds = std::min(model.call_seconds, std::chrono::duration<double>(Clock::now() - started).count());
  }
  const size_t large_alltoall = large_alltoall_bytes(size_);
  std::array<double, 3> took{};
  // The fastest of `runs` allreduces in pieces of `bytes` (after one more
  // where `warm`), less their calls, per byte.
  const auto allreduce_seconds_per_byte = [&](size_t bytes, size_t runs, bool warm) {
    const size_t count = bytes / sizeof(float);
    const Call transfer =
        make_call(Collective::allreduce, rank_, size_, count, DataType::float32, ReduceOp::sum, 0, false);
    if (warm) allreduce_in_pieces(communicator, transfer, data.data(), result.data(), sequence, deadline);
    for (double& seconds : std::span(took).first(runs)) {
      const Clock::time_point started = Clock::now();
      allreduce_in_pieces(communicator, transfer, data.data(), result.data(), sequence, deadline);
      seconds = std::chrono::duration<double>(Clock::now() - started).count();
    }
    const double fastest = *std::min_element(took.begin(), took.begin() + static_cast<std::ptrdiff_t>(runs));
    const double calls = 2.0 * static_cast<double>((bytes + slot_bytes_ - 1) / slot_bytes_);
    return std::max(0.0, fastest - calls * model.call_seconds) / static_cast<double>(bytes);
  };
  // The first call faults the slots' pages in.
  model.seconds_per_byte = allreduce_seconds_per_byte(std::max(kMeasuredBytes, slot_bytes_), 3, true);
  // And where the members' buffers outgrow the cache, as the alltoall's
  // second size (at 4 members or more on a 32 MiB cache, 4 MiB already):
  // two calls, the pages in by now. A sanitizer's build runs these calls
  // 20-40x slower, on every 2- and 3-member board its tests set up.
  model.large_allreduce_bytes = std::max(kMeasuredBytes, large_alltoall);
  model.large_allreduce_seconds_per_byte = model.large_allreduce_bytes > kMeasuredBytes
                                               ? allreduce_seconds_per_byte(model.large_allreduce_bytes, 2, false)
                                               : model.seconds_per_byte;

  // An alltoall in pieces at two sizes of a member's input: its byte costs
  // 3x more once the members' buffers outgrow the caches (board_exchange.h).
  // The fastest of three alltoalls whose members each put in `input_bytes`.
  const auto time_alltoall = [&](size_t input_bytes) {
    const size_t block_count = std::max<size_t>(1, input_bytes / (sizeof(float) * static_cast<size_t>(size_)));
    const Call exchange =
        make_call(Collective::alltoall, rank_, size_, block_count, DataType::float32, ReduceOp::sum, 0, false);
    const std::span<float> input = data.first(block_count * static_cast<size_t>(size_));
    const auto run = [&] { blocks(communicator, exchange, input.data(), result.data(), sequence, deadline); };
    run();
    for (double& seconds : took) {
      const Clock::time_point started = Clock::now();
      run();
      seconds = std::chrono::duration<double>(Clock::now() - started).count();
    }
    return *std::min_element(took.begin(), took.end());
  };
  const auto alltoall_seconds_per_byte = [&](size_t input_bytes) {
    const size_t block_count = std::max<size_t>(1, input_bytes / (sizeof(float) * static_cast<size_t>(size_)));
    const Call exchange =
        make_call(Collective::alltoall, rank_, size_, block_count, DataType::float32, ReduceOp::sum, 0, false);
    const double pieces =
        std::ceil(static_cast<double>(block_count) / static_cast<double>(block_piece_count(exchange)));
    return std::max(0.0, time_alltoall(input_bytes) - pieces * model.call_seconds) /
           static_cast<double>(block_count * sizeof(float) * static_cast<size_t>(size_));
  };
  model.small_alltoall_seconds_per_byte = alltoall_seconds_per_byte(kSmallAlltoallBytes);
  model.alltoall_seconds_per_byte = alltoall_seconds_per_byte(large_alltoall);
  if (direct_reads_) model.direct_ratio = measure_direct_ratio(communicator, data, result, sequence, deadline);
  model.large_alltoall_bytes = large_alltoall;
  return model;
}

// A piece: every member copies its input into its slot, but for its own
// chunk; member m reduces chunk m of its input and of every peer's slot
// (in member order) into chunk m of its output, copies that into chunk m
// of its slot, and stamps `reduced`; then every member copies each other
// chunk from the slot of the member that reduced it. One member computes
// each chunk, so all have the same bits. A member writes its slot again
// two board calls later, after every peer finished this one (make_room), so
// nobody reads it then.
void Board::allreduce_piece(const Communicator& communicator, const Call& call, const std::byte* input,
                            std::byte* output, size_t count, uint32_t sequence, Deadline deadline) {
  const Wait wait = next_call(communicator, call, sequence, deadline);
  const uint64_t number = wait.call_number;
  const size_t element = call.element_bytes();
  // Chunks on cache-line boundaries, so no two members write one line.
  const auto chunk = [&](int member) { return aligned_chunk(member, size_, count, element, kCacheLine); };
  const size_t own_offset = chunk(rank_).first * element;
  const size_t own_count = chunk(rank_).count;
  const size_t own_end = own_offset + own_count * element;
  // Every chunk but its own, which no peer reads before it holds the result:
  // the first reduction reads it from the input instead (one pass where a
  // copy and a reduction took two; 10-15% off 64 KiB-4 MiB at 2 ranks).
  std::byte* published = claim_slot(wait);
  copy_bytes(published, input, own_offset);
  copy_bytes(published + own_end, input + own_end, count * element - own_end);
  stamp_slot(wait, 0);
  // The chunk is reduced into the output and then copied into the slot,
  // not reduced into the slot: a loop that both pulls the peers' lines and
  // takes back the slot's lines from the peers that read them last runs
  // slower than the two apart (2 ranks: 20-25% off a call of 16-128 KiB,
  // 5% at 256 KiB; benchmarks/README.md, stop 80).
  std::byte* own = output + own_offset;
  const std::byte* own_so_far = input + own_offset;  // the input, until the first reduction wrote `own`
  for (int member = 0; member < size_; ++member) {
    if (member == rank_) continue;
    await_slot(wait, member);
    if (own_count == 0) continue;
    const std::byte* theirs = slot_data(member, wait) + own_offset;
    if (own_so_far == own)  // in place, or reduced once already
      reduce_unchecked(call.type, call.op, own, theirs, own_count);
    else
      reduce_pair_unchecked(call.type, call.op, own, own_so_far, theirs, own_count);
    own_so_far = own;
  }
  if (call.op == ReduceOp::avg) average_unchecked(call.type, own, own_count, static_cast<size_t>(size_));
  copy_bytes(published + own_offset, own, own_count * element);
  SlotHeader& mine = slot(rank_, number);
  mine.reduced.store(wait.stamp, std::memory_order_release);
  // Each member starts with the next member's chunk, so at any moment they
  // read different slots.
  for (int step = 1; step < size_; ++step) {
    const int member = (rank_ + step) % size_;
    SlotHeader& theirs = slot(member, number);
    const auto reduced = [&] { return theirs.reduced.load(std::memory_order_acquire) == wait.stamp; };
    if (!reduced()) wait_until(wait, member, &theirs.stamp, reduced);
    after_peer_heard();
    const ElementRange theirs_chunk = chunk(member);
    const size_t offset = theirs_chunk.first * element;
    copy_bytes(output + offset, slot_data(member, wait) + offset, theirs_chunk.count * element);
  }
  least_known_finished_ = number - 1;  // every peer arrived in this call
  finish(number);
}

// Every member also shows its slot's stamp and waits for its left
// neighbour's: a member that names another root (or another call) is then
// found by its right neighbour in this very call, as the root check finds
// it on messages, instead of leaving its buffer unwritten.
void Board::broadcast(const Communicator& communicator, const Call& call, void* data, uint32_t sequence,
                      Deadline deadline, int source) {
  if (call.bytes() <= kRingDataBytes) return ring_broadcast(communicator, call, data, sequence, deadline, source);
  slot_broadcast(communicator, call, static_cast<std::byte*>(data), call.bytes(), sequence, deadline, source);
}

// Past a slot, a piece after another: the root copies each into its slot
// and every other member copies it out, two board calls in flight (the
// two-slot rule), where messages make every receiver read the root's
// buffer through the kernel (process_vm_readv, about a third of a copy's
// speed on the VM's 4 KiB pages).
void Board::broadcast_in_pieces(const Communicator& communicator, const Call& call, void* data, uint32_t sequence,
                                Deadline deadline) {
  auto* bytes = static_cast<std::byte*>(data);
  const size_t total = call.bytes();
  for (size_t first = 0; first < total; first += slot_bytes_)
    slot_broadcast(communicator, call, bytes + first, std::min(slot_bytes_, total - first), sequence, deadline,
                   call.root);
}

void Board::slot_broadcast(const Communicator& communicator, const Call& call, std::byte* data, size_t bytes,
                           uint32_t sequence, Deadline deadline, int source) {
  const Wait wait = next_call(communicator, call, sequence, deadline);
  const uint64_t number = wait.call_number;
  announce(sequence, wait.signature, call.root, /*on_board=*/true);
  // Every member writes its slot: the source its data, all of them their stamps.
  publish(wait, data, rank_ == source ? bytes : 0, call.root);
  if (rank_ != source) {
    await_slot(wait, source);
    copy_bytes(data, slot_data(source, wait), bytes);
  }
  const int left = (rank_ + size_ - 1) % size_;
  if (left != source || rank_ == source) await_slot(wait, left);
  finish(number);
}

void Board::barrier(const Communicator& communicator, const Call& call, uint32_t sequence, Deadline deadline) {
  const Wait wait = next_call(communicator, call, sequence, deadline);
  publish(wait, nullptr, 0, 0);
  for (int member = 0; member < size_; ++member)
    if (member != rank_) await_slot(wait, member);
  least_known_finished_ = wait.call_number - 1;
  finish(wait.call_number);
}

// ---------------------------------------------------------------- waiting

void Board::await_slot(const Wait& wait, int member) {
  SlotHeader& theirs = slot(member, wait.call_number);
  const auto arrived = [&] { return theirs.stamp.load(std::memory_order_acquire) == wait.stamp; };
  if (!arrived()) wait_until(wait, member, &theirs.stamp, arrived);
  after_peer_heard();
  const uint64_t signature = theirs.signature.load(std::memory_order_relaxed);
  if (signature != wait.signature) mismatch(wait, member, signature, theirs.root.load(std::memory_order_relaxed));
  // Arriving in call n, it finished n - 1.
  uint64_t& known = known_finished_[static_cast<size_t>(member)];
  known = std::max(known, wait.call_number - 1);
}

void Board::make_room(const Wait& wait) {
  if (wait.call_number <= 2 || least_known_finished_ + 2 >= wait.call_number) return;
  const uint64_t needed = wait.call_number - 2;
  for (int member = 0; member < size_; ++member) {
    uint64_t& known = known_finished_[static_cast<size_t>(member)];
    if (member == rank_ || known >= needed) continue;
    const MemberLine& theirs = line(member);
    const auto finished = [&] { return theirs.finished.load(std::memory_order_acquire) >= needed; };
    if (!finished()) wait_until(wait, member, nullptr, finished);
    after_peer_heard();
    known = needed;
  }
  least_known_finished_ = needed;
}

template <class Arrived>
void Board::wait_until(const Wait& wait, int member, const std::atomic<uint64_t>* awaited, Arrived&& arrived) const {
  transport::Mesh& mesh = wait.communicator.mesh();
  const Clock::time_point started = Clock::now();
  if (!wait.waiting_since) wait.waiting_since = started;
  // The Executor's timeout and stall warnings (collective_watch.h), from
  // when this wait started; the timeout counts from the call's first wait.
  CollectiveWatch watch(wait.communicator, wait.call, wait.sequence, wait.deadline, *wait.waiting_since);
  watch.progressed(started);
  const auto waiting_for = [&] {
    return cat("peer rank ", wait.communicator.shown_rank(member), " on the shared-memory board");
  };
  bool spinning = !wait.communicator.oversubscribed();
  bool sleeping = false;
  long nap = kFirstNapNanoseconds;
  for (uint32_t looks = 1;; ++looks) {
    if (arrived()) return;
    if (spinning) {
      cpu_relax();
      if (looks % kLooksPerCheck != 0) continue;
    } else if (!sleeping) {
      ::sched_yield();
    } else {
      const timespec pause{0, nap};
      ::nanosleep(&pause, nullptr);
      nap = std::min(2 * nap, kLongestNapNanoseconds);
    }
    // What arrived before a failure still counts: a peer that is done with
    // this call may fail its next one while this member is still reading.
    if (mesh.failed()) {
      if (arrived()) return;
      fail(wait, mesh.explain_loss(mesh.failure()));
    }
    check_mismatch(wait, member, awaited);
    // A rooted call elsewhere whose ranks disagree may be why nobody comes
    // (late_root_checks.h): its word goes round while members wait here.
    if (sleeping) {
      LateRootChecks* late = wait.communicator.late_root_checks();
      if (late && late->active()) {
        late->poll(wait.communicator);
      } else if (const LateRootChecks::Delegation* delegation = LateRootChecks::delegated();
                 delegation && delegation->checks->active()) {
        // A phase of a Context's call (the host boards'): this wait is that
        // call's, and a covered one tells its root once it has waited kTellAfter.
        delegation->checks->poll(*delegation->context);
        if (Clock::now() - started >= LateRootChecks::kTellAfter)
          delegation->checks->tell(*delegation->context, delegation->sequence);
      }
    }
    const Clock::time_point now = Clock::now();
    if (watch.timed_out(now)) {
      if (arrived()) return;
      fail(wait, watch.timeout_error(waiting_for()));
    }
    if (watch.warning_due(now)) watch.warn_stall(waiting_for());
    spinning = spinning && now - started < kSpinFor;
    sleeping = now - started >= kYieldFor;
  }
}

template void Board::wait_until<const Board::WordEquals&>(const Wait&, int, const std::atomic<uint64_t>*,
                                                         const WordEquals&) const;
template void Board::wait_until<const Board::WordAtLeast&>(const Wait&, int, const std::atomic<uint64_t>*,
                                                          const WordAtLeast&) const;

void Board::check_mismatch(const Wait& wait, int member, const std::atomic<uint64_t>* awaited) const {
  const MemberLine& theirs = line(member);
  // The signature belongs to the announcement only if the announcement is
  // the same after reading it (the member writes the signature first).
  const uint64_t announced = theirs.announced.load(std::memory_order_acquire);
  // (Acquire loads, not a fence: ThreadSanitizer does not model fences.)
  const uint64_t signature = theirs.announced_signature.load(std::memory_order_acquire);
  const uint64_t root = theirs.announced_root.load(std::memory_order_acquire);
  if (announced == 0 || theirs.announced.load(std::memory_order_acquire) != announced) return;
  const auto their_sequence = static_cast<uint32_t>(announced >> 2);
  const auto ahead = static_cast<int32_t>(their_sequence - wait.sequence);
  if (ahead == 0 && signature != wait.signature) mismatch(wait, member, signature, root);
  if (ahead == 0 && (announced & 2) == 0)
    fail(wait, std::make_exception_ptr(MismatchError(
                   cat("rank ", wait.communicator.shown_rank(rank_), ": ", wait.this_collective(), " (", describe_signature(wait.signature),
                       "): peer rank ", wait.communicator.shown_rank(member), " runs it on messages where this rank runs it on the "
                       "shared-memory board: did the ranks ask for different algorithms?"))));
  // Past this collective without writing the stamp this rank waits for.
  // Its announcement was written after that stamp would have been, so a
  // last look at it tells a late sight from a peer that skipped it.
  if (ahead > 0 && awaited) {
    if (awaited->load(std::memory_order_acquire) == wait.stamp) return;
    fail(wait, std::make_exception_ptr(MismatchError(
                   cat("rank ", wait.communicator.shown_rank(rank_), ": ", wait.this_collective(), " (", describe_signature(wait.signature),
                       "): peer rank ", wait.communicator.shown_rank(member), " went on to collective #", their_sequence,
                       " without taking part in #", wait.sequence, " as this rank did (on the shared-memory board)"))));
  }
}

void Board::mismatch(const Wait& wait, int member, uint64_t their_signature,
                     std::optional<uint64_t> their_root) const {
  // The same call but for its root: in the root check's words (root_check.h).
  Call with_their_root = wait.call;
  with_their_root.root = their_root ? static_cast<int>(*their_root) : wait.call.root;
  if (their_root && call_signature(with_their_root) == their_signature && *their_root != uint64_t(wait.call.root))
    fail(wait, std::make_exception_ptr(MismatchError(cat("rank ", wait.communicator.shown_rank(rank_), ": ", wait.this_collective(), ": peer rank ",
                                                         wait.communicator.shown_rank(member), " names root ", *their_root,
                                                         " but this rank names root ", wait.call.root))));
  // The same call after rooted calls whose roots differ (call.h: Call::previous_root).
  if (const auto roots = chain_difference(their_signature, wait.signature))
    fail(wait, std::make_exception_ptr(MismatchError(cat(
                   "rank ", wait.communicator.shown_rank(rank_), ": ", wait.this_collective(), ": peer rank ",
                   wait.communicator.shown_rank(member), " names root ", roots->theirs,
                   " in the last rooted call before it but this rank names root ", roots->mine,
                   " (on the shared-memory board)"))));
  fail(wait, std::make_exception_ptr(MismatchError(
                 cat("rank ", wait.communicator.shown_rank(rank_), ": ", wait.this_collective(), ": peer rank ", wait.communicator.shown_rank(member), " called ",
                     describe_signature(their_signature), " where this rank called ",
                     describe_signature(wait.signature), " (on the shared-memory board)"))));
}

void Board::fail(const Wait& wait, std::exception_ptr error) const {
  // As the executor: the Mesh is aborted first, so every other member
  // learns of it instead of waiting for this one.
  wait.communicator.mesh().abort(error);
  std::rethrow_exception(error);
}

}  // namespace chorus::algorithms
