// Names of collectives and the 64-bit call signature checked on every frame.
//
// Signature layout (high to low): 8 bits collective kind + 1 (so no real call
// has signature 0; its top bits mark device memory, a root check and a
// grouped call), 8 bits data type, 8 bits reduce op, 8 bits root (low bits),
// 32 bits count (low bits). Fields a collective ignores are zero, so
// ranks that differ only in something irrelevant (the root of an allreduce)
// still agree.
//
// The previous rooted call's root (Call::previous_root), where there is one,
// goes in the byte this collective leaves free: the root byte of a call
// without a root, the op byte of a broadcast, gather or scatter; folded into
// the count digest where the free byte holds the digest's marker (gatherv,
// scatterv, reduce_scatter_v). A reduce has no byte free and carries none.
#include "algorithms/model/call.h"

#include "base/log.h"

namespace chorus::algorithms {

namespace {
constexpr int kind_shift = 56;
constexpr int type_shift = 48;
constexpr int op_shift = 40;
constexpr int root_shift = 32;
constexpr uint64_t byte_mask = 0xff;
constexpr uint64_t count_mask = 0xffffffffull;
constexpr uint64_t counts_digest_marker = 0xff;
constexpr uint64_t collective_count = static_cast<uint64_t>(Collective::recv) + 1;
// In the kind byte, above every collective's number: the call moves device
// memory (any kind but host). A rank moving host memory and one moving
// device memory in the same collective would otherwise speak different
// protocols on a pair that moves both; with the bit they fail with
// MismatchError.
constexpr uint64_t device_memory_bit = 0x80;
// Also in the kind byte: the frame is a rooted call's root check, whose
// signature carries no root.
constexpr uint64_t root_check_bit = 0x40;
// Also in the kind byte: a grouped call, whose count bits are a digest of
// its total and its members' counts.
constexpr uint64_t grouped_bit = 0x20;
// Also in the kind byte: the previous rooted call's root is folded in.
constexpr uint64_t chain_bit = 0x10;

enum class ChainPlace { none, root_byte, op_byte, digest };

// Where a call carries the previous rooted call's root (see above).
ChainPlace chain_place(Collective collective, bool counts_digest) {
  switch (collective) {
    case Collective::reduce:
    case Collective::send:
    case Collective::recv: return ChainPlace::none;
    case Collective::broadcast:
    case Collective::gather:
    case Collective::scatter: return counts_digest ? ChainPlace::digest : ChainPlace::op_byte;
    case Collective::reduce_scatter: return counts_digest ? ChainPlace::digest : ChainPlace::root_byte;
    default: return ChainPlace::root_byte;
  }
}

// An odd multiplier: distinct roots give distinct 32-bit digests.
uint64_t chain_digest(uint64_t root) { return ((root + 1) * 0x9E3779B1ull) & count_mask; }
}  // namespace

std::string_view to_string(Collective collective) {
  switch (collective) {
    case Collective::allreduce: return "allreduce";
    case Collective::broadcast: return "broadcast";
    case Collective::barrier: return "barrier";
    case Collective::reduce: return "reduce";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::allgather: return "allgather";
    case Collective::gather: return "gather";
    case Collective::scatter: return "scatter";
    case Collective::alltoall: return "alltoall";
    case Collective::send: return "send";
    case Collective::recv: return "recv";
  }
  return "unknown collective";
}

size_t Call::block_offset(int r) const {
  if (counts.empty()) return count * static_cast<size_t>(r);
  size_t offset = 0;
  for (int i = 0; i < r; ++i) offset += counts[static_cast<size_t>(i)];
  return offset;
}

size_t Call::total_count() const {
  if (counts.empty()) return count * static_cast<size_t>(size);
  size_t total = 0;
  for (size_t c : counts) total += c;
  return total;
}

size_t input_bytes(const Call& call) {
  const size_t element = call.element_bytes();
  const bool root = call.rank == call.root;
  switch (call.collective) {
    case Collective::barrier:
    case Collective::broadcast:
    case Collective::recv: return 0;
    case Collective::allgather:
    case Collective::gather: return call.block_count(call.rank) * element;
    case Collective::scatter: return root ? call.total_count() * element : 0;
    case Collective::reduce_scatter: return call.total_count() * element;
    case Collective::alltoall: {
      if (call.send_counts.empty()) return call.count * static_cast<size_t>(call.size) * element;
      size_t total = 0;
      for (size_t count : call.send_counts) total += count;
      return total * element;
    }
    default: return call.bytes();
  }
}

size_t output_bytes(const Call& call) {
  const size_t element = call.element_bytes();
  const bool root = call.rank == call.root;
  switch (call.collective) {
    case Collective::barrier:
    case Collective::send: return 0;
    // Only root's output is written (the public API passes null elsewhere);
    // in place, a non-root's buffer is its input, which the plan reads.
    case Collective::reduce: return root || call.in_place ? call.bytes() : 0;
    case Collective::allgather: return call.total_count() * element;
    case Collective::gather:
      if (root) return call.total_count() * element;
      return call.in_place ? call.block_count(call.rank) * element : 0;
    case Collective::scatter:
      return root && call.in_place ? call.total_count() * element : call.block_count(call.rank) * element;
    case Collective::reduce_scatter: return call.block_count(call.rank) * element;
    case Collective::alltoall: {
      if (call.recv_counts.empty()) return call.count * static_cast<size_t>(call.size) * element;
      size_t total = 0;
      for (size_t count : call.recv_counts) total += count;
      return total * element;
    }
    default: return call.bytes();
  }
}

uint64_t call_signature(const Call& call) {
  uint64_t kind = static_cast<uint64_t>(call.collective) + 1;
  if (!call.memory.on_host() && call.collective != Collective::barrier) kind |= device_memory_bit;
  const ChainPlace chain = call.previous_root >= 0 ? chain_place(call.collective, !call.counts.empty())
                                                  : ChainPlace::none;
  const auto chained = static_cast<uint64_t>(call.previous_root) & byte_mask;
  if (chain != ChainPlace::none) kind |= chain_bit;
  uint64_t signature = kind << kind_shift;
  if (chain == ChainPlace::root_byte) signature |= chained << root_shift;
  if (chain == ChainPlace::op_byte) signature |= chained << op_shift;
  if (call.collective == Collective::barrier) return signature;
  signature |= static_cast<uint64_t>(call.type) << type_shift;
  // Every rank must pass the same per-rank counts to a v variant (alltoallv
  // excepted: its counts are this rank's own); folding them in makes ranks
  // that disagree fail with MismatchError instead of a short read or a hang.
  uint64_t count_bits = static_cast<uint64_t>(call.count);
  for (size_t count : call.counts) count_bits = count_bits * 0x100000001b3ull ^ static_cast<uint64_t>(count);
  if (call.group_digest != 0) {
    signature |= grouped_bit << kind_shift;
    // The high half folded down too: only 32 bits fit.
    count_bits = count_bits * 0x100000001b3ull ^ call.group_digest;
    count_bits ^= count_bits >> 32;
  }
  if (chain == ChainPlace::digest) count_bits ^= chain_digest(chained);
  signature |= count_bits & count_mask;
  if (call.collective == Collective::allreduce || call.collective == Collective::reduce ||
      call.collective == Collective::reduce_scatter)
    signature |= static_cast<uint64_t>(call.op) << op_shift;
  if (call.collective == Collective::broadcast || call.collective == Collective::gather ||
      call.collective == Collective::scatter || call.collective == Collective::reduce)
    signature |= (static_cast<uint64_t>(static_cast<uint32_t>(call.root)) & byte_mask) << root_shift;
  // A count digest is marked, so that a mismatch message never prints it as
  // a count: in the op byte, free in the non-reducing collectives; in the
  // root byte for reduce_scatter_v, which has an op and no root.
  if (!call.counts.empty()) {
    const int marker_shift = call.collective == Collective::reduce_scatter ? root_shift : op_shift;
    signature |= static_cast<uint64_t>(counts_digest_marker) << marker_shift;
  }
  return signature;
}

uint64_t root_check_signature(const Call& call) {
  return (call_signature(call) & ~(byte_mask << root_shift)) | root_check_bit << kind_shift;
}

std::optional<ChainRoots> chain_difference(uint64_t theirs, uint64_t mine) {
  if (theirs == mine || !((theirs >> kind_shift) & chain_bit) || !((mine >> kind_shift) & chain_bit)) return std::nullopt;
  const uint64_t kind = (mine >> kind_shift) & ~(device_memory_bit | root_check_bit | grouped_bit | chain_bit) & byte_mask;
  if (kind == 0 || kind > collective_count) return std::nullopt;
  const auto collective = static_cast<Collective>(kind - 1);
  const int marker_shift = collective == Collective::reduce_scatter ? root_shift : op_shift;
  const bool digest = ((mine >> marker_shift) & byte_mask) == counts_digest_marker;
  int shift = 0;
  switch (chain_place(collective, digest)) {
    case ChainPlace::root_byte: shift = root_shift; break;
    case ChainPlace::op_byte: shift = op_shift; break;
    default: return std::nullopt;
  }
  const uint64_t chain_mask = byte_mask << shift;
  if ((theirs & ~chain_mask) != (mine & ~chain_mask)) return std::nullopt;
  return ChainRoots{static_cast<int>((theirs >> shift) & byte_mask), static_cast<int>((mine >> shift) & byte_mask)};
}

std::optional<SignedRoot> signed_root(uint64_t signature) {
  if ((signature >> kind_shift) & root_check_bit) return std::nullopt;
  const uint64_t kind =
      (signature >> kind_shift) & ~(device_memory_bit | root_check_bit | grouped_bit | chain_bit) & byte_mask;
  if (kind == 0 || kind > collective_count) return std::nullopt;
  const auto collective = static_cast<Collective>(kind - 1);
  const bool rooted = collective == Collective::broadcast || collective == Collective::reduce ||
                      collective == Collective::gather || collective == Collective::scatter;
  if (!rooted) return std::nullopt;
  return SignedRoot{collective, static_cast<int>((signature >> root_shift) & byte_mask)};
}

std::string describe_signature(uint64_t signature) {
  const bool device_memory = (signature >> kind_shift) & device_memory_bit;
  const bool root_check = (signature >> kind_shift) & root_check_bit;
  const bool grouped = (signature >> kind_shift) & grouped_bit;
  const bool chained = (signature >> kind_shift) & chain_bit;
  uint64_t kind =
      (signature >> kind_shift) & ~(device_memory_bit | root_check_bit | grouped_bit | chain_bit) & byte_mask;
  if (kind == 0 || kind > collective_count) return cat("unknown call (signature 0x", std::hex, signature, ")");
  auto collective = static_cast<Collective>(kind - 1);
  const std::string memory = device_memory ? " on device memory" : "";
  const auto chain_text = [&](bool counts_digest) -> std::string {
    if (!chained) return "";
    switch (chain_place(collective, counts_digest)) {
      case ChainPlace::root_byte:
        return cat(", after a rooted call naming root ", (signature >> root_shift) & byte_mask);
      case ChainPlace::op_byte: return cat(", after a rooted call naming root ", (signature >> op_shift) & byte_mask);
      case ChainPlace::digest: return ", after a rooted call (its root folded into the digest)";
      case ChainPlace::none: break;
    }
    return "";
  };
  if (collective == Collective::barrier) return "barrier" + chain_text(false);
  uint64_t type_bits = (signature >> type_shift) & byte_mask;
  uint64_t count = signature & count_mask;
  std::string type_name = type_bits <= static_cast<uint64_t>(DataType::float64)
                              ? std::string(to_string(static_cast<DataType>(type_bits)))
                              : cat("type#", type_bits);
  const int marker_shift = collective == Collective::reduce_scatter ? root_shift : op_shift;
  const bool digest = ((signature >> marker_shift) & byte_mask) == counts_digest_marker;
  std::string text = grouped  ? cat("grouped ", to_string(collective), " of ", type_name)
                     : digest ? cat(to_string(collective), "v of ", type_name, " (per-rank counts digest 0x", std::hex,
                                    count, std::dec, ")")
                              : cat(to_string(collective), " of ", count, " ", type_name);
  const bool reduces = collective == Collective::allreduce || collective == Collective::reduce ||
                       collective == Collective::reduce_scatter;
  if (reduces) {
    uint64_t op_bits = (signature >> op_shift) & byte_mask;
    text += op_bits <= static_cast<uint64_t>(ReduceOp::bxor)
                ? cat(" ", to_string(static_cast<ReduceOp>(op_bits)))
                : cat(" op#", op_bits);
  }
  const bool rooted = collective == Collective::broadcast || collective == Collective::reduce ||
                      collective == Collective::gather || collective == Collective::scatter;
  if (rooted && !root_check) text += cat(" from root ", (signature >> root_shift) & byte_mask);
  if (grouped) text += cat(" (total and member counts digest 0x", std::hex, count, std::dec, ")");
  // The whole buffer's bytes (a block's, for the collectives whose count is
  // per rank), not a message's: large calls travel in many messages.
  if (!digest && !grouped && type_bits <= static_cast<uint64_t>(DataType::float64)) {
    const uint64_t bytes = count * element_size(static_cast<DataType>(type_bits));
    const bool per_rank = collective == Collective::allgather || collective == Collective::gather ||
                          collective == Collective::scatter || collective == Collective::reduce_scatter ||
                          collective == Collective::alltoall;
    text += cat(" (", bytes, per_rank ? " bytes per rank)" : " bytes)");
  }
  return text + memory + chain_text(digest) + (root_check ? " (its root check)" : "");
}

std::string describe_call(const Call& call) {
  if (call.collective == Collective::barrier) return cat(call.size, " ranks");
  std::string text = call.variable() ? cat("variable counts, ", call.total_count(), " total ", to_string(call.type))
                                     : cat("count ", call.count, " ", to_string(call.type));
  switch (call.collective) {
    case Collective::allreduce:
    case Collective::reduce_scatter: return cat(text, " ", to_string(call.op));
    case Collective::reduce: return cat(text, " ", to_string(call.op), " to root ", call.root);
    case Collective::broadcast:
    case Collective::scatter: return cat(text, " from root ", call.root);
    case Collective::gather: return cat(text, " to root ", call.root);
    case Collective::send: return cat(text, " to rank ", call.root, " tag ", call.user_tag);
    case Collective::recv: return cat(text, " from rank ", call.root, " tag ", call.user_tag);
    default: return text;
  }
}

}  // namespace chorus::algorithms
