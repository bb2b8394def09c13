// chorus-connect-bench --mpi: the MPI half of the connect-time benchmark. Run
// under mpirun; every rank times connect_mpi(MPI_COMM_WORLD) `repeats` times
// and rank 0 prints one table row in chorus-connect-bench's format.
#pragma once

namespace chorus::bench {

// Returns the process exit code (2 when this build has no MPI).
int run_mpi_connect_bench(int repeats);

}  // namespace chorus::bench
