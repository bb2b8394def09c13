// chorus-connect-bench: how long rendezvous takes. For each store and rank
// count it launches local jobs (through the same launcher as chorus-run) whose
// ranks time connect_from_env() and report, through one allreduce(max):
//   connect   the longest connect_from_env() call of any rank: from the first
//             rank starting rendezvous to the last one holding its full mesh
//   launch    from the launcher's fork of rank 0 to the last rank connected
//             (adds process start-up, which the first number leaves out)
// CLOCK_MONOTONIC is one clock for every process on a host, so the launcher's
// timestamp and the ranks' are comparable.
//
//   chorus-connect-bench                                   # 2,4,8,16 ranks x tcp, embedded, file
//   chorus-connect-bench --stores tcp,redis://127.0.0.1:6379 --ranks 2,4
//   mpirun -np 4 chorus-connect-bench --mpi                # over MpiBootstrap
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include <CLI/CLI.hpp>

#include "chorus/chorus.h"
#include "benchmarks/connect_bench_mpi.h"
#include "tools/local_launcher.h"
#include "base/version.h"

namespace {

int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// One rank of a measured job: time the connect, agree on the maxima, and
// rank 0 writes "connect_ms launch_ms" to the result file.
int run_rank(int64_t launched_at_ns, const std::string& result_file) {
  const int64_t started = monotonic_ns();
  auto context = chorus::connect_from_env();
  const int64_t connected = monotonic_ns();
  std::vector<double> times{static_cast<double>(connected - started) / 1e6,
                            static_cast<double>(connected - launched_at_ns) / 1e6};
  chorus::allreduce(*context, std::span(times), chorus::ReduceOp::max);
  if (context->rank() == 0) {
    std::ofstream out(result_file);
    out << times[0] << " " << times[1] << "\n";
    if (!out) throw chorus::IoError("cannot write the result file " + result_file);
  }
  return 0;
}

struct Sample {
  double connect_ms;
  double launch_ms;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

// One measured job; nullopt-like failure is reported through `error`.
bool measure_once(const std::string& self, const std::string& store, int ranks, Sample& sample, std::string& error) {
  std::string result_file = (std::filesystem::temp_directory_path() /
                             ("chorus-connect-bench-" + std::to_string(getpid()) + ".result"))
                                .string();
  std::filesystem::remove(result_file);
  chorus::tools::LaunchOptions options;
  options.ranks = ranks;
  options.store = store;
  options.grace = std::chrono::milliseconds(2000);
  options.launcher_name = "chorus-connect-bench";
  const int64_t launched_at = monotonic_ns();
  options.argv = {self, "--rank-of-job", "--launched-at-ns", std::to_string(launched_at), "--result-file", result_file};
  chorus::tools::LaunchResult result = chorus::tools::launch_local(options);
  std::ifstream in(result_file);
  bool read = result.exit_code == 0 && static_cast<bool>(in >> sample.connect_ms >> sample.launch_ms);
  std::filesystem::remove(result_file);
  if (!read) error = result.exit_code != 0 ? result.description : "rank 0 wrote no result";
  return read;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) parts.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return parts;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chorus-connect-bench: time rendezvous (connect_from_env) for several stores and rank counts"};
  app.set_version_flag("--version", std::string("chorus-connect-bench ") + chorus::version());
  std::string stores = "tcp,embedded,file";
  std::vector<int> rank_counts{2, 4, 8, 16};
  int repeats = 5;
  bool rank_of_job = false;
  bool over_mpi = false;
  int64_t launched_at_ns = 0;
  std::string result_file;
  app.add_option("--stores", stores,
                 "Comma-separated stores: tcp (served by the launcher), embedded (rank 0 hosts it), file, or "
                 "URLs such as redis://host:port")
      ->capture_default_str();
  app.add_option("--ranks", rank_counts, "Rank counts")->delimiter(',')->check(CLI::Range(1, 1024));
  app.add_option("--repeats", repeats, "Jobs per (store, ranks); the table shows the median")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  // Internal: how the benchmark runs itself as one rank of a measured job.
  app.add_flag("--mpi", over_mpi, "Run under mpirun: time connects over MpiBootstrap (one table row)");
  app.add_flag("--rank-of-job", rank_of_job)->group("");
  app.add_option("--launched-at-ns", launched_at_ns)->group("");
  app.add_option("--result-file", result_file)->group("");
  CLI11_PARSE(app, argc, argv);

  try {
    if (over_mpi) return chorus::bench::run_mpi_connect_bench(repeats);
    if (rank_of_job) return run_rank(launched_at_ns, result_file);
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::printf("| store | ranks | connect ms (median) | connect ms (min..max) | launch to connected ms (median) |\n");
    std::printf("|---|---:|---:|---:|---:|\n");
    std::fflush(stdout);
    int failures = 0;
    for (const std::string& store : split(stores)) {
      for (int ranks : rank_counts) {
        std::vector<double> connect, launch;
        std::string error;
        for (int repeat = 0; repeat < repeats; ++repeat) {
          Sample sample{};
          if (!measure_once(self, store, ranks, sample, error)) break;
          connect.push_back(sample.connect_ms);
          launch.push_back(sample.launch_ms);
        }
        if (!error.empty()) {
          std::printf("| %s | %d | failed: %s | | |\n", store.c_str(), ranks, error.c_str());
          ++failures;
        } else {
          std::printf("| %s | %d | %.1f | %.1f..%.1f | %.1f |\n", store.c_str(), ranks, median(connect),
                      *std::min_element(connect.begin(), connect.end()),
                      *std::max_element(connect.begin(), connect.end()), median(launch));
        }
        std::fflush(stdout);
      }
    }
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "chorus-connect-bench: %s\n", error.what());
    return 1;
  }
}
