// Small shared pieces of the data-movement Plans (allgather, gather,
// scatter, alltoall, large broadcasts): where each rank's block lives, rank
// arithmetic on a ring, and cutting a region into pipeline segments.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

#include "algorithms/model/call.h"
#include "algorithms/model/plan.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

// value mod size, in [0, size).
inline int wrap_rank(long long value, int size) {
  long long wrapped = value % size;
  return static_cast<int>(wrapped < 0 ? wrapped + size : wrapped);
}

// The lowest set bit of value: in the binomial trees rooted at relative rank
// 0, the span of relative ranks [value, value + lowest_bit(value)) under a
// non-root rank.
inline int lowest_bit(int value) { return value & -value; }

// Byte offsets of the blocks of `counts` (elements) in order, plus the end:
// block i is [offsets[i], offsets[i + 1]).
inline std::vector<size_t> prefix_byte_offsets(const std::vector<size_t>& counts, size_t element_bytes) {
  std::vector<size_t> offsets(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i) offsets[i + 1] = offsets[i] + counts[i] * element_bytes;
  return offsets;
}

// Element count of every rank's block of an allgather/gather/scatter call.
inline std::vector<size_t> block_counts(const Call& call) {
  if (!call.counts.empty()) return call.counts;
  return std::vector<size_t>(static_cast<size_t>(call.size), call.count);
}

// The sub-range [first, last) of `offsets` as a region of `buffer`, shifted
// so that offsets[base] is at 0 (for buffers holding a slice of the blocks).
inline Region block_range(BufferKind buffer, const std::vector<size_t>& offsets, size_t first, size_t last,
                          size_t base = 0) {
  return Region{buffer, offsets[first] - offsets[base], offsets[last] - offsets[first]};
}

// ceil(log2 P) alpha + (P-1)/P n beta + n gamma, n the bytes of all blocks:
// every block moved in ceil(log2 P) rounds, relayed through scratch (one copy
// of every byte), one rank's link carrying every block but its own. The cost
// of the binomial gather and scatter and of the Bruck allgather.
inline double relayed_blocks_cost(const Call& call, const CostModel& model) {
  if (call.size <= 1) return 0.0;
  const double ranks = call.size;
  const double bytes = static_cast<double>(call.total_count() * call.element_bytes());
  return ceil_log2(call.size) * model.alpha_seconds + (ranks - 1) / ranks * bytes * model.beta_seconds_per_byte +
         bytes * model.gamma_seconds_per_byte;
}

// Segments of whole elements of about tuning's size, so pipelined plans cut
// every region the same way on the sending and the receiving side.
inline size_t segment_bytes_of(const PlanTuning& tuning, size_t element_bytes) {
  return std::max<size_t>(1, tuning.segment_bytes / element_bytes) * element_bytes;
}

inline size_t segment_count(size_t length, size_t segment_bytes) {
  return (length + segment_bytes - 1) / segment_bytes;
}

// Calls visit(piece) for each segment of region, in order; nothing for an
// empty region.
template <class Visit>
void for_each_segment(const Region& region, size_t segment_bytes, Visit&& visit) {
  for (size_t first = 0; first < region.length; first += segment_bytes)
    visit(Region{region.buffer, region.offset + first, std::min(segment_bytes, region.length - first)});
}

// Slots are the low 32 bits of the wire tag; a plan numbering its messages
// must not wrap them.
inline void check_message_count(const Call& call, size_t messages, const char* algorithm) {
  if (messages > std::numeric_limits<uint32_t>::max())
    throw InvalidArgument(cat("rank ", call.rank, ": ", algorithm, " ", to_string(call.collective), " would need ",
                              messages, " messages (more than 2^32); use larger segments"));
}

}  // namespace chorus::algorithms
