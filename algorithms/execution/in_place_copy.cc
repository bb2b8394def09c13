// The in-place reduce-scatter copy (in_place_copy.h).
#include "algorithms/execution/in_place_copy.h"

#include <memory>

#include "algorithms/execution/communicator.h"
#include "memory/registry.h"

namespace chorus::algorithms {
namespace {

// A block copy in memory: about 10 GB/s on a core that shares its cache.
constexpr double kInPlaceCopySecondsPerByte = 0.1e-9;

bool copy_serves(const Candidate&, const Communicator&, const Call& call) {
  return call.collective == Collective::reduce_scatter && call.in_place;
}

double copy_cost(const Candidate&, const Communicator&, const Call& call) {
  return static_cast<double>(output_bytes(call)) * kInPlaceCopySecondsPerByte;
}

Call out_of_place(const Call& call) {
  Call inner = call;
  inner.in_place = false;
  return inner;
}

void copy_around(const CandidateRun& run, const InnerRun& inner) {
  const Call inner_call = out_of_place(run.call);
  MemoryBackend& backend = memory_backend(run.call.memory);
  const size_t bytes = output_bytes(inner_call);
  std::shared_ptr<std::byte> block = backend.allocate(bytes);
  inner(inner_call, run.input, block.get());
  backend.copy(static_cast<std::byte*>(run.output), block.get(), bytes);
}

constexpr Candidate kInPlaceCopyCandidate{.name = kInPlaceCopy,
                               .collective = Collective::reduce_scatter,
                               .role = CandidateRole::wraps,
                               .serves = copy_serves,
                               .cost_seconds = copy_cost,
                               .inner_call = out_of_place,
                               .wrap = copy_around};

}  // namespace

const Candidate& in_place_copy_candidate() { return kInPlaceCopyCandidate; }

}  // namespace chorus::algorithms
