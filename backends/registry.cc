// The table of backends as candidates (registry.h).
#include "backends/registry.h"

#include <limits>
#include <mutex>
#include <string>

#include "backends/nccl/nccl_allreduce.h"

namespace chorus::backends {
namespace {

using algorithms::Candidate;
using algorithms::CandidateRun;

bool serves(const Candidate&, const Communicator& communicator, const Call& call) {
  return nccl_refuses(communicator, call).empty();
}

std::string why_not(const Candidate&, const Communicator& communicator, const Call& call) {
  return nccl_refuses(communicator, call);
}

double unmeasured(const Candidate&, const Communicator&, const Call&) {
  return std::numeric_limits<double>::infinity();
}

algorithms::Moved run_nccl(const Candidate&, const CandidateRun& run) {
  nccl_allreduce(run.communicator, run.call, run.input, run.output, run.sequence, run.deadline);
  return {};
}

constexpr Candidate backend_table[] = {
    {.name = "nccl", .collective = Collective::allreduce, .serves = serves, .cost_seconds = unmeasured,
     .run = run_nccl, .why_not = why_not, .runs_at_issue = true},
};

}  // namespace

std::span<const Candidate> backend_candidates() { return backend_table; }

void register_backends() {
  static std::once_flag once;
  std::call_once(once, [] { algorithms::add_candidates(backend_table); });
}

}  // namespace chorus::backends
