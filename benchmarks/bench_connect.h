// How a benchmark rank joins its job: from the launcher's environment.
#pragma once

#include <memory>

#include "chorus/connect.h"

namespace chorus::bench {

// True when some launcher (chorus-run, chorus-bench --ranks, torchrun, mpirun...)
// started this process as one rank of a job.
bool launched_by_a_launcher();
std::shared_ptr<Context> connect_for_benchmark(const ConnectOptions& options);

}  // namespace chorus::bench
