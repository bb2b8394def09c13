// The exchange on a board (algorithms/shared_memory/board.h): the layout of the shared
// region and the collectives that run on it. Internal to algorithms.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "algorithms/model/call.h"
#include "base/deadline.h"
#include "transport/transport.h"

namespace chorus::algorithms {

class Communicator;

// Slot room for the pieces of large allreduces (Board::slot_bytes): what
// the whole region may spend on them, and the most one piece holds.
inline constexpr size_t kPiecesRegionBytes = size_t{8} << 20;
inline constexpr size_t kLargestPieceBytes = size_t{1} << 20;

// What one board call costs, what a byte of an allreduce in pieces costs,
// and what a byte of a member's input to an alltoall costs at two sizes,
// measured by every member when the board is set up and agreed (the
// slowest member's), so every member's selection reads the same numbers.
//
// The alltoall has byte costs of its own because the allreduce's priced it
// up to 5x too high, and `auto` chose messages (pairwise) at 4 ranks from
// 256 KiB where the board was 1.1-1.7x faster. On 4 ranks of the 2-core VM
// a byte of a 4 MiB allreduce in pieces took 740 ps (each piece waits
// twice, on the members reducing it, descheduled when oversubscribed); a
// byte of a member's input to an alltoall took 140-155 ps at 256 KiB,
// 160-180 ps at 1 MiB and 300-530 ps at 4 MiB, once the members' buffers
// (input, output and slots) outgrow the caches. So the alltoall is
// measured at both ends, and a size between is priced on a line between
// them in log2 of the size. The large end is where the members' outputs
// together pass half the cache and the board streams them (base/copy.h:
// 8 MiB a member at 2 members on the VM, 4 MiB from 4), so the rate it
// extends to larger calls is a streamed one.
struct BoardModel {
  double call_seconds = 1e-6;
  double seconds_per_byte = 0.2e-9;                  // a byte of an allreduce at Board::kMeasuredBytes and under
  double large_allreduce_seconds_per_byte = 0.2e-9;  // at large_allreduce_bytes and over
  size_t large_allreduce_bytes = size_t{4} << 20;
  double small_alltoall_seconds_per_byte = 0.2e-9;  // at Board::kSmallAlltoallBytes and under
  double alltoall_seconds_per_byte = 0.2e-9;        // at large_alltoall_bytes and over
  size_t large_alltoall_bytes = size_t{4} << 20;
  // Direct reads (board_direct.cc) against the slots: the time of an
  // alltoall of Board::kDirectAlltoallMinBytes a member whose members read
  // each other's buffers directly over that of one through the slots, both
  // on an input written afresh before each call (Board::measure says why);
  // 0: the members cannot read each other's memory.
  double direct_ratio = 0;
  // What a byte of an alltoall whose members each put in `input_bytes` costs.
  double alltoall_byte_seconds(size_t input_bytes) const;
  // What a byte of an allreduce of `bytes` in pieces costs. Two sizes, as
  // for the alltoall: past the caches the messages' ring slows down more
  // than the board's pieces, which a byte priced at 4 MiB alone hid (at 2
  // ranks on the EPYC, 8-16 MiB ran on the ring in 1.5-2x the pieces' time).
  double allreduce_byte_seconds(size_t bytes) const;
};

class Board {
 public:
  // The data bytes of each slot for `members` members whose one-shot calls
  // take up to `capacity` bytes: room for the pieces of a larger allreduce
  // too, as much as kPiecesRegionBytes gives each slot (at most
  // kLargestPieceBytes), never less than `capacity`.
  static size_t slot_bytes(int members, size_t capacity);
  // The region's size for `members` members whose slots hold `slot_bytes` bytes.
  static size_t region_bytes(int members, size_t slot_bytes);

  // `region` holds region_bytes(size, slot_bytes) bytes that every member
  // maps; calls of up to `capacity` bytes run in one shot.
  Board(std::unique_ptr<transport::SharedRegion> region, int rank, int size, size_t capacity, size_t slot_bytes);
  ~Board();

  size_t capacity() const { return capacity_; }
  // The largest broadcast of one board call: on the ring (kRingDataBytes)
  // or in a slot (capacity()), whichever holds more.
  size_t one_shot_broadcast_bytes() const { return std::max(capacity_, kRingDataBytes); }
  // The most one piece of a larger allreduce holds.
  size_t piece_bytes() const { return slot_bytes_; }
  const BoardModel& model() const { return model_; }
  // The transfer measure() times a byte with, and the small alltoall.
  static constexpr size_t kMeasuredBytes = size_t{4} << 20;
  static constexpr size_t kSmallAlltoallBytes = size_t{256} << 10;
  // The large alltoall it times, a member's input: kMeasuredBytes, or
  // where the board starts streaming, at most kLargestMeasuredBytes.
  static constexpr size_t kLargestMeasuredBytes = size_t{16} << 20;
  static size_t large_alltoall_bytes(int members);
  void set_model(const BoardModel& model) { model_ = model; }
  // Times board calls on every member (they all call it alike, right after
  // set-up): barriers for a call, allreduces in pieces for a byte of an
  // allreduce, and alltoalls in pieces for a byte of a block call.
  // What this member measured; the set-up agrees on the slowest. The
  // calls carry `sequence`, a number no call of the Communicator has.
  // `data` and `result` hold measure_floats() each (the set-up's timings
  // share them: fresh pages are slow to fault in on some VMs).
  BoardModel measure(const Communicator& communicator, std::span<float> data, std::span<float> result,
                     uint32_t sequence, Deadline deadline);
  size_t measure_floats() const;
  // The collectives, for a call of at most capacity() bytes on host memory
  // (allreduce: any size; larger ones run in pieces, see below).
  // A failure aborts the Communicator's Mesh before it is thrown.
  void allreduce(const Communicator& communicator, const Call& call, const void* input, void* output,
                 uint32_t sequence, Deadline deadline);
  // A broadcast of up to kRingDataBytes runs on the ring (ring_broadcast).
  // `source`: the member whose data it is; call.root where that is a
  // member. A board that serves a phase of a larger call (host_boards.h)
  // names the larger call's root in call.root instead, which the slots and
  // the words then show, so that members naming different roots of it
  // differ on the board too.
  void broadcast(const Communicator& communicator, const Call& call, void* data, uint32_t sequence,
                 Deadline deadline, int source);
  void barrier(const Communicator& communicator, const Call& call, uint32_t sequence, Deadline deadline);
  // allgather, reduce_scatter and alltoall of fixed counts (`call.count`
  // elements per block; output holds every member's block in member order,
  // an allgather's input this member's block of it in place; a
  // reduce_scatter's or alltoall's input every member's block): in one
  // board call where what a member publishes fits capacity(), else in
  // pieces (board_blocks.cc).
  void blocks(const Communicator& communicator, const Call& call, const void* input, void* output,
              uint32_t sequence, Deadline deadline);
  // The elements of each block one piece of blocks() moves.
  size_t block_piece_count(const Call& call) const;

  // Direct reads (board_direct.cc): each member copies its peers' blocks
  // straight out of their buffers (process_vm_readv), one copy where the
  // slots take two. The set-up publishes every member's identity, checks
  // that every member can read every peer, and agrees on it.
  void publish_identity();
  bool can_read_every_peer() const;
  void enable_direct_reads() { direct_reads_ = true; }
  bool direct_reads() const { return direct_reads_; }
  // An alltoall of kDirectAlltoallMinBytes a member read directly over the
  // same through the slots, each on inputs written just before the call;
  // every member returns the same number (part of measure()).
  double measure_direct_ratio(const Communicator& communicator, std::span<float> data, std::span<float> result,
                              uint32_t sequence, Deadline deadline);
  // allgather and alltoall of fixed counts, any size.
  void direct_blocks(const Communicator& communicator, const Call& call, const void* input, void* output,
                     uint32_t sequence, Deadline deadline);
  // The size (a member's whole input) from which `auto` reads an alltoall
  // directly, and at which the set-up measures direct reads against the
  // slots (BoardModel::direct_ratio). Measured on the Xeon, 2 ranks, on
  // inputs unchanged between calls and written afresh before each
  // (benchmarks/README.md, "Direct reads"): an alltoall of 1 MiB took 81 /
  // 203 us read directly against 129 / 203 through the slots, one of 256
  // KiB 15 / 35 against 23 / 31, of 64 KiB 5 / 12 against 8 / 10. Below it
  // the system calls and pinned pages cost more on fresh inputs than the
  // copy they save; above it the ratio held or fell (16 MiB: 4339 / 4981
  // us fresh), so the one measured at this size stands for them. A
  // broadcast read directly lost at every size (its root waits for the
  // slowest reader, where the slots pipeline): none runs that way;
  // allgather only by name (board.cc, direct_cost).
  static constexpr size_t kDirectAlltoallMinBytes = size_t{1} << 20;
  // announce_on_board (board.h); on_board: the call runs on this board.
  void announce(uint32_t sequence, uint64_t signature, int root, bool on_board);

  // Small broadcasts run on a ring of entries per member (board_ring.cc),
  // so that a root need not wait for anyone: up to kRingRunAhead calls ahead
  // of the slowest member, as an MPI's eager sends let its root run ahead.
  // 64 entries, not 16: oversubscribed, a root that waits for room yields
  // its core, and each wait costs a scheduler round; back to back on the
  // 2-core VM an 8-byte broadcast took 0.51-0.77 us at 4 ranks with 64
  // against 0.67-1.34 with 16 and 0.66-0.89 with 32, and 1.8-2.1 us at 8
  // ranks against 3.4-3.6 with 16 (128: slower at 4 ranks, mixed at 8).
  // At 2 ranks, where no one waits for room, all are alike.
  // Entries hold 8 KiB, twice a slot's default (CHORUS_BOARD_BYTES): with
  // 1 KiB (until stop 71) a 2-8 KiB broadcast went to the slots, where the
  // root waits for its neighbour each call: back to back at 2 ranks 2-4 KiB
  // took 0.45-0.63 us there against 0.33-0.37 on the ring, 8 KiB 1.02
  // against 0.48; at 4 ranks 2 KiB 1.9 against 0.52-0.61 and 8 KiB 2.8
  // against 0.9 (benchmarks/README.md, "Broadcasts of up to 8 KiB on the
  // ring"). Entries of 4 KiB were faster at 2-4 KiB (0.28 us) but left
  // 8 KiB on the slots; 16 KiB ones no faster below. The ring is then
  // 516 KiB a member (33 MiB of the region at 64 members), of which a
  // small broadcast touches its entries' first lines only.
  static constexpr size_t kRingEntries = 64;
  static constexpr size_t kRingEntryBytes = 64 + 8192;
  static constexpr size_t kRingDataBytes = kRingEntryBytes - 64;
  static constexpr uint64_t kRingRunAhead = kRingEntries - 2;
  // A root settles its pending root checks as a ring call starts only
  // every this many ring calls, all that arrived in one pass (and, waiting,
  // those kRingRunAhead back). Settled one a call, each read a line its
  // neighbour had just written: back to back that miss was a quarter of an
  // 8-byte broadcast at 2 ranks. A disagreement that only roots see (every
  // member naming itself) then fails within this many of a root's ring
  // calls once the entry is there, or at once in any call of another kind.
  static constexpr uint64_t kRingCheckBatch = 16;
  // The checks of its left neighbour's entries this member left for later
  // (ring broadcasts it was the root of, or whose neighbour's entry had not
  // arrived when it had the data): those whose entry has arrived, and
  // (waiting, up to `deadline`) those of ring calls up to `wait_through`. A
  // disagreement fails the Communicator (MismatchError). Every other board
  // call settles them as it starts, a ring call once kRingCheckBatch have
  // gathered, and the Context as it ends (settle_board_checks).
  void settle_ring_checks(const Communicator& communicator, Deadline deadline, uint64_t wait_through);
  bool ring_checks_pending() const { return ring_checked_through_ != ring_calls_; }
  // A member's first line: written by it alone.
  struct alignas(64) MemberLine {
    std::atomic<uint64_t> finished;   // the last board call it finished (its number, from 1)
    std::atomic<uint64_t> announced;  // (sequence << 2) | on board << 1 | 1 of its current call; 0: none
    std::atomic<uint64_t> announced_signature;
    std::atomic<uint64_t> announced_root;
    // The last ring call whose entries it no longer reads (its own root
    // checks included): where a member may write its entry again.
    std::atomic<uint64_t> ring_finished;
    // Written once, at set-up (publish_identity): its process id, and where
    // in its memory a word holding `probe_value` is, for the peers' check
    // that they can read its memory.
    std::atomic<uint64_t> process_id;
    std::atomic<uint64_t> probe_address;
    std::atomic<uint64_t> probe_value;
  };
  // An entry of a member's ring: this header, then the data: on the
  // header's own line up to kRingInlineBytes, else on the next lines.
  struct RingEntry {
    std::atomic<uint64_t> stamp;  // (ring call << 32) | sequence; 0: empty
    std::atomic<uint64_t> signature;
    std::atomic<uint64_t> root;
  };
  // A slot's header, its data right behind it (on the same line, up to 32 bytes).
  struct SlotHeader {
    std::atomic<uint64_t> stamp;  // (board call << 32) | sequence; 0: empty
    std::atomic<uint64_t> signature;
    std::atomic<uint64_t> root;  // the whole root (the signature keeps its low byte)
    // In a piece of a large allreduce: the stamp once this member's chunk
    // of the slot holds the chunk's result.
    std::atomic<uint64_t> reduced;
  };
  // Who is waited for, for what, in which call: the slow path's context.
  struct Wait;

  MemberLine& line(int member) const {
    return *reinterpret_cast<MemberLine*>(base_ + static_cast<size_t>(member) * member_stride_);
  }
  SlotHeader& slot(int member, uint64_t call) const {
    return *reinterpret_cast<SlotHeader*>(base_ + static_cast<size_t>(member) * member_stride_ + sizeof(MemberLine) +
                                          kRingEntries * kRingEntryBytes + (call % 2) * slot_stride_);
  }
  RingEntry& ring_entry(int member, uint64_t ring_call) const {
    return *reinterpret_cast<RingEntry*>(base_ + static_cast<size_t>(member) * member_stride_ + sizeof(MemberLine) +
                                         (ring_call % kRingEntries) * kRingEntryBytes);
  }
  // Why small data shares the header's line: a receiver that found the
  // stamp then missed once more on the data line, and a root took two lines
  // from the receiver's cache where one does (an 8-byte broadcast at 2
  // ranks back to back: benchmarks/README.md, "Small broadcasts in one
  // line", stop 72). Larger data starts on a line of its own, where the
  // copies run fastest. Members agree on the size (the signature has it).
  static constexpr size_t kRingInlineBytes = 32;
  static std::byte* data_of(RingEntry& entry, size_t bytes) {
    return reinterpret_cast<std::byte*>(&entry) + (bytes <= kRingInlineBytes ? 64 - kRingInlineBytes : 64);
  }
  // A slot's data, as a ring entry's: a call of up to kSlotInlineBytes
  // (the whole call's, which every member knows from its signature) shares
  // the header's line, so an 8-byte allreduce writes one line. Larger data
  // starts on a line of its own, so that it is aligned alike with a
  // 64-byte aligned buffer (torch's, TensorFlow's): between two pinned
  // processes a 2-rank piece of 64-256 KiB took 1.5-1.8x as long with the
  // data 32 bytes past a line (chorus-crosscore-bench --offset 32, stop 80).
  static constexpr size_t kSlotInlineBytes = 64 - sizeof(SlotHeader);
  static std::byte* data_of(SlotHeader& header, size_t call_bytes) {
    return reinterpret_cast<std::byte*>(&header) + (call_bytes <= kSlotInlineBytes ? sizeof(SlotHeader) : 64);
  }
  // Where `member`'s data of this call starts in its slot.
  std::byte* slot_data(int member, const Wait& wait) const;
  // A slot's stride: its header's line, then slot_bytes on lines of their own.
  static size_t slot_stride(size_t slot_bytes) { return 64 + slot_bytes; }
  static uint64_t stamp_of(uint64_t call, uint32_t sequence) { return call << 32 | sequence; }

  // An allreduce of any size in pieces of at most piece_bytes(), each one
  // board call of two shots (allreduce_piece).
  void allreduce_in_pieces(const Communicator& communicator, const Call& call, const void* input, void* output,
                           uint32_t sequence, Deadline deadline);
  // A broadcast of any size in pieces of at most piece_bytes(), each one
  // board call as a one-shot broadcast on the slots is.
  void broadcast_in_pieces(const Communicator& communicator, const Call& call, void* data, uint32_t sequence,
                           Deadline deadline);

 private:
  // One board call of a large allreduce: `count` elements from `input`
  // into `output`, reduced chunk by chunk (see allreduce).
  void allreduce_piece(const Communicator& communicator, const Call& call, const std::byte* input,
                       std::byte* output, size_t count, uint32_t sequence, Deadline deadline);
  // The next board call's context (its number, stamp and signature).
  Wait next_call(const Communicator& communicator, const Call& call, uint32_t sequence, Deadline deadline);
  // Writes this member's slot of the Wait's call: `bytes` of `data`, then
  // the header, the stamp last (release), once the peers are done with it.
  void publish(const Wait& wait, const void* data, size_t bytes, int root);
  // Reduces `count` elements at `offset` of every member's slot (waiting
  // for each) into `output`, in member order.
  void reduce_slots(const Wait& wait, void* output, size_t offset, size_t count);
  // An allgather's piece: copies `bytes` of every member's slot (waiting
  // for each) to output + member x block_stride; this member's own from `own`.
  void copy_slots(const Wait& wait, std::byte* output, size_t block_stride, size_t bytes, const std::byte* own);
  // For a reduce_scatter's or alltoall's piece of `bytes` a block, each
  // slot packed with every member's piece but its writer's (board_blocks.cc):
  // copies this member's piece of every slot, and `own` for its own block,
  // to output + member x block_stride; or reduces them, in member order, into
  // `output`.
  void copy_packed_slots(const Wait& wait, std::byte* output, size_t block_stride, size_t bytes, const std::byte* own);
  void reduce_packed_slots(const Wait& wait, std::byte* output, size_t count, const std::byte* own);
  // publish() in two steps, for a member that fills its slot itself: the
  // slot's data once the peers are done with it, then the header and stamp.
  std::byte* claim_slot(const Wait& wait);
  void stamp_slot(const Wait& wait, int root);
  // Waits until `member`'s slot of `call` holds `stamp` and checks its signature.
  void await_slot(const Wait& wait, int member);
  // Waits until every peer finished board call `call` - 2 (so read what
  // this member wrote in the slot it writes now).
  void make_room(const Wait& wait);
  void finish(uint64_t call) { line(rank_).finished.store(call, std::memory_order_release); }
  // The spin-yield-sleep loop until `arrived()`, on a stamp `member`
  // writes when it reaches the Wait's call (awaited: the call's stamp
  // there) or on its `finished` words (awaited null).
  template <class Arrived>
  [[gnu::noinline]] void wait_until(const Wait& wait, int member, const std::atomic<uint64_t>* awaited,
                                    Arrived&& arrived) const;
  // The predicates of waits outside board_exchange.cc (wait_until is
  // instantiated there for them): a word equal to, or at least, a value.
  struct WordEquals {
    const std::atomic<uint64_t>& word;
    uint64_t value;
    bool operator()() const { return word.load(std::memory_order_acquire) == value; }
  };
  struct WordAtLeast {
    const std::atomic<uint64_t>& word;
    uint64_t value;
    bool operator()() const { return word.load(std::memory_order_acquire) >= value; }
  };
  // The ring (board_ring.cc).
  // One board call of a broadcast on the slots: `bytes` of `data`.
  void slot_broadcast(const Communicator& communicator, const Call& call, std::byte* data, size_t bytes,
                      uint32_t sequence, Deadline deadline, int source);
  void ring_broadcast(const Communicator& communicator, const Call& call, void* data, uint32_t sequence,
                      Deadline deadline, int source);
  void make_ring_room(const Wait& wait, uint64_t ring_call);
  void await_ring_entry(const Wait& wait, int member, uint64_t ring_call);
  // Leaves the check of its left neighbour's entry of `ring_call` for later (settle_ring_checks).
  void defer_ring_check(const Wait& wait, uint64_t ring_call);
  void publish_ring_finished();
  [[noreturn]] void fail(const Wait& wait, std::exception_ptr error) const;
  // Direct reads: `bytes` at `address` in `member`'s memory into `to`.
  void read_directly(const Wait& wait, int member, std::byte* to, uint64_t address, size_t bytes) const;
  // Finishes the Wait's call and waits until every peer finished it too
  // (so nobody reads this member's buffers any more).
  void finish_with_everyone(const Wait& wait);
  // The MismatchError for `member` having called `their_signature` (and
  // `their_root`, where known) where this member called the Wait's.
  [[noreturn]] void mismatch(const Wait& wait, int member, uint64_t their_signature,
                             std::optional<uint64_t> their_root) const;
  // A MismatchError when `member` shows it is in `wait`'s sequence with
  // another call, or past it without writing the awaited stamp (where one
  // is awaited); nothing otherwise.
  void check_mismatch(const Wait& wait, int member, const std::atomic<uint64_t>* awaited) const;

  std::unique_ptr<transport::SharedRegion> region_;
  std::byte* base_;
  int rank_;
  int size_;
  size_t capacity_;
  size_t slot_bytes_;
  size_t slot_stride_;
  size_t member_stride_;
  uint64_t calls_ = 0;
  // What this member knows each peer finished, from what it saw of it,
  // and the least of it (so make_room looks at no peer in the common case).
  std::vector<uint64_t> known_finished_;
  uint64_t least_known_finished_ = 0;
  // The ring: calls so far, what each peer is known to have finished of
  // it, and this member's checks not settled yet: those of ring calls
  // after ring_checked_through_, each at its call's index (ring_call 0: none).
  uint64_t ring_calls_ = 0;
  std::vector<uint64_t> known_ring_finished_;
  uint64_t least_known_ring_finished_ = 0;
  // What a check needs, and what rebuilds its call for an error's words.
  struct PendingRingCheck {
    uint64_t ring_call = 0;
    uint64_t stamp = 0;
    uint64_t signature = 0;
    uint32_t sequence = 0;
    size_t count = 0;
    DataType type = DataType::uint8;
    int root = 0;  // as the call shows it (broadcast's call.root)
    int previous_root = -1;
    uint64_t group_digest = 0;
  };
  std::vector<PendingRingCheck> pending_ring_checks_;
  uint64_t ring_checked_through_ = 0;
  // What this member's line says of it (ring_finished): a store of the same
  // value again would only take the line back from a peer that read it.
  uint64_t published_ring_finished_ = 0;
  BoardModel model_;
  bool direct_reads_ = false;
  uint64_t probe_word_ = 0;
  std::vector<uint64_t> process_ids_;  // every member's, from publish_identity
  // An in-place reduce_scatter's own chunk, kept while the reduction writes
  // over it (reduce_packed_slots).
  std::vector<std::byte> own_piece_;
  // What reduce_packed_slots reduces at a time: the output's chunk stays in
  // the cache through every member's pass.
  static constexpr size_t kReduceChunkBytes = size_t{32} << 10;
};

}  // namespace chorus::algorithms
