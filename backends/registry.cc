// The table of backends, and their runs.
#include "backends/registry.h"

#include <chrono>
#include <exception>

#include "backends/nccl/nccl_allreduce.h"
#include "base/log.h"

namespace chorus::backends {
namespace {

using Clock = std::chrono::steady_clock;

constexpr Backend backend_table[] = {
    {Collective::allreduce, "nccl", nccl_allreduce},
};

}  // namespace

std::span<const Backend> all_backends() { return backend_table; }

const Backend* find_backend(Collective collective, std::string_view name) {
  for (const Backend& backend : backend_table)
    if (backend.collective == collective && backend.name == name) return &backend;
  return nullptr;
}

void run_backend(const Communicator& communicator, const Backend& backend, const Call& call, const void* input,
                 void* output, uint32_t sequence, Deadline deadline) {
  communicator.note_started(sequence);
  const Clock::time_point started = Clock::now();
  std::exception_ptr error;
  try {
    backend.run(communicator, call, input, output, sequence, deadline);
  } catch (...) {
    error = std::current_exception();
  }
  communicator.note_finished(sequence);
  CHORUS_LOG(debug, communicator.rank(), to_string(call.collective), " #", sequence, " (", call.count, " ",
             to_string(call.type), "): ", backend.name, ", ",
             std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started).count(), " us",
             error ? ", failed" : "");
  if (error) std::rethrow_exception(error);
}


}  // namespace chorus::backends
