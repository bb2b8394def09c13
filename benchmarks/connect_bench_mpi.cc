// Connect time over MpiBootstrap (see connect_bench_mpi.h). MPI_Init is left
// out of the timing, and a barrier lines the ranks up before each connect, so
// the number is the rendezvous and mesh only. The store rows of
// chorus-connect-bench also include the skew of process start-up; the
// "launch" column, which MPI cannot give, is shown as "-".
#include "benchmarks/connect_bench_mpi.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#if CHORUS_BENCH_HAVE_MPI
#include "chorus/mpi.h"
#endif

namespace chorus::bench {

#if CHORUS_BENCH_HAVE_MPI
int run_mpi_connect_bench(int repeats) {
  MPI_Init(nullptr, nullptr);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<double> slowest;  // per repeat, the longest connect of any rank
  int failed = 0;
  for (int repeat = 0; repeat < repeats && !failed; ++repeat) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto started = std::chrono::steady_clock::now();
    double mine = 0;
    try {
      auto context = connect_mpi(MPI_COMM_WORLD);
      mine = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "chorus-connect-bench: rank %d: %s\n", rank, error.what());
      failed = 1;
    }
    double longest = 0;
    MPI_Allreduce(&mine, &longest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    slowest.push_back(longest);
  }
  if (rank == 0 && !failed) {
    std::sort(slowest.begin(), slowest.end());
    size_t middle = slowest.size() / 2;
    double median = slowest.size() % 2 ? slowest[middle] : (slowest[middle - 1] + slowest[middle]) / 2;
    std::printf("| mpi | %d | %.1f | %.1f..%.1f | - |\n", size, median, slowest.front(), slowest.back());
    std::fflush(stdout);
  }
  MPI_Finalize();
  return failed ? 1 : 0;
}
#else
int run_mpi_connect_bench(int) {
  std::fprintf(stderr, "chorus-connect-bench: --mpi needs a build with MPI (libopenmpi-dev)\n");
  return 2;
}
#endif

}  // namespace chorus::bench
