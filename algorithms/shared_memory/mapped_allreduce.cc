// The mapped allreduce (algorithms/shared_memory/mapped_allreduce.h).
#include "algorithms/shared_memory/mapped_allreduce.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "algorithms/model/aligned_chunks.h"
#include "algorithms/shared_memory/mapped_peers.h"
#include "algorithms/execution/staging.h"
#include "base/error.h"
#include "base/log.h"
#include "memory/memory_backend.h"
#include "memory/registry.h"
#include "transport/transport.h"

namespace chorus::algorithms {
namespace {

// Chunks start on 256-byte boundaries, so the kernels move whole 16-byte
// packs when the buffers are aligned (cudaMalloc's are).
constexpr size_t kChunkAlignmentBytes = 256;

using Range = ElementRange;

// Rank p's chunk of `count` elements of `element_bytes`.
Range chunk_of(int p, int ranks, size_t count, size_t element_bytes) {
  return aligned_chunk(p, ranks, count, element_bytes, kChunkAlignmentBytes);
}

class MappedCall {
 public:
  MappedCall(const Communicator& communicator, const Call& call, const void* input, void* output, uint32_t sequence,
             Deadline deadline, MemoryBackend& backend)
      : call_(call),
        input_(static_cast<const std::byte*>(input)),
        output_(static_cast<std::byte*>(output)),
        bytes_(call.count * call.element_bytes()),
        sequence_(sequence),
        deadline_(deadline),
        communicator_(communicator),
        backend_(backend) {}

  enum class Variant { one_shot, two_shots, leader };

  void run(Variant variant) {
    // A: every rank's input and output, mapped here.
    peers_.emplace(communicator_, call_, input_, bytes_, output_, bytes_, sequence_, deadline_);
    switch (variant) {
      case Variant::one_shot: run_one_shot(); break;
      case Variant::two_shots: run_two_shots(); break;
      case Variant::leader: run_leader(); break;
    }
  }

 private:
  int rank() const { return peers_->rank(); }
  int size() const { return peers_->size(); }
  void barrier(uint32_t step) { peers_->barrier(step); }

  // into[range] = every rank's input, combined starting with rank `first`
  // (then the others in rank order), and averaged. In place `into` is that
  // rank's own input, so it is not copied first.
  void reduce_from_all(std::byte* into, Range range, int first) {
    if (range.count == 0) return;
    const size_t offset = range.first * call_.element_bytes();
    const size_t bytes = range.count * call_.element_bytes();
    const std::byte* start = peers_->input(first) + offset;
    if (into != start) backend_.copy(into, start, bytes);
    for (int p = 0; p < size(); ++p)
      if (p != first) backend_.reduce(call_.type, call_.op, into, peers_->input(p) + offset, range.count);
    if (call_.op == ReduceOp::avg) backend_.average(call_.type, into, range.count, static_cast<size_t>(size()));
  }

  void run_one_shot() {
    const bool in_place = input_ == output_;
    std::byte* into = in_place ? backend_.thread_scratch(bytes_) : output_;
    QueuedWork queued(backend_, call_.rank);
    // Every rank computes the whole result in the same order: the same bits.
    reduce_from_all(into, {0, call_.count}, 0);
    queued.finish();
    barrier(1);
    if (in_place) backend_.copy(output_, into, bytes_);
  }

  void run_two_shots() {
    const size_t element = call_.element_bytes();
    const Range own = chunk_of(rank(), size(), call_.count, element);
    // This rank's own input first: in place, that is this chunk of the
    // output itself. Only this rank computes the chunk, so the order is its own.
    QueuedWork reduced(backend_, call_.rank);
    reduce_from_all(output_ + own.first * element, own, rank());
    reduced.finish();
    barrier(1);
    QueuedWork gathered(backend_, call_.rank);
    for (int p = 0; p < size(); ++p) {
      if (p == rank()) continue;
      const Range chunk = chunk_of(p, size(), call_.count, element);
      if (chunk.count == 0) continue;
      const size_t offset = chunk.first * element;
      backend_.copy(output_ + offset, peers_->output(p) + offset, chunk.count * element);
    }
    gathered.finish();
    barrier(2);
  }

  // Rank 0 alone reduces every input into its scratch, in rank order, then
  // copies the result into every rank's output; nobody else touches the
  // device. Scratch first: a rank's output may be its input, which the
  // reduction still reads (its stream runs the copies after it). B: the
  // results are in place, and nobody reads any buffer any more.
  void run_leader() {
    if (rank() == 0) {
      std::byte* result = backend_.thread_scratch(bytes_);
      QueuedWork queued(backend_, call_.rank);
      reduce_from_all(result, {0, call_.count}, 0);
      for (int p = 0; p < size(); ++p) backend_.copy(peers_->output(p), result, bytes_);
      queued.finish();
    }
    barrier(1);
  }

  const Call& call_;
  const std::byte* input_;
  std::byte* output_;
  const size_t bytes_;
  const uint32_t sequence_;
  const Deadline deadline_;
  const Communicator& communicator_;
  MemoryBackend& backend_;
  std::optional<MappedPeers> peers_;
};

}  // namespace

namespace {

bool mapped_serves(const Candidate&, const Communicator& communicator, const Call& call) {
  return call.collective == Collective::allreduce && communicator.maps_peer_memory(call.memory);
}

std::string mapped_why_not(const Candidate& self, const Communicator& communicator, const Call& call) {
  return cat("rank ", communicator.rank(), ": algorithm '", self.name, "' runs allreduce on ",
             "device memory that every rank maps from every other (processes on one host ",
             "served by cuda_ipc); this call is ", to_string(call.collective), " on ", to_string(call.memory),
             " memory over ", communicator.size(), " ranks that ",
             communicator.maps_peer_memory(call.memory) ? "do" : "do not", " map it");
}

// A time measured at 4 members, at `members` (mapped_allreduce.h).
double at_members(double seconds_at_four, int members) { return seconds_at_four * ceil_log2(members) / 2; }

double mapped_one_shot_cost(const Candidate&, const Communicator& communicator, const Call& call) {
  if (call.bytes() > kMappedOneShotMaxBytes) return std::numeric_limits<double>::infinity();
  return at_members(kMappedOneShotSeconds, communicator.size()) +
         static_cast<double>(call.bytes()) * communicator.size() * kMappedSecondsPerByte;
}

double mapped_two_shot_cost(const Candidate&, const Communicator& communicator, const Call& call) {
  return at_members(kMappedTwoShotSeconds, communicator.size()) +
         2 * static_cast<double>(call.bytes()) * kMappedSecondsPerByte;
}

Moved run(const Candidate& self, const CandidateRun& run) {
  run_mapped_allreduce(run.communicator, run.call, run.input, run.output, self.name, run.sequence, run.deadline);
  return {};
}

// Where the members take turns of one device (mapped_allreduce.h); only by
// name where they run side by side (MPS, or one device each), unmeasured.
double mapped_leader_cost(const Candidate&, const Communicator& communicator, const Call& call) {
  if (!communicator.shares_one_time_sliced_device(call.memory)) return std::numeric_limits<double>::infinity();
  const double members = communicator.size();
  return kMappedLeaderSeconds + members * kMappedLeaderSecondsPerMember +
         static_cast<double>(call.bytes()) * members * kMappedLeaderSecondsPerMemberByte;
}

constexpr Candidate kMappedCandidates[] = {
    {.name = kMappedOneShot, .collective = Collective::allreduce, .serves = mapped_serves, .cost_seconds = mapped_one_shot_cost,
     .run = run, .why_not = mapped_why_not},
    {.name = kMappedTwoShot, .collective = Collective::allreduce, .serves = mapped_serves, .cost_seconds = mapped_two_shot_cost,
     .run = run, .why_not = mapped_why_not},
    {.name = kMappedLeader, .collective = Collective::allreduce, .serves = mapped_serves, .cost_seconds = mapped_leader_cost,
     .run = run, .why_not = mapped_why_not},
};

}  // namespace

std::span<const Candidate> mapped_candidates() { return kMappedCandidates; }

void run_mapped_allreduce(const Communicator& communicator, const Call& call, const void* input, void* output,
                          std::string_view algorithm, uint32_t sequence, Deadline deadline) {
  run_mapped_allreduce(communicator, call, input, output, algorithm, sequence, deadline, memory_backend(call.memory));
}

void run_mapped_allreduce(const Communicator& communicator, const Call& call, const void* input, void* output,
                          std::string_view algorithm, uint32_t sequence, Deadline deadline, MemoryBackend& backend) {
  if (call.count == 0) return;
  using Variant = MappedCall::Variant;
  const Variant variant = algorithm == kMappedLeader    ? Variant::leader
                          : algorithm == kMappedOneShot ? Variant::one_shot
                          : algorithm == kMappedTwoShot ? Variant::two_shots
                          : call.count * call.element_bytes() <= kMappedOneShotMaxBytes ? Variant::one_shot
                                                                                        : Variant::two_shots;
  MappedCall(communicator, call, input, output, sequence, deadline, backend).run(variant);
}

}  // namespace chorus::algorithms
