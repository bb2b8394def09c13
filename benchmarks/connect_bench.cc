// chorus-connect-bench: how long rendezvous takes. For each store, rank
// count and connection policy it launches local jobs (through the same
// launcher as chorus-run) whose ranks time connect_from_env() and report,
// through allreduce(max):
//   connect   the longest connect_from_env() call of any rank: from the first
//             rank starting rendezvous to the last one connected (holding
//             its full mesh, or only its routes when connecting on demand)
//   after the last rank started: from the last rank's start to the last
//             rank connected, the job's own connecting without the launch
//             spread the first rank waits out
//   launch    from the launcher's fork of rank 0 to the last rank connected
//             (adds process start-up, which the first number leaves out)
//   fds       open file descriptors per rank after connect, mean and most
//             (a rank hosting the store holds one per rank besides)
//   sweep     with --sweep: a checked allreduce sweep (auto algorithm, exact
//             small integers), its time, and then the most descriptors and
//             the mean number of connected peers of a rank: what connecting
//             on demand deferred, and what it saved
// CLOCK_MONOTONIC is one clock for every process on a host, so the launcher's
// timestamp and the ranks' are comparable.
//
//   chorus-connect-bench                                   # 2,4,8,16 ranks x tcp, embedded, file
//   chorus-connect-bench --stores tcp --ranks 16,64,256 --connections full,on-demand --sweep
//   chorus-connect-bench --stores tcp,redis://127.0.0.1:6379 --ranks 2,4
//   mpirun -np 4 chorus-connect-bench --mpi                # over MpiBootstrap
//   benchmarks/netns/run.sh --hosts 16,16 -- chorus-connect-bench --one-job --sweep --connections on-demand
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
#include "base/log.h"
#include "benchmarks/connect_bench_mpi.h"
#include "tools/flag_checks.h"
#include "tools/launch_store.h"
#include "tools/local_launcher.h"
#include "base/version.h"

namespace {

int64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

int open_descriptors() {
  int count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++count;
  return count - 1;  // the iterator's own
}

chorus::Connections parse_connections(const std::string& text) {
  if (text == "full") return chorus::Connections::full_mesh;
  if (text == "on-demand") return chorus::Connections::on_demand;
  if (text == "auto") return chorus::Connections::automatic;
  throw chorus::InvalidArgument("--connections: '" + text + "' is not full, on-demand or auto");
}

// Sizes up to 256 KiB, each twice: every size's algorithm connects its
// peers (auto picks per size), the repeat shows nothing reconnects.
double checked_sweep(chorus::Context& context) {
  const int64_t started = monotonic_ns();
  const int size = context.size();
  for (size_t count : {size_t{1}, size_t{64}, size_t{1024}, size_t{16384}, size_t{65536}}) {
    for (int repeat = 0; repeat < 2; ++repeat) {
      std::vector<float> data(count);
      for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(context.rank() + 1 + static_cast<int>(i % 5));
      chorus::allreduce(context, std::span(data), chorus::ReduceOp::sum);
      for (size_t i = 0; i < count; ++i) {
        const float expected = static_cast<float>(size * (size + 1) / 2 + size * static_cast<int>(i % 5));
        if (data[i] != expected)
          throw chorus::Error(chorus::cat("rank ", context.rank(), ": allreduce of ", count, " floats: element ", i,
                                          " is ", data[i], ", expected ", expected));
      }
    }
  }
  return static_cast<double>(monotonic_ns() - started) / 1e6;
}

// One rank of a measured job: time the connect (and the sweep), agree on
// the maxima, and rank 0 writes "connect_ms launch_ms fds sweep_ms
// sweep_fds peers" to the result file (or stdout without one).
int run_rank(int64_t launched_at_ns, const std::string& result_file, const std::string& connections, bool sweep) {
  chorus::ConnectOptions options;
  options.connections = parse_connections(connections);
  const int64_t started = monotonic_ns();
  auto context = chorus::connect_from_env(options);
  const int64_t connected = monotonic_ns();
  const int fds = open_descriptors();
  double sweep_ms = 0;
  int sweep_fds = 0, peers = 0;
  if (sweep) {
    sweep_ms = checked_sweep(*context);
    sweep_fds = open_descriptors();
    for (int peer = 0; peer < context->size(); ++peer)
      if (peer != context->rank() && context->link_to(peer).connected) ++peers;
  }
  std::vector<double> maxima{static_cast<double>(connected - started) / 1e6,
                             launched_at_ns ? static_cast<double>(connected - launched_at_ns) / 1e6 : 0.0,
                             static_cast<double>(fds), sweep_ms, static_cast<double>(sweep_fds),
                             static_cast<double>(started), static_cast<double>(connected)};
  chorus::allreduce(*context, std::span(maxima), chorus::ReduceOp::max);
  // From the last rank's start to the last rank connected: the job's own
  // connecting, without the launch spread that the first rank's wait holds.
  const double after_last_start_ms = (maxima[6] - maxima[5]) / 1e6;
  // Means too: a rank that hosts the store (rank 0 with an embedded one)
  // holds a socket per rank, which the maxima show and the means dilute.
  std::vector<double> sums{static_cast<double>(peers), static_cast<double>(fds), static_cast<double>(sweep_fds)};
  chorus::allreduce(*context, std::span(sums), chorus::ReduceOp::sum);
  const double ranks = context->size();
  std::vector<double> peer_count{sums[0]};
  if (context->rank() == 0) {
    const std::string line = chorus::cat(maxima[0], " ", maxima[1], " ", maxima[2], " ", maxima[3], " ", maxima[4],
                                         " ", peer_count[0] / ranks, " ", after_last_start_ms, " ", sums[1] / ranks,
                                         " ", sums[2] / ranks, "\n");
    if (result_file.empty()) {
      std::printf("connect_ms after_last_start_ms fds_mean fds_max sweep_ms sweep_fds_mean sweep_fds_max peers: %.1f "
                  "%.1f %.1f %d %.1f %.1f %d %.1f\n",
                  maxima[0], after_last_start_ms, sums[1] / ranks, static_cast<int>(maxima[2]), maxima[3],
                  sums[2] / ranks, static_cast<int>(maxima[4]), peer_count[0] / ranks);
      return 0;
    }
    std::ofstream out(result_file);
    out << line;
    if (!out) throw chorus::IoError("cannot write the result file " + result_file);
  }
  return 0;
}

struct Sample {
  double connect_ms;
  double launch_ms;
  double fds;
  double sweep_ms;
  double sweep_fds;
  double peers;
  double after_last_start_ms;
  double fds_mean;
  double sweep_fds_mean;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

// One measured job; nullopt-like failure is reported through `error`.
bool measure_once(const std::string& self, const std::string& store, int ranks, const std::string& connections,
                  bool sweep, Sample& sample, std::string& error) {
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
  options.argv = {self, "--rank-of-job", "--launched-at-ns", std::to_string(launched_at), "--result-file", result_file,
                  "--connections", connections};
  if (sweep) options.argv.push_back("--sweep");
  chorus::tools::LaunchResult result = chorus::tools::launch_local(options);
  std::ifstream in(result_file);
  bool read = result.exit_code == 0 && static_cast<bool>(in >> sample.connect_ms >> sample.launch_ms >> sample.fds >>
                                                                   sample.sweep_ms >> sample.sweep_fds >> sample.peers >>
                                                                   sample.after_last_start_ms >> sample.fds_mean >>
                                                                   sample.sweep_fds_mean);
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
  std::string connection_policies = "full";
  bool sweep = false, one_job = false;
  app.add_option("--connections", connection_policies,
                 "Comma-separated: full (every pair at connect), on-demand, auto (ConnectOptions::connections)")
      ->capture_default_str();
  app.add_flag("--sweep", sweep, "After connecting, run a checked allreduce sweep and count descriptors and peers");
  app.add_flag("--one-job", one_job,
               "Be one rank of a job another launcher started (benchmarks/netns/run.sh): rank 0 prints the numbers");
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
    if (const std::string problem = chorus::tools::environment_problem(); !problem.empty())
      throw chorus::InvalidArgument(problem);
    for (const std::string& policy : split(connection_policies)) parse_connections(policy);
    // Every store is checked before the first job runs: a bad one would fail only its own rows.
    for (const std::string& store : split(stores))
      if (const std::string problem = chorus::tools::launch_store_problem(store); !problem.empty())
        throw chorus::InvalidArgument(chorus::cat("--stores: ", problem));
    if (split(stores).empty()) throw chorus::InvalidArgument("--stores names no store");
    if (split(connection_policies).empty()) throw chorus::InvalidArgument("--connections names no policy");
    if (rank_counts.empty()) throw chorus::InvalidArgument("--ranks names no rank count");
    if (over_mpi) return chorus::bench::run_mpi_connect_bench(repeats);
    if (rank_of_job || one_job) {
      if (split(connection_policies).size() != 1)
        throw chorus::InvalidArgument("one job takes one --connections policy");
      return run_rank(launched_at_ns, result_file, connection_policies, sweep);
    }
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    std::printf("| store | connections | ranks | connect ms (median) | connect ms (min..max) | after the last rank "
                "started ms (median) | launch to connected ms (median) | fds per rank after connect (mean / max) |%s\n",
                sweep ? " checked sweep ms (median) | fds per rank after sweep (mean / max) | peers per rank after sweep (mean) |"
                      : "");
    std::printf("|---|---|---:|---:|---:|---:|---:|---:|%s\n", sweep ? "---:|---:|---:|" : "");
    std::fflush(stdout);
    int failures = 0;
    for (const std::string& store : split(stores)) {
      for (int ranks : rank_counts) {
        for (const std::string& policy : split(connection_policies)) {
          std::vector<double> connect, launch, sweep_ms, after_last_start;
          Sample last{};
          std::string error;
          for (int repeat = 0; repeat < repeats; ++repeat) {
            Sample sample{};
            if (!measure_once(self, store, ranks, policy, sweep, sample, error)) break;
            connect.push_back(sample.connect_ms);
            launch.push_back(sample.launch_ms);
            sweep_ms.push_back(sample.sweep_ms);
            after_last_start.push_back(sample.after_last_start_ms);
            last = sample;
          }
          if (!error.empty()) {
            std::printf("| %s | %s | %d | failed: %s | | | | |\n", store.c_str(), policy.c_str(), ranks,
                        error.c_str());
            ++failures;
          } else {
            std::printf("| %s | %s | %d | %.1f | %.1f..%.1f | %.1f | %.1f | %.0f / %.0f |", store.c_str(),
                        policy.c_str(), ranks, median(connect), *std::min_element(connect.begin(), connect.end()),
                        *std::max_element(connect.begin(), connect.end()), median(after_last_start), median(launch),
                        last.fds_mean, last.fds);
            if (sweep)
              std::printf(" %.1f | %.0f / %.0f | %.1f |", median(sweep_ms), last.sweep_fds_mean, last.sweep_fds,
                          last.peers);
            std::printf("\n");
          }
          std::fflush(stdout);
        }
      }
    }
    return failures == 0 ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "chorus-connect-bench: %s\n", error.what());
    return 1;
  }
}
