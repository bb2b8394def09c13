// Peer driver: an MPI library's MPI_Allreduce (--in-place: MPI_IN_PLACE),
// MPI_Bcast, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Alltoall and
// MPI_Barrier, timed and printed exactly like chorus-bench. Built against
// Open MPI, MPICH and Intel MPI alike (benchmarks/peers/build.sh); run under
// that library's launcher. With Open MPI, choose the transport with mpirun's
// --mca btl (tcp,self or the default shared memory).
#define OMPI_SKIP_MPICXX 1   // the C API only: the C++ bindings trip -Wcast-function-type
#define MPICH_SKIP_MPICXX 1  // the same for MPICH and Intel MPI
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "bench_table.h"

namespace {

// The first line of MPI_Get_library_version: which MPI this binary runs.
std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string line(text, size_t(std::max(length, 0)));
  line = line.substr(0, line.find_first_of("\r\n"));
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == ',')) line.pop_back();
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace chorus::peers;
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Accepts accepts;
  accepts.ops = {"allreduce", "broadcast", "allgather", "reduce_scatter", "alltoall", "barrier"};
  accepts.in_place = accepts.barrier = accepts.rewrite_input = true;
  Settings settings = parse_settings(argc, argv, accepts);
  auto max_over_ranks = [](double value) {
    MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return value;
  };
  auto barrier = [] { MPI_Barrier(MPI_COMM_WORLD); };
  const std::string op = settings.op;
  if (rank == 0) {
    std::printf("# MPI library: %s\n", library_version().c_str());
    print_header(settings, "mpi-bench", size, settings.algo.empty() ? "MPI default" : settings.algo);
  }
  long long total_wrong = 0;
  for (size_t bytes : sizes(settings)) {
    const size_t count = per_rank_count(op, size, bytes);
    if (count == 0 && op != "barrier") continue;
    std::vector<float> input(input_count(op, size, count)), output(output_count(op, size, count));
    for (size_t i = 0; i < input.size(); ++i) input[i] = input_value(rank, i);
    // In place, the output starts as the input and every call reduces into it.
    if (settings.in_place) output = input;
    const int n = int(count);
    std::function<void()> once;
    if (op == "allreduce" && settings.in_place)
      once = [&] { MPI_Allreduce(MPI_IN_PLACE, output.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); };
    else if (op == "allreduce")
      once = [&] { MPI_Allreduce(input.data(), output.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); };
    else if (op == "broadcast")
      once = [&] { MPI_Bcast(input.data(), n, MPI_FLOAT, 0, MPI_COMM_WORLD); };
    else if (op == "allgather")
      once = [&] { MPI_Allgather(input.data(), n, MPI_FLOAT, output.data(), n, MPI_FLOAT, MPI_COMM_WORLD); };
    else if (op == "reduce_scatter")
      once = [&] { MPI_Reduce_scatter_block(input.data(), output.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); };
    else if (op == "alltoall")
      once = [&] { MPI_Alltoall(input.data(), n, MPI_FLOAT, output.data(), n, MPI_FLOAT, MPI_COMM_WORLD); };
    else
      once = barrier;
    if (settings.rewrite_input) {
      // As chorus-bench --rewrite-input: the buffer the call reads (in place:
      // the output, which starts each call as the input) written afresh first.
      std::vector<float> fresh = input;
      std::vector<float>& target = settings.in_place ? output : input;
      once = [once, fresh = std::move(fresh), &target] {
        std::memcpy(target.data(), fresh.data(), fresh.size() * sizeof(float));
        once();
      };
    }
    long long wrong = 0;
    if (settings.check) {
      once();
      wrong = count_wrong(settings, rank, size, op == "broadcast" ? input : output, count);
      MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      total_wrong += wrong;
    }
    const double seconds = time_collective(settings, once, max_over_ranks, barrier);
    if (rank == 0) print_row(settings, size, count, seconds, wrong);
  }
  if (rank == 0 && settings.check)
    std::printf("# %s: %lld wrong elements in total\n", total_wrong ? "FAILED" : "OK", total_wrong);
  MPI_Finalize();
  return total_wrong ? 3 : 0;
}
