// How a benchmark rank joins its job: from the launcher's environment, or
// over MPI when mpirun started it without a CHORUS_STORE.
#pragma once

#include <memory>

#include "chorus/connect.h"

namespace chorus::bench {

// True when some launcher (chorus-run, chorus-bench --ranks, torchrun, mpirun...)
// started this process as one rank of a job.
bool launched_by_a_launcher();

// Under mpirun (OMPI_COMM_WORLD_SIZE set) with no CHORUS_STORE, and when built
// with MPI: MPI_Init, rendezvous over MPI_COMM_WORLD (MPI_Finalize at exit).
// Otherwise connect_from_env().
std::shared_ptr<Context> connect_for_benchmark(const ConnectOptions& options);

}  // namespace chorus::bench
