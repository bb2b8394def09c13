// Peer driver: Open MPI's MPI_Allreduce, MPI_Bcast and MPI_Allgather, timed and
// printed exactly like chorus-bench. Run under mpirun; choose the transport
// with mpirun's --mca btl (tcp,self or the default shared memory).
#define OMPI_SKIP_MPICXX 1  // the C API only: the C++ bindings trip -Wcast-function-type
#include <mpi.h>

#include <cstdio>

#include "bench_table.h"

int main(int argc, char** argv) {
  using namespace chorus::peers;
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Settings settings = parse_settings(argc, argv);
  auto max_over_ranks = [](double value) {
    MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return value;
  };
  if (rank == 0) print_header(settings, "mpi-bench", size, settings.algo.empty() ? "MPI default" : settings.algo);
  long long total_wrong = 0;
  for (size_t bytes : sizes(settings)) {
    const size_t count = per_rank_count(settings.op, size, bytes);
    if (count == 0) continue;
    std::vector<float> input(count), output(settings.op == "allgather" ? count * size : count);
    for (size_t i = 0; i < count; ++i) input[i] = input_value(rank, i);
    std::function<void()> once;
    if (settings.op == "allreduce")
      once = [&] { MPI_Allreduce(input.data(), output.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); };
    else if (settings.op == "broadcast")
      once = [&] { MPI_Bcast(input.data(), int(count), MPI_FLOAT, 0, MPI_COMM_WORLD); };
    else
      once = [&] {
        MPI_Allgather(input.data(), int(count), MPI_FLOAT, output.data(), int(count), MPI_FLOAT, MPI_COMM_WORLD);
      };
    long long wrong = 0;
    if (settings.check) {
      once();
      wrong = count_wrong(settings, rank, size, settings.op == "broadcast" ? input : output, count);
      MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      total_wrong += wrong;
    }
    const double seconds = time_collective(settings, once, max_over_ranks);
    if (rank == 0) print_row(settings, size, count, seconds, wrong);
  }
  if (rank == 0 && settings.check)
    std::printf("# %s: %lld wrong elements in total\n", total_wrong ? "FAILED" : "OK", total_wrong);
  MPI_Finalize();
  return total_wrong ? 3 : 0;
}
