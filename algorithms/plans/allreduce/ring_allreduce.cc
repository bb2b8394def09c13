// Ring allreduce as a Plan.
//
// The buffer is cut into P chunks. Reduce-scatter: in step k rank r sends
// chunk r-k to its right neighbour and receives chunk r-k-1 from its left,
// reducing it into its own copy; after P-1 steps rank r owns the full
// reduction of chunk r+1. Allgather: in step k rank r forwards chunk r+1-k
// and receives chunk r-k straight into the output (no copy).
//
// Each chunk is further cut into segments, and each segment travels the ring
// independently: segment s of step k+1 leaves as soon as segment s of step k
// is reduced, so reducing one segment overlaps with sending the next.
//
// In place, a received segment cannot land in the output (which still holds
// this rank's contribution), so it lands in one of a few scratch slots that
// are reused round robin; scratch stays a few segments for any buffer size.
// Out of place, it lands in the output and the input is reduced into it,
// which needs no scratch at all (every op is commutative).
#include "algorithms/plans/allreduce/ring_allreduce.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

namespace {

int ring_index(long long value, int size) {
  long long wrapped = value % size;
  return static_cast<int>(wrapped < 0 ? wrapped + size : wrapped);
}

class RingLayout {
 public:
  RingLayout(const Call& call, const PlanTuning& tuning)
      : size_(call.size), count_(call.count), element_bytes_(element_size(call.type)) {
    segment_elements_ = std::max<size_t>(1, tuning.segment_bytes / element_bytes_);
    chunk_first_segment_.resize(size_ + 1, 0);
    for (int chunk = 0; chunk < size_; ++chunk)
      chunk_first_segment_[chunk + 1] = chunk_first_segment_[chunk] + segments(chunk);
  }

  size_t chunk_elements(int chunk) const { return ring_chunk_elements(count_, size_, chunk); }
  size_t chunk_start(int chunk) const {
    size_t base = count_ / size_, extra = count_ % size_;
    size_t c = static_cast<size_t>(chunk);
    return c * base + std::min(c, extra);
  }
  size_t segments(int chunk) const { return (chunk_elements(chunk) + segment_elements_ - 1) / segment_elements_; }
  size_t total_segments() const { return chunk_first_segment_[size_]; }
  // Index of (chunk, segment) among all segments, for per-segment bookkeeping.
  size_t segment_index(int chunk, size_t segment) const { return chunk_first_segment_[chunk] + segment; }
  size_t max_segment_bytes() const {
    return std::min(segment_elements_, chunk_elements(0)) * element_bytes_;  // chunk 0 is a largest chunk
  }

  Region segment(BufferKind buffer, int chunk, size_t segment) const {
    size_t first = segment * segment_elements_;
    size_t elements = std::min(segment_elements_, chunk_elements(chunk) - first);
    return Region{buffer, (chunk_start(chunk) + first) * element_bytes_, elements * element_bytes_};
  }

 private:
  int size_;
  size_t count_;
  size_t element_bytes_;
  size_t segment_elements_;
  std::vector<size_t> chunk_first_segment_;
};

}  // namespace

size_t ring_chunk_elements(size_t count, int size, int chunk) {
  size_t base = count / static_cast<size_t>(size), extra = count % static_cast<size_t>(size);
  return base + (static_cast<size_t>(chunk) < extra ? 1 : 0);
}

namespace {

bool ring_allreduce_supports(const Call& call) { return call.collective == Collective::allreduce; }

double ring_allreduce_cost(const Call& call, const CostModel& model) {
  if (call.size <= 1) return 0.0;
  double ranks = call.size;
  double bytes = static_cast<double>(call.bytes());
  // Reductions overlap the wire: while the executor reduces one received
  // piece, the progress thread is already receiving the next into another
  // scratch slot, so per step only a pipeline fill stays on the critical
  // path. 16 KiB is fitted (with the loopback link model) to the median of
  // three interleaved 4-rank sweeps in benchmarks/README.md.
  constexpr double exposed_reduction_bytes = 16 * 1024;
  const double exposed_reduction = std::min(bytes / ranks, exposed_reduction_bytes);
  return 2.0 * (ranks - 1) * model.alpha_seconds + 2.0 * (ranks - 1) / ranks * bytes * model.beta_seconds_per_byte +
         (ranks - 1) * exposed_reduction * model.gamma_seconds_per_byte;
}

Plan ring_allreduce_plan(const Call& call, const PlanTuning& tuning) {
  Plan plan;
  const int size = call.size, rank = call.rank;
  if (call.count == 0) return plan;
  if (size == 1) {
    if (!call.in_place)
      plan.copy(Region{BufferKind::input, 0, call.bytes()}, Region{BufferKind::output, 0, call.bytes()});
    return plan;
  }

  const RingLayout layout(call, tuning);
  // Each rank sends 2 (P-1) chunks' worth of segments on one queue; slots
  // number them, and must fit the 32 bits of the tag.
  if (2 * layout.total_segments() > std::numeric_limits<uint32_t>::max())
    throw InvalidArgument(cat("rank ", rank, ": ring allreduce of ", call.count, " elements with segments of ",
                              tuning.segment_bytes, " bytes needs more than 2^32 messages; use larger segments"));

  const int right = ring_index(rank + 1, size), left = ring_index(rank - 1, size);
  const BufferKind own_data = call.in_place ? BufferKind::output : BufferKind::input;
  uint32_t next_send_slot = 0, next_recv_slot = 0;

  // Per segment: the reduce that produced it here, and the reduce-scatter
  // send that read it (the allgather must not overwrite it before that).
  std::vector<StepId> produced_by(layout.total_segments(), no_step);
  std::vector<StepId> read_by_send(layout.total_segments(), no_step);

  const size_t scratch_slots = std::max<size_t>(1, tuning.scratch_segments);
  const size_t scratch_slot_bytes = layout.max_segment_bytes();
  std::vector<StepId> scratch_released_by(scratch_slots, no_step);
  size_t next_scratch_use = 0;
  if (call.in_place) plan.scratch_bytes = scratch_slots * scratch_slot_bytes;

  // Reduce-scatter step 0: this rank's own chunk leaves untouched.
  for (size_t s = 0; s < layout.segments(rank); ++s)
    read_by_send[layout.segment_index(rank, s)] =
        plan.send(layout.segment(own_data, rank, s), right, next_send_slot++);

  for (int step = 0; step < size - 1; ++step) {
    const int chunk = ring_index(static_cast<long long>(rank) - step - 1, size);
    for (size_t s = 0; s < layout.segments(chunk); ++s) {
      const Region target = layout.segment(BufferKind::output, chunk, s);
      StepId reduced;
      if (call.in_place) {
        const size_t slot = next_scratch_use++ % scratch_slots;
        const Region landing{BufferKind::scratch, slot * scratch_slot_bytes, target.length};
        StepId received = plan.recv(left, next_recv_slot++, landing, {scratch_released_by[slot]});
        reduced = plan.reduce(landing, target, {received});
        scratch_released_by[slot] = reduced;
      } else {
        StepId received = plan.recv(left, next_recv_slot++, target);
        reduced = plan.reduce(layout.segment(BufferKind::input, chunk, s), target, {received});
      }
      const size_t index = layout.segment_index(chunk, s);
      produced_by[index] = reduced;
      if (step < size - 2) read_by_send[index] = plan.send(target, right, next_send_slot++, {reduced});
    }
  }

  // Allgather step 0: the chunk this rank fully reduced.
  const int owned = ring_index(rank + 1, size);
  for (size_t s = 0; s < layout.segments(owned); ++s)
    plan.send(layout.segment(BufferKind::output, owned, s), right, next_send_slot++,
              {produced_by[layout.segment_index(owned, s)]});

  for (int step = 0; step < size - 1; ++step) {
    const int chunk = ring_index(static_cast<long long>(rank) - step, size);
    for (size_t s = 0; s < layout.segments(chunk); ++s) {
      const Region target = layout.segment(BufferKind::output, chunk, s);
      StepId received = plan.recv(left, next_recv_slot++, target, {read_by_send[layout.segment_index(chunk, s)]});
      if (step < size - 2) plan.send(target, right, next_send_slot++, {received});
    }
  }
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions ring_allreduce{ring_allreduce_supports, ring_allreduce_cost, ring_allreduce_plan};

}  // namespace chorus::algorithms
