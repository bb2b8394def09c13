// The mapped allreduce (algorithms/shared_memory/mapped_allreduce.h).
#include "algorithms/shared_memory/mapped_allreduce.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <vector>

#include "algorithms/model/aligned_chunks.h"
#include "algorithms/execution/helper_plan.h"
#include "algorithms/execution/staging.h"
#include "base/error.h"
#include "base/log.h"
#include "memory/memory_backend.h"
#include "memory/registry.h"
#include "transport/transport.h"

namespace chorus::algorithms {
namespace {

// The color of the per-call group the barriers and the gather run in: no
// split or hierarchy uses it (child_group derives the group from the call's
// sequence, so no message is needed to agree on it).
constexpr int kMappedColor = 0x4d41;  // "MA"
// Each rank's record in the gather: its input's description, then its output's.
constexpr size_t kDescriptionBytes = transport::kMaxExportedMemoryBytes;
constexpr size_t kRecordBytes = 2 * kDescriptionBytes;
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
      : communicator_(communicator),
        call_(call),
        input_(static_cast<const std::byte*>(input)),
        output_(static_cast<std::byte*>(output)),
        bytes_(call.count * call.element_bytes()),
        deadline_(deadline),
        helpers_(communicator.subgroup(all_members(communicator.size()),
                                       child_group(communicator.group(), sequence, kMappedColor))),
        backend_(backend) {}

  enum class Variant { one_shot, two_shots, leader };

  void run(Variant variant) {
    map_peers();
    switch (variant) {
      case Variant::one_shot: run_one_shot(); break;
      case Variant::two_shots: run_two_shots(); break;
      case Variant::leader: run_leader(); break;
    }
  }

 private:
  static std::vector<int> all_members(int size) {
    std::vector<int> members(static_cast<size_t>(size));
    for (int member = 0; member < size; ++member) members[static_cast<size_t>(member)] = member;
    return members;
  }

  int rank() const { return communicator_.rank(); }
  int size() const { return communicator_.size(); }
  transport::Device& device_of(int member) const {
    return communicator_.mesh().device_of(communicator_.mesh_rank(member));
  }

  // A: every rank's input and output, mapped here. Sent once this rank's
  // inputs are ready (the caller ordered the call after its stream).
  void map_peers() {
    std::vector<std::byte> mine(kRecordBytes);
    transport::Device& exporter = device_of(rank() == 0 ? 1 : 0);
    const std::vector<std::byte> in = exporter.export_memory({input_, bytes_}, call_.memory);
    const std::vector<std::byte> out = exporter.export_memory({output_, bytes_}, call_.memory);
    if (in.size() > kDescriptionBytes || out.size() > kDescriptionBytes)
      throw InvalidArgument(cat("rank ", rank(), ": a memory description of ", std::max(in.size(), out.size()),
                                " bytes, more than the ", kDescriptionBytes, " the mapped allreduce carries"));
    std::memcpy(mine.data(), in.data(), in.size());
    std::memcpy(mine.data() + kDescriptionBytes, out.data(), out.size());
    std::vector<std::byte> all(kRecordBytes * static_cast<size_t>(size()));
    Call gather = make_call(Collective::allgather, rank(), size(), kRecordBytes, DataType::uint8, ReduceOp::sum, 0,
                            false);
    // The chain (Call::previous_root) of the call it serves: its peers compare it here.
    gather.previous_root = call_.previous_root;
    run_helper_collective(helpers_, gather, mine.data(), all.data(), "auto", /*sequence=*/0, deadline_);
    inputs_.resize(static_cast<size_t>(size()));
    outputs_.resize(static_cast<size_t>(size()));
    for (int p = 0; p < size(); ++p) {
      const auto index = static_cast<size_t>(p);
      if (p == rank()) {
        inputs_[index] = input_;
        outputs_[index] = output_;
        continue;
      }
      const std::byte* record = all.data() + kRecordBytes * index;
      transport::Device& peer_device = device_of(p);
      const int peer = communicator_.mesh_rank(p);
      inputs_[index] = peer_device.map_peer_memory(peer, {record, in.size()}, call_.memory);
      outputs_[index] = peer_device.map_peer_memory(peer, {record + kDescriptionBytes, out.size()}, call_.memory);
    }
  }

  void barrier(uint32_t step) {
    Call call = make_call(Collective::barrier, rank(), size(), 0, DataType::uint8, ReduceOp::sum, 0, false);
    call.previous_root = call_.previous_root;
    run_helper_collective(helpers_, call, nullptr, nullptr, "auto", step, deadline_);
  }

  // into[range] = every rank's input, combined starting with rank `first`
  // (then the others in rank order), and averaged. In place `into` is that
  // rank's own input, so it is not copied first.
  void reduce_from_all(std::byte* into, Range range, int first) {
    if (range.count == 0) return;
    const size_t offset = range.first * call_.element_bytes();
    const size_t bytes = range.count * call_.element_bytes();
    const std::byte* start = inputs_[static_cast<size_t>(first)] + offset;
    if (into != start) backend_.copy(into, start, bytes);
    for (int p = 0; p < size(); ++p)
      if (p != first) backend_.reduce(call_.type, call_.op, into, inputs_[static_cast<size_t>(p)] + offset, range.count);
    if (call_.op == ReduceOp::avg) backend_.average(call_.type, into, range.count, static_cast<size_t>(size()));
  }

  void run_one_shot() {
    const bool in_place = input_ == output_;
    std::byte* into = in_place ? backend_.thread_scratch(bytes_) : output_;
    backend_.begin_queueing();
    // Every rank computes the whole result in the same order: the same bits.
    reduce_from_all(into, {0, call_.count}, 0);
    backend_.finish_queued();
    barrier(1);
    if (in_place) backend_.copy(output_, into, bytes_);
  }

  void run_two_shots() {
    const size_t element = call_.element_bytes();
    const Range own = chunk_of(rank(), size(), call_.count, element);
    // This rank's own input first: in place, that is this chunk of the
    // output itself. Only this rank computes the chunk, so the order is its own.
    backend_.begin_queueing();
    reduce_from_all(output_ + own.first * element, own, rank());
    backend_.finish_queued();
    barrier(1);
    backend_.begin_queueing();
    for (int p = 0; p < size(); ++p) {
      if (p == rank()) continue;
      const Range chunk = chunk_of(p, size(), call_.count, element);
      if (chunk.count == 0) continue;
      const size_t offset = chunk.first * element;
      backend_.copy(output_ + offset, outputs_[static_cast<size_t>(p)] + offset, chunk.count * element);
    }
    backend_.finish_queued();
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
      backend_.begin_queueing();
      reduce_from_all(result, {0, call_.count}, 0);
      for (int p = 0; p < size(); ++p) backend_.copy(outputs_[static_cast<size_t>(p)], result, bytes_);
      backend_.finish_queued();
    }
    barrier(1);
  }

  const Communicator& communicator_;
  const Call& call_;
  const std::byte* input_;
  std::byte* output_;
  const size_t bytes_;
  const Deadline deadline_;
  const Communicator helpers_;
  MemoryBackend& backend_;
  std::vector<const std::byte*> inputs_;  // every rank's input, mapped (this rank's own)
  std::vector<std::byte*> outputs_;
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
