// chorus-bench: times collectives over a range of sizes and prints one row per
// size in the style of nccl-tests (time, algbw, busbw, #wrong). Sizes are the
// whole message as nccl-tests counts it (all blocks of an allgather, ...).
//
//   chorus-bench --ranks 4 --op allreduce --check     # forks 4 local ranks
//   chorus-bench --ranks 4 --op allgather --algo all  # one table per algorithm, then auto
//   chorus-bench --ranks 4 --streams 2                # 2 TCP connections per pair of ranks
//   chorus-bench --ranks 4 --trace /tmp/bench.json    # a Chrome trace per rank (docs/trace.md)
//   CHORUS_RANK=.. CHORUS_SIZE=.. CHORUS_STORE=.. chorus-bench ...   # under a launcher
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <vector>

#include "algorithms/execution/candidate.h"
#include "algorithms/selection/registry.h"
#include "benchmarks/bench_connect.h"
#include "benchmarks/run_metadata.h"
#include "benchmarks/bench_runner.h"
#include "benchmarks/check_data.h"
#include "memory/cuda/runtime.h"
#include "chorus/chorus.h"
#include "base/config.h"
#include "base/log.h"
#include "rendezvous/launch_env.h"
#include "tools/flag_checks.h"
#include "tools/local_launcher.h"
#include "transport/registry.h"
#include "base/version.h"

namespace {

using namespace chorus;
using bench::Operation;

struct BenchOptions {
  int ranks = 0;
  std::string operation = "allreduce";
  std::string algorithm = "auto";
  std::string type = "float32";
  std::string redop = "sum";
  // The runner's root, warmup, iters, budget_ms, rounds and check, straight
  // from the command line; run_rank fills in the rest from the names above.
  bench::BenchSettings settings;
  size_t min_bytes = 8;
  size_t max_bytes = 64u << 20;
  double step_factor = 2.0;
  std::string json_file;
  int timeout_ms = 0;  // 0: CHORUS_TIMEOUT, else the library's (a default never beats the job's setting)
  int streams = 0;  // 0: CHORUS_STREAMS, else the library default
  std::vector<std::string> transports;  // empty: CHORUS_TRANSPORT, else all
  std::vector<int> fake_hosts;          // with --ranks: ranks per fake host
  std::string trace;                    // empty: CHORUS_TRACE, else none
  bool trace_steps = false;
  std::string device = "host";          // host, cuda (the local rank's device), cuda:N
};

// "shm to 3 peers", "shm to 1 peer, tcp (2 streams) to 2 peers": what serves this rank's peers.
std::string describe_links(const Context& context) {
  std::vector<std::pair<std::string, int>> counts;
  for (int peer = 0; peer < context.size(); ++peer) {
    if (peer == context.rank()) continue;
    const PeerLink link = context.link_to(peer);
    const std::string name = link.streams > 1 ? cat(link.transport, " (", link.streams, " streams)") : link.transport;
    auto found = std::find_if(counts.begin(), counts.end(), [&](const auto& entry) { return entry.first == name; });
    if (found == counts.end()) counts.emplace_back(name, 1);
    else ++found->second;
  }
  std::string text;
  for (const auto& [name, peers] : counts)
    text += cat(text.empty() ? "" : ", ", name, " to ", peers, peers == 1 ? " peer" : " peers");
  return text.empty() ? "no peers" : text;
}

// The algorithms one table each: the named one, or with "all" every
// candidate of the operation's collective (the Plans, the board, the
// mapped allreduce, the wrappers) and then "auto".
std::vector<std::string> algorithms_to_run(const std::string& requested, Operation operation) {
  if (requested != "all") return {requested};
  std::vector<std::string> names;
  for (const algorithms::Candidate* candidate : algorithms::all_candidates())
    if (!candidate->collective || *candidate->collective == bench::collective_of(operation))
      names.emplace_back(candidate->name);
  names.emplace_back("auto");
  return names;
}

std::vector<size_t> message_sizes(const BenchOptions& options, Operation operation) {
  std::vector<size_t> sizes;
  if (operation == Operation::barrier) return {0};
  for (double bytes = static_cast<double>(options.min_bytes); bytes <= static_cast<double>(options.max_bytes);
       bytes *= options.step_factor)
    sizes.push_back(static_cast<size_t>(bytes));
  return sizes;
}

// --device: host, cuda (ranks of a host spread over its devices: several
// ranks share one when there are fewer devices than ranks), cuda:N.
Memory bench_memory(const std::string& device, const Context& context) {
  if (device == "host") return Memory::host();
  if (device == "cuda") {
    const int devices = cuda::cuda_runtime().device_count();
    if (devices == 0)
      throw InvalidArgument(cat("--device cuda: this process has no CUDA device: ", cuda::cuda_runtime().no_device_reason()));
    return Memory::cuda(context.local_rank() % devices);
  }
  if (device.rfind("cuda:", 0) == 0) {
    const std::string index = device.substr(5);
    if (!index.empty() && index.find_first_not_of("0123456789") == std::string::npos && index.size() < 6)
      return Memory::cuda(std::stoi(index));
  }
  throw InvalidArgument(cat("--device ", device, " is not host, cuda or cuda:N"));
}

// Where --json will be written, refused now if it cannot be: the file is
// written after the whole sweep, too late to find out.
std::string json_problem(const std::string& file) {
  namespace fs = std::filesystem;
  std::error_code ignored;
  const fs::path path(file);
  const fs::path directory = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (fs::is_directory(path, ignored)) return cat("--json ", file, " is a directory");
  if (!fs::is_directory(directory, ignored)) return cat("--json ", file, ": there is no directory ", directory.string());
  if (::access(directory.c_str(), W_OK) != 0) return cat("--json ", file, ": cannot write in ", directory.string());
  return std::string();
}

// The host memory one rank holds at the largest size: its input and output
// buffers, as the root (which holds the most) when the operation has one.
size_t bytes_per_rank(const BenchOptions& options, Operation operation, int ranks) {
  const DataType type = *parse_data_type(options.type);
  const size_t count = bench::count_for_bytes(operation, ranks, options.max_bytes, type);
  const int root = std::clamp(options.settings.root, 0, ranks - 1);
  size_t most = 0;
  for (int rank : {root, (root + 1) % ranks}) {
    const size_t in = bench::input_elements(operation, rank, ranks, root, count);
    const size_t out = bench::output_elements(operation, rank, ranks, root, count);
    const size_t elements = in > std::numeric_limits<size_t>::max() - out ? std::numeric_limits<size_t>::max() : in + out;
    most = std::max(most, tools::saturating_multiply(elements, element_size(type)));
  }
  return most;
}

// What no single option's check sees, refused before any rank starts (and
// again by each rank under a launcher, before it connects): contradictions,
// names only the library knows, a bad CHORUS_* setting, and buffers larger
// than this host. `forking`: --ranks N local ranks, all on this host.
std::string check_options(const BenchOptions& options, bool forking) {
  if (std::string problem = tools::environment_problem(); !problem.empty()) return problem;
  if (options.min_bytes > options.max_bytes)
    return cat("--min-bytes ", options.min_bytes, " is larger than --max-bytes ", options.max_bytes,
               ": no size to measure");
  const Operation operation = *bench::parse_operation(options.operation);
  if (options.settings.in_place && operation != Operation::allreduce)
    return cat("--in-place is for --op allreduce, not ", options.operation);
  if (options.settings.root < 0) return cat("--root ", options.settings.root, " is not a rank");
  if (options.settings.rewrite_input && options.device != "host")
    return cat("--rewrite-input is for host memory, not --device ", options.device);
  // Under a launcher the job's size is its own; a launcher that says none
  // is connect's to report.
  int ranks = forking ? options.ranks : 0;
  if (!forking) {
    try {
      ranks = detect_launch_env(process_environment()).size;
    } catch (const Error&) {
    }
  }
  if (forking && !options.fake_hosts.empty()) {
    long long held = 0;
    for (int host : options.fake_hosts) held += host;
    if (held != options.ranks) return cat("--fake-hosts holds ", held, " ranks but --ranks is ", options.ranks);
  }
  if (ranks > 0 && bench::has_root(operation) && options.settings.root >= ranks)
    return cat("--root ", options.settings.root, " is out of range for ", ranks, " ranks");
  if (options.algorithm != "all" && options.algorithm != "auto" &&
      !algorithms::find_candidate(bench::collective_of(operation), options.algorithm))
    return cat("--algo ", options.algorithm, " is not a ", options.operation, " algorithm (valid: ",
               algorithms::candidate_names(bench::collective_of(operation)), ", auto, all)");
  const std::string& device = options.device;
  const bool device_index = device.rfind("cuda:", 0) == 0 && device.size() > 5 && device.size() < 11 &&
                            device.find_first_not_of("0123456789", 5) == std::string::npos;
  if (device != "host" && device != "cuda" && !device_index)
    return cat("--device ", device, " is not host, cuda or cuda:N");
  for (size_t i = 0; i < options.transports.size(); ++i) {
    const std::string& name = options.transports[i];
    if (!transport::find_transport(name))
      return cat("--transport ", name, " is not a transport of this build (it has: ", transport::transport_names(), ")");
    if (std::find(options.transports.begin(), options.transports.begin() + static_cast<long>(i), name) !=
        options.transports.begin() + static_cast<long>(i))
      return cat("--transport names ", name, " twice");
  }
  if (options.trace_steps && options.trace.empty() && Config::from_environment().trace.empty())
    return "--trace-steps adds the steps to a trace: give --trace FILE (or set CHORUS_TRACE) too";
  if (!options.json_file.empty())
    if (std::string problem = json_problem(options.json_file); !problem.empty()) return problem;
  if (operation != Operation::barrier) {
    const int counted = std::max(ranks, 1);
    const std::string what = cat("--max-bytes ", tools::describe_bytes(options.max_bytes), " of ", options.operation);
    return tools::memory_shortfall(what, bytes_per_rank(options, operation, counted),
                                   forking ? options.ranks : tools::local_ranks_from_environment());
  }
  return std::string();
}

int run_rank(const BenchOptions& options) {
  bench::BenchSettings settings = options.settings;
  settings.operation = *bench::parse_operation(options.operation);
  settings.type = *parse_data_type(options.type);
  settings.op = *parse_reduce_op(options.redop);
  const Operation operation = settings.operation;

  ConnectOptions connect_options;
  if (options.timeout_ms > 0) connect_options.timeout = std::chrono::milliseconds(options.timeout_ms);
  if (options.streams > 0) connect_options.streams = options.streams;
  connect_options.transports = options.transports;
  connect_options.trace = options.trace;
  if (options.trace_steps) connect_options.trace_steps = true;
  // CUDA first: a process that uses CUDA when it connects offers cuda_ipc
  // to the ranks on its host (transport/cuda_ipc/cuda_ipc.h).
  if (options.device != "host") (void)cuda::cuda_runtime().device_count();
  std::shared_ptr<Context> context = bench::connect_for_benchmark(connect_options);
  const bool printer = context->rank() == 0;
  settings.memory = bench_memory(options.device, *context);
  const nlohmann::json metadata = bench::run_metadata(
      *context, {{"dtype", options.type}, {"redop", options.redop}, {"root", settings.root},
                 {"min_bytes", options.min_bytes}, {"max_bytes", options.max_bytes},
                 {"step_factor", options.step_factor}, {"iters", settings.iters}, {"warmup", settings.warmup},
                 {"time_budget_ms", settings.budget_ms}, {"rounds", settings.rounds}, {"check", settings.check},
                 {"in_place", settings.in_place}, {"barrier", settings.barrier_each},
                 {"rewrite_input", settings.rewrite_input},
                 {"register", settings.register_buffers},
                 {"timeout_ms", context->timeout().count()}, {"streams", options.streams},
                 {"transports", options.transports}, {"trace", options.trace}, {"device", options.device}});
  if (bench::has_root(operation) && (settings.root < 0 || settings.root >= context->size()))
    throw InvalidArgument(cat("--root ", settings.root, " is out of range for ", context->size(), " ranks"));

  const bool reduction = bench::reduces(operation);
  const bool rooted = bench::has_root(operation);
  bench::Runner runner(*context, settings);
  const std::vector<std::string> algorithms = algorithms_to_run(options.algorithm, operation);
  const std::vector<size_t> sizes = message_sizes(options, operation);

  auto print_header = [&](const std::string& algorithm) {
    std::printf("# chorus-bench: %s, %d ranks on %d host%s (rank 0: %s), %s memory, algorithm %s, %s%s%s%s%s%s%s%s, "
                "median of %d rounds\n",
                options.operation.c_str(), context->size(), context->hosts(), context->hosts() == 1 ? "" : "s",
                describe_links(*context).c_str(), to_string(settings.memory).c_str(), algorithm.c_str(),
                options.type.c_str(),
                reduction ? " " : "", reduction ? options.redop.c_str() : "", settings.check ? ", checked" : "",
                settings.in_place ? ", in place" : "", settings.register_buffers ? ", registered" : "",
                settings.barrier_each ? ", barrier before each iteration" : "",
                settings.rewrite_input ? ", input rewritten before each call" : "", settings.rounds);
    std::printf("#%13s %13s %9s %6s %5s %12s %12s %12s %8s\n", "size(B)", "count", "type", "redop", "root",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    std::fflush(stdout);
  };
  auto print_row = [&](const bench::Row& row) {
    if (!row.supported) {
      std::printf("%14zu %13zu %9s %6s %5d %12s\n", row.bytes, row.count, options.type.c_str(),
                  reduction ? options.redop.c_str() : "-", rooted ? settings.root : -1, "unsupported");
    } else {
      std::printf("%14zu %13zu %9s %6s %5d %12.2f %12.3f %12.3f %8s\n", row.bytes, row.count, options.type.c_str(),
                  reduction ? options.redop.c_str() : "-", rooted ? settings.root : -1, row.time_us, row.algbw,
                  row.busbw, settings.check ? std::to_string(row.wrong).c_str() : "N/A");
    }
    std::fflush(stdout);
  };

  // Sizes outer, algorithms inner: every algorithm of a size is measured in
  // the same interleaved rounds. One algorithm streams its rows; several
  // print one table each once the sweep is done.
  const bool streaming = algorithms.size() == 1;
  if (printer && streaming) print_header(algorithms[0]);
  std::vector<std::vector<bench::Row>> table_rows(algorithms.size());
  uint64_t total_wrong = 0;
  for (size_t bytes : sizes) {
    std::vector<bench::Row> rows = runner.measure(bytes, algorithms);
    for (size_t index = 0; index < rows.size(); ++index) {
      total_wrong += rows[index].wrong;
      table_rows[index].push_back(rows[index]);
      if (printer && streaming) print_row(rows[index]);
    }
  }
  nlohmann::json tables = nlohmann::json::array();
  for (size_t index = 0; index < algorithms.size(); ++index) {
    if (printer && !streaming) {
      print_header(algorithms[index]);
      for (const bench::Row& row : table_rows[index]) print_row(row);
    }
    nlohmann::json rows = nlohmann::json::array();
    for (const bench::Row& row : table_rows[index]) {
      if (!row.supported) continue;
      rows.push_back({{"bytes", row.bytes}, {"count", row.count}, {"type", options.type}, {"redop", options.redop},
                      {"time_us", row.time_us}, {"algbw_gbps", row.algbw}, {"busbw_gbps", row.busbw},
                      {"wrong", settings.check ? nlohmann::json(row.wrong) : nlohmann::json(nullptr)},
                      {"iters", row.iters}});
    }
    tables.push_back({{"algorithm", algorithms[index]}, {"rows", rows}});
  }
  if (printer && !options.json_file.empty()) {
    // One algorithm keeps the flat layout ({"algorithm", "rows"}); "all" lists every table.
    nlohmann::json document = metadata;
    document.update({{"operation", options.operation}, {"ranks", context->size()}, {"hosts", context->hosts()},
                     {"links", describe_links(*context)}, {"algorithm", options.algorithm}});
    if (tables.size() == 1) document["rows"] = tables[0]["rows"];
    else document["tables"] = tables;
    std::ofstream json(options.json_file);
    json << document.dump(2) << "\n";
    json.close();
    if (!json) throw IoError(cat("--json ", options.json_file, ": writing the rows failed"));
  }
  if (printer && settings.check) std::printf("# %s: %llu wrong elements in total\n", total_wrong ? "FAILED" : "OK",
                                             static_cast<unsigned long long>(total_wrong));
  return total_wrong == 0 ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  BenchOptions options;
  CLI::App app{"chorus-bench: time chorus collectives (nccl-tests style rows)"};
  app.set_version_flag("--version", std::string("chorus-bench ") + chorus::version());
  app.add_option("--ranks,-n", options.ranks, "Fork this many local ranks (ignored under a launcher)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  app.add_option("--op", options.operation, "Collective")
      ->check(CLI::IsMember({"allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "gather", "scatter",
                             "alltoall", "barrier"}))
      ->capture_default_str();
  app.add_option("--algo", options.algorithm,
                 "Algorithm name, auto, or all (one table per algorithm of --op, then auto; docs/algorithms.md "
                 "lists the names)")
      ->capture_default_str();
  app.add_option("--dtype", options.type,
                 "Element type: int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, float32, float64")
      ->capture_default_str()
      ->check([](const std::string& name) {
    return chorus::parse_data_type(name) ? std::string() : "unknown data type " + name;
  });
  app.add_option("--redop", options.redop,
                 "Reduction: sum, prod, min, max, avg; band, bor, bxor for integers")
      ->capture_default_str()
      ->check([](const std::string& name) {
    return chorus::parse_reduce_op(name) ? std::string() : "unknown reduction " + name;
  });
  app.add_option("--root", options.settings.root, "Root of broadcast, reduce, gather and scatter")
      ->capture_default_str();
  // At least a byte: the sizes grow from --min-bytes by multiplying, and 0 stays 0 forever.
  app.add_option("--min-bytes,-b", options.min_bytes,
                 "Smallest message, at least 1 byte (suffixes K, M, G, T = 2^10, 2^20, 2^30, 2^40)")
      ->transform(chorus::tools::ByteSize(1))
      ->capture_default_str();
  app.add_option("--max-bytes,-e", options.max_bytes,
                 "Largest message (suffixes K, M, G, T); refused when the buffers would not fit in this host's memory")
      ->transform(chorus::tools::ByteSize(1))
      ->capture_default_str();
  app.add_option("--step-factor,-f", options.step_factor, "Size multiplier between rows")
      ->capture_default_str()
      ->check(chorus::tools::FiniteRange(1.01, 1e6));
  app.add_option("--iters", options.settings.iters, "Timed iterations per size (0: fit --time-budget-ms)")
      ->capture_default_str()
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));
  app.add_option("--warmup", options.settings.warmup, "Untimed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));
  app.add_option("--time-budget-ms", options.settings.budget_ms, "Time per size and algorithm when --iters is 0")
      ->capture_default_str()
      ->check(chorus::tools::FiniteRange(0.001, 3.6e6));
  app.add_option("--rounds", options.settings.rounds,
                 "Timed rounds per size (median reported); with --algo all the algorithms interleave")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_flag("--check", options.settings.check, "Verify every result bit-exactly and count wrong elements");
  app.add_flag("--in-place", options.settings.in_place,
               "allreduce only: the output buffer is the input, as torch.distributed calls it");
  app.add_flag("--barrier", options.settings.barrier_each,
               "Time each iteration alone after a barrier (the round's time is their sum), not back to back");
  app.add_flag("--rewrite-input", options.settings.rewrite_input,
               "Write the call's input afresh before each call (timed too), as a training step hands over a "
               "new gradient; host memory only");
  app.add_flag("--register", options.settings.register_buffers,
               "Register the host buffers with chorus::register_buffer, so verbs pins them once, not per message");
  app.add_option("--json", options.json_file,
                 "Also write the rows as JSON to this file, with the version, hosts, time and settings of the run");
  app.add_option("--timeout-ms", options.timeout_ms,
                 "Timeout of connecting and of each collective (default: CHORUS_TIMEOUT, else the library's)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  app.add_option("--streams", options.streams,
                 "TCP connections per pair of ranks, large messages striped over them (default: CHORUS_STREAMS, "
                 "else the library's)")
      ->check(CLI::Range(1, 16));
  app.add_option("--transport", options.transports,
                 "Transports to use, in order of preference, e.g. tcp or shm,tcp (default: CHORUS_TRANSPORT, "
                 "else every transport of the build)")
      ->delimiter(',');
  app.add_option("--trace", options.trace,
                 "Write a Chrome trace of every collective, one file per rank: {rank} in the name, else .rank<N> "
                 "before the extension (default: CHORUS_TRACE, else none; docs/trace.md)");
  app.add_flag("--trace-steps", options.trace_steps, "With --trace: every step of every collective too");
  app.add_option("--device", options.device,
                 "Where the buffers live: host, cuda (device local_rank % devices) or cuda:N")
      ->capture_default_str();
  std::string fake_hosts_text;
  app.add_option("--fake-hosts", fake_hosts_text,
                 "With --ranks: pretend the ranks run on hosts of these sizes, e.g. 2,2 (CHORUS_HOST_ID per rank: "
                 "shared memory within a host, TCP across)")
      ->check([](const std::string& text) {
        return chorus::tools::parse_fake_hosts(text) ? std::string() : "expected ranks per host, e.g. 2,2";
      });
  CLI11_PARSE(app, argc, argv);
  if (!fake_hosts_text.empty()) options.fake_hosts = *chorus::tools::parse_fake_hosts(fake_hosts_text);
  const bool forking = !bench::launched_by_a_launcher();
  try {
    if (const std::string problem = check_options(options, forking); !problem.empty()) {
      std::fprintf(stderr, "chorus-bench: %s\n", problem.c_str());
      return 2;
    }
    chorus::validate_reduction(*chorus::parse_data_type(options.type), *chorus::parse_reduce_op(options.redop));
    if (forking) {
      if (options.ranks < 1) {
        std::fprintf(stderr, "chorus-bench: give --ranks N to fork N local ranks, or run under a launcher "
                             "(chorus-run, mpirun) that sets CHORUS_RANK/CHORUS_SIZE/CHORUS_STORE\n");
        return 2;
      }
      std::vector<std::string> self = {"/proc/self/exe"};
      for (int i = 1; i < argc; ++i) self.emplace_back(argv[i]);
      // Resolve before forking: /proc/self/exe in the child is still us.
      self[0] = std::filesystem::read_symlink("/proc/self/exe").string();
      auto result = chorus::tools::launch_local(options.ranks, self, options.fake_hosts);
      if (result.exit_code != 0) std::fprintf(stderr, "chorus-bench: %s\n", result.description.c_str());
      return result.exit_code;
    }
    return run_rank(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "chorus-bench: %s\n", error.what());
    return 1;
  }
}
