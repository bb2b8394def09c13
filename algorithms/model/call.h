// What one rank asks of one collective call: the input to every Plan builder,
// to the cost model and to the mismatch check between ranks.
//
// Element counts, per collective:
// - allreduce, broadcast, reduce: `count` is the whole buffer.
// - allgather, gather, scatter, reduce_scatter, alltoall: `count` is one
//   rank's block; the large side (allgather/gather output, scatter/
//   reduce_scatter input, both alltoall buffers) holds `size` blocks in rank order.
// - the v variants (allgatherv, gatherv, scatterv, reduce_scatter_v) set
//   `counts` (one entry per rank, zeros allowed); blocks are contiguous in rank
//   order, block r starts at the sum of counts[0..r).
// - alltoallv sets `send_counts` (elements this rank sends to each peer) and
//   `recv_counts` (elements it receives from each), blocks contiguous in peer order.
// - send/recv (point to point) use `count`, `root` as the peer and `user_tag`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/memory.h"
#include "base/topology.h"
#include "base/types.h"

namespace chorus::algorithms {

enum class Collective : uint8_t {
  allreduce, broadcast, barrier, reduce, reduce_scatter, allgather, gather, scatter, alltoall, send, recv,
};

std::string_view to_string(Collective collective);

struct Call {
  Collective collective = Collective::allreduce;
  int rank = 0;
  int size = 1;
  size_t count = 0;  // elements (see above)
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  bool in_place = true;
  std::vector<size_t> counts;       // v variants; empty otherwise
  std::vector<size_t> send_counts;  // alltoallv
  std::vector<size_t> recv_counts;  // alltoallv
  uint32_t user_tag = 0;            // send/recv
  // Nonzero for a grouped call (chorus/collectives_grouped.h: many buffers
  // packed end to end into the one buffer `count` describes): a digest of
  // its members' counts, folded into the signature, so ranks that split the
  // same total differently fail with MismatchError. Plans ignore it.
  uint64_t group_digest = 0;
  // The root that the Context's last rooted collective named (broadcast,
  // gather, scatter and their v variants; not reduce), or -1: none yet, or
  // a call the chain does not cover (a helper group's, a point-to-point
  // message, a Context of more than kMaxChainedRanks ranks). Set as the call
  // is issued (api/issue.cc) and folded into the signature, so a rooted
  // call whose ranks disagreed on the root, and which every rank finished,
  // fails the next call that compares signatures (algorithms/execution/
  // late_root_checks.h). Plans ignore it.
  int previous_root = -1;
  // Where the caller's buffers live; the executor's memory backend and the
  // transports follow it. Plans do not depend on it.
  Memory memory;
  // The caller's stream of the memory's kind (null: the kind's default),
  // for a backend that queues its work on it (backends/registry.h). Plans
  // ignore it.
  void* stream = nullptr;
  // Which ranks share a host, for topology-aware Plans; null: all on one.
  std::shared_ptr<const Topology> topology;

  bool variable() const { return !counts.empty() || !send_counts.empty(); }
  size_t element_bytes() const { return element_size(type); }
  // Elements of rank r's block (allgather/gather/scatter/reduce_scatter and v variants).
  size_t block_count(int r) const { return counts.empty() ? count : counts[static_cast<size_t>(r)]; }
  // Element offset of rank r's block.
  size_t block_offset(int r) const;
  // Elements of all blocks together.
  size_t total_count() const;
  // Bytes of the whole buffer for allreduce/broadcast/reduce.
  size_t bytes() const { return count * element_size(type); }
  // The topology, or one host holding every rank.
  Topology hosts() const { return topology ? *topology : Topology::single_host(size); }
  int host_count() const { return topology ? topology->hosts() : 1; }
};

// The bytes of the caller's input and output that a Plan for this rank may
// touch (the simulator checks every region against them). In-place layouts:
// allgather: input is this rank's block inside output; gather on root: input
// is root's block inside output; scatter on root: output is root's block
// inside input (the plan reads `input`, which for an in-place call is the same
// memory as `output`, so the output extent is then the whole input).
size_t input_bytes(const Call& call);
size_t output_bytes(const Call& call);

// The fixed-size calls in one expression (tests and the public API).
inline Call make_call(Collective collective, int rank, int size, size_t count, DataType type, ReduceOp op, int root,
                      bool in_place) {
  Call call;
  call.collective = collective;
  call.rank = rank;
  call.size = size;
  call.count = count;
  call.type = type;
  call.op = op;
  call.root = root;
  call.in_place = in_place;
  return call;
}

// The largest Context whose roots a signature holds whole (its root byte;
// 255 is left out, as a reduce_scatter_v's marker there): there a rooted
// call needs no root check message of its own (late_root_checks.h).
inline constexpr int kMaxChainedRanks = 255;

// 64 bits every rank computes identically for the same call; carried in every
// frame so a rank that called something else gets MismatchError.
uint64_t call_signature(const Call& call);
// The signature of a rooted call's root check (algorithms/execution/root_check.h):
// the call's without the root's byte (the check's payload carries the whole
// root) and marked, so a mismatch message neither prints a root nor passes
// the check's 4-byte message for the call's data.
uint64_t root_check_signature(const Call& call);
// Where two signatures differ only in the previous rooted call's root
// (Call::previous_root), in a byte that shows it: that root on each side,
// for words about roots rather than two descriptions that look alike.
struct ChainRoots {
  int theirs = 0;
  int mine = 0;
};
std::optional<ChainRoots> chain_difference(uint64_t theirs, uint64_t mine);
// What the signature of a rooted call's frame names: the collective and the
// root (its root byte: the root whole on a Context of up to
// kMaxChainedRanks ranks). nullopt for a root check's signature, an
// unrooted call's or one of no known collective.
struct SignedRoot {
  Collective collective = Collective::broadcast;
  int root = 0;
};
std::optional<SignedRoot> signed_root(uint64_t signature);
// Human description of the call a signature came from, for MismatchError
// messages ("allreduce of 1000 float32 sum"); the count is only known modulo 2^32.
std::string describe_signature(uint64_t signature);

// "count 1000 float32 sum", "count 8 uint8 from root 2", "4 ranks" (a
// barrier): what timeout and stall messages say about a call.
std::string describe_call(const Call& call);

}  // namespace chorus::algorithms
