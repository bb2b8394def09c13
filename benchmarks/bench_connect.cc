// Joining the job for chorus-bench (see bench_connect.h). MPI is used for the
// rendezvous only; the collectives run on chorus's own connections.
#include "benchmarks/bench_connect.h"

#include <cstdlib>
#include <optional>
#include <string>

#include "base/config.h"

#if CHORUS_BENCH_HAVE_MPI
#include "chorus/mpi.h"
#endif

namespace chorus::bench {
namespace {

// The launchers' variables as the library reads them (base/config.h).
bool set(const char* name) {
  const std::optional<std::string> value = process_environment()(name);
  return value && !value->empty();
}

bool launched_by_mpirun() { return set("OMPI_COMM_WORLD_SIZE"); }

#if CHORUS_BENCH_HAVE_MPI
void finalize_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::shared_ptr<Context> connect_over_mpi(const ConnectOptions& options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    MPI_Init(nullptr, nullptr);
    std::atexit(finalize_mpi);
  }
  return connect_mpi(MPI_COMM_WORLD, options);
}
#endif

}  // namespace

// Any launcher connect_from_env understands (chorus/launch_env.h) counts; a
// half-set environment then fails in connect_from_env with a message naming
// the missing variable, which beats silently forking local ranks.
bool launched_by_a_launcher() {
  for (const char* rank_variable : {"CHORUS_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (set(rank_variable)) return true;
  }
  return launched_by_mpirun();
}

std::shared_ptr<Context> connect_for_benchmark(const ConnectOptions& options) {
#if CHORUS_BENCH_HAVE_MPI
  if (launched_by_mpirun() && !set("CHORUS_STORE")) return connect_over_mpi(options);
#endif
  return connect_from_env(options);
}

}  // namespace chorus::bench
