// One process's batch for broadcast, allgather and reduce_scatter
// (mapped_leader.h).
#include "algorithms/shared_memory/mapped_leader.h"

#include <limits>
#include <string>

#include "algorithms/shared_memory/mapped_allreduce.h"
#include "algorithms/shared_memory/mapped_peers.h"
#include "base/error.h"
#include "base/log.h"
#include "memory/memory_backend.h"
#include "memory/registry.h"

namespace chorus::algorithms {
namespace {

void run_leader_batch(const MappedPeers& peers, const Call& call, MemoryBackend& backend) {
  const int size = peers.size();
  const size_t element = call.element_bytes();
  const size_t block = call.count * element;  // broadcast: the whole buffer
  QueuedWork queued(backend, call.rank);
  switch (call.collective) {
    case Collective::broadcast:
      for (int q = 0; q < size; ++q)
        if (q != call.root) backend.copy(peers.output(q), peers.output(call.root), block);
      break;
    case Collective::allgather:
      for (int q = 0; q < size; ++q)
        for (int p = 0; p < size; ++p) {
          std::byte* into = peers.output(q) + static_cast<size_t>(p) * block;
          if (into != peers.input(p)) backend.copy(into, peers.input(p), block);
        }
      break;
    case Collective::reduce_scatter: {
      std::byte* result = backend.thread_scratch(block);
      for (int q = 0; q < size; ++q) {
        const size_t offset = static_cast<size_t>(q) * block;
        backend.copy(result, peers.input(0) + offset, block);
        for (int p = 1; p < size; ++p) backend.reduce(call.type, call.op, result, peers.input(p) + offset, call.count);
        if (call.op == ReduceOp::avg) backend.average(call.type, result, call.count, static_cast<size_t>(size));
        backend.copy(peers.output(q), result, block);
      }
      break;
    }
    default:
      throw InvalidArgument(cat("rank ", call.rank, ": mapped_leader runs broadcast, allgather and ",
                                "reduce_scatter here, not ", to_string(call.collective)));
  }
  queued.finish();
}

bool leader_serves(const Candidate& self, const Communicator& communicator, const Call& call) {
  return self.collective && call.collective == *self.collective && call.counts.empty() &&
         communicator.maps_peer_memory(call.memory);
}

std::string leader_why_not(const Candidate& self, const Communicator& communicator, const Call& call) {
  return cat("rank ", communicator.rank(), ": algorithm '", self.name, "' runs ", to_string(*self.collective),
             " without per-rank counts on device memory that every rank maps from every other (processes on one "
             "host served by cuda_ipc); this call is ", to_string(call.collective),
             call.counts.empty() ? "" : " with per-rank counts", " on ", to_string(call.memory), " memory over ",
             communicator.size(), " ranks that ", communicator.maps_peer_memory(call.memory) ? "do" : "do not",
             " map it");
}

// The bytes the leader reads and writes for the call, all members' together.
double bytes_moved(const Call& call, int members) {
  const double block = static_cast<double>(call.bytes());
  const double m = members;
  switch (call.collective) {
    case Collective::broadcast: return 2 * (m - 1) * block;
    case Collective::allgather: return 2 * m * m * block;
    case Collective::reduce_scatter: return (m * m + 2 * m) * block;
    default: return std::numeric_limits<double>::infinity();
  }
}

// Whether auto prices them (mapped_leader.h): not until a GPU has run and
// timed them; then where the members take turns of one device, as the
// allreduce's leader (mapped_allreduce.h: its per-member byte is one read
// and one write).
constexpr bool kPricedWhereTimeSliced = false;

double leader_cost(const Candidate&, const Communicator& communicator, const Call& call) {
  if (!kPricedWhereTimeSliced || !communicator.shares_one_time_sliced_device(call.memory))
    return std::numeric_limits<double>::infinity();
  const double members = communicator.size();
  return kMappedLeaderSeconds + members * kMappedLeaderSecondsPerMember +
         bytes_moved(call, communicator.size()) * kMappedLeaderSecondsPerMemberByte / 2;
}

Moved run_leader_candidate(const Candidate&, const CandidateRun& run) {
  run_mapped_leader(run.communicator, run.call, run.input, run.output, run.sequence, run.deadline,
                    memory_backend(run.call.memory));
  return {};
}

constexpr Candidate kLeaderCandidates[] = {
    {.name = kMappedLeader, .collective = Collective::broadcast, .serves = leader_serves, .cost_seconds = leader_cost,
     .run = run_leader_candidate, .why_not = leader_why_not},
    {.name = kMappedLeader, .collective = Collective::allgather, .serves = leader_serves, .cost_seconds = leader_cost,
     .run = run_leader_candidate, .why_not = leader_why_not},
    {.name = kMappedLeader, .collective = Collective::reduce_scatter, .serves = leader_serves,
     .cost_seconds = leader_cost, .run = run_leader_candidate, .why_not = leader_why_not},
};

}  // namespace

std::span<const Candidate> mapped_leader_candidates() { return kLeaderCandidates; }

void run_mapped_leader(const Communicator& communicator, const Call& call, const void* input, void* output,
                       uint32_t sequence, Deadline deadline, MemoryBackend& backend) {
  if (call.count == 0) return;
  const MappedPeers peers(communicator, call, input, input_bytes(call), output, output_bytes(call), sequence,
                          deadline);
  if (peers.rank() == 0) run_leader_batch(peers, call, backend);
  peers.barrier(1);
}

}  // namespace chorus::algorithms
