// chorus-bench: times collectives over a range of sizes and prints one row per
// size in the style of nccl-tests (time, algbw, busbw, #wrong).
//
//   chorus-bench --ranks 4 --op allreduce --check     # forks 4 local ranks
//   CHORUS_RANK=.. CHORUS_SIZE=.. CHORUS_STORE=.. chorus-bench ...   # under a launcher
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <vector>

#include "benchmarks/bench_connect.h"
#include "benchmarks/check_data.h"
#include "chorus/chorus.h"
#include "chorus/log.h"
#include "tools/local_launcher.h"

namespace {

using namespace chorus;
using bench::Operation;

struct BenchOptions {
  int ranks = 0;
  std::string operation = "allreduce";
  std::string algorithm = "auto";
  std::string type = "float32";
  std::string redop = "sum";
  int root = 0;
  size_t min_bytes = 8;
  size_t max_bytes = 64u << 20;
  double step_factor = 2.0;
  int iters = 0;  // 0: as many as fit in the time budget
  int warmup = 5;
  double budget_ms = 200;
  bool check = false;
  std::string json_file;
  int timeout_ms = 60000;
};

struct Row {
  size_t bytes = 0;
  size_t count = 0;
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  uint64_t wrong = 0;
  int iters = 0;
};

// nccl-tests' bus bandwidth factors: the fraction of the data each rank's
// busiest link carries relative to the message, so busbw compares with the link rate.
double bus_factor(Operation operation, int size) {
  if (operation == Operation::allreduce) return size > 1 ? 2.0 * (size - 1) / size : 0.0;
  if (operation == Operation::broadcast) return 1.0;
  return 0.0;
}

// Everything the table needs agrees across ranks: the slowest rank's time.
double max_over_ranks(Context& context, double value) {
  allreduce(context, &value, &value, 1, DataType::float64, ReduceOp::max);
  return value;
}

class Runner {
 public:
  Runner(Context& context, const BenchOptions& options, Operation operation, DataType type, ReduceOp op)
      : context_(context), options_(options), operation_(operation), type_(type), op_(op) {
    collective_options_.algorithm = options.algorithm;
  }

  Row run_size(size_t bytes) {
    Row row;
    const size_t element = element_size(type_);
    row.count = operation_ == Operation::barrier ? 0 : bytes / element;
    row.bytes = row.count * element;
    input_.resize(row.bytes);
    output_.resize(row.bytes);
    if (options_.check) {
      bench::fill_input(operation_, type_, op_, context_.rank(), context_.size(), options_.root, input_.data(),
                        row.count);
      run_once(row.count);
      const void* result = operation_ == Operation::allreduce ? output_.data() : input_.data();
      uint64_t wrong = bench::count_wrong(operation_, type_, op_, context_.rank(), context_.size(), options_.root,
                                          result, row.count);
      allreduce(context_, &wrong, &wrong, 1, DataType::uint64, ReduceOp::sum);
      row.wrong = wrong;
    }
    for (int i = 0; i < options_.warmup; ++i) run_once(row.count);
    int iters = options_.iters;
    if (iters <= 0) {
      double once = max_over_ranks(context_, time_iterations(row.count, 1));
      iters = static_cast<int>(std::clamp(options_.budget_ms * 1e-3 / std::max(once, 1e-7), 3.0, 2000.0));
    }
    row.iters = iters;
    double seconds = max_over_ranks(context_, time_iterations(row.count, iters)) / iters;
    row.time_us = seconds * 1e6;
    row.algbw = seconds > 0 ? static_cast<double>(row.bytes) / seconds / 1e9 : 0;
    row.busbw = row.algbw * bus_factor(operation_, context_.size());
    return row;
  }

 private:
  void run_once(size_t count) {
    switch (operation_) {
      case Operation::allreduce:
        allreduce(context_, input_.data(), output_.data(), count, type_, op_, collective_options_);
        break;
      case Operation::broadcast:
        broadcast(context_, input_.data(), count, type_, options_.root, collective_options_);
        break;
      case Operation::barrier: barrier(context_, collective_options_); break;
    }
  }

  double time_iterations(size_t count, int iters) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) run_once(count);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  Context& context_;
  const BenchOptions& options_;
  Operation operation_;
  DataType type_;
  ReduceOp op_;
  CollectiveOptions collective_options_;
  std::vector<std::byte> input_;
  std::vector<std::byte> output_;
};

int run_rank(const BenchOptions& options) {
  static const std::map<std::string, Operation> operations = {
      {"allreduce", Operation::allreduce}, {"broadcast", Operation::broadcast}, {"barrier", Operation::barrier}};
  Operation operation = operations.at(options.operation);
  DataType type = *parse_data_type(options.type);
  ReduceOp op = *parse_reduce_op(options.redop);

  ConnectOptions connect_options;
  connect_options.timeout = std::chrono::milliseconds(options.timeout_ms);
  std::shared_ptr<Context> context = bench::connect_for_benchmark(connect_options);
  const bool printer = context->rank() == 0;
  if (operation == Operation::broadcast && (options.root < 0 || options.root >= context->size()))
    throw InvalidArgument(cat("--root ", options.root, " is out of range for ", context->size(), " ranks"));

  if (printer) {
    std::printf("# chorus-bench: %s, %d ranks, algorithm %s, %s %s%s\n", options.operation.c_str(), context->size(),
                options.algorithm.c_str(), options.type.c_str(), options.redop.c_str(),
                options.check ? ", checked" : "");
    std::printf("#%13s %13s %9s %6s %5s %12s %12s %12s %8s\n", "size(B)", "count", "type", "redop", "root",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    std::fflush(stdout);
  }
  Runner runner(*context, options, operation, type, op);
  nlohmann::json rows = nlohmann::json::array();
  uint64_t total_wrong = 0;
  std::vector<size_t> sizes;
  if (operation == Operation::barrier) {
    sizes.push_back(0);
  } else {
    for (double bytes = static_cast<double>(options.min_bytes); bytes <= static_cast<double>(options.max_bytes);
         bytes *= options.step_factor) {
      sizes.push_back(static_cast<size_t>(bytes));
    }
  }
  for (size_t bytes : sizes) {
    Row row = runner.run_size(bytes);
    total_wrong += row.wrong;
    if (!printer) continue;
    std::printf("%14zu %13zu %9s %6s %5d %12.2f %12.3f %12.3f %8s\n", row.bytes, row.count, options.type.c_str(),
                operation == Operation::allreduce ? options.redop.c_str() : "-",
                operation == Operation::broadcast ? options.root : -1, row.time_us, row.algbw, row.busbw,
                options.check ? std::to_string(row.wrong).c_str() : "N/A");
    std::fflush(stdout);
    rows.push_back({{"bytes", row.bytes}, {"count", row.count}, {"type", options.type}, {"redop", options.redop},
                    {"time_us", row.time_us}, {"algbw_gbps", row.algbw}, {"busbw_gbps", row.busbw},
                    {"wrong", options.check ? nlohmann::json(row.wrong) : nlohmann::json(nullptr)},
                    {"iters", row.iters}});
  }
  if (printer && !options.json_file.empty()) {
    nlohmann::json document = {{"operation", options.operation}, {"ranks", context->size()},
                               {"algorithm", options.algorithm}, {"rows", rows}};
    std::ofstream(options.json_file) << document.dump(2) << "\n";
  }
  if (printer && options.check) std::printf("# %s: %llu wrong elements in total\n", total_wrong ? "FAILED" : "OK",
                                            static_cast<unsigned long long>(total_wrong));
  return total_wrong == 0 ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  BenchOptions options;
  CLI::App app{"chorus-bench: time chorus collectives (nccl-tests style rows)"};
  app.add_option("--ranks,-n", options.ranks, "Fork this many local ranks (ignored under a launcher)");
  app.add_option("--op", options.operation, "Collective")->check(CLI::IsMember({"allreduce", "broadcast", "barrier"}));
  app.add_option("--algo", options.algorithm, "Algorithm name or auto");
  app.add_option("--dtype", options.type, "Element type")->check([](const std::string& name) {
    return chorus::parse_data_type(name) ? std::string() : "unknown data type " + name;
  });
  app.add_option("--redop", options.redop, "Reduction")->check([](const std::string& name) {
    return chorus::parse_reduce_op(name) ? std::string() : "unknown reduction " + name;
  });
  app.add_option("--root", options.root, "Broadcast root");
  app.add_option("--min-bytes,-b", options.min_bytes, "Smallest message (suffixes K, M, G = 2^10, 2^20, 2^30)")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--max-bytes,-e", options.max_bytes, "Largest message (suffixes K, M, G)")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--step-factor,-f", options.step_factor, "Size multiplier between rows")->check(CLI::Range(1.01, 1e6));
  app.add_option("--iters", options.iters, "Timed iterations per size (0: fit --time-budget-ms)");
  app.add_option("--warmup", options.warmup, "Untimed iterations per size");
  app.add_option("--time-budget-ms", options.budget_ms, "Time per size when --iters is 0");
  app.add_flag("--check", options.check, "Verify every result bit-exactly and count wrong elements");
  app.add_option("--json", options.json_file, "Also write the rows as JSON to this file");
  app.add_option("--timeout-ms", options.timeout_ms, "Timeout of connecting and of each collective");
  CLI11_PARSE(app, argc, argv);

  try {
    chorus::validate_reduction(*chorus::parse_data_type(options.type), *chorus::parse_reduce_op(options.redop));
    if (!bench::launched_by_a_launcher()) {
      if (options.ranks < 1) {
        std::fprintf(stderr, "chorus-bench: give --ranks N to fork N local ranks, or run under a launcher "
                             "(chorus-run, mpirun) that sets CHORUS_RANK/CHORUS_SIZE/CHORUS_STORE\n");
        return 2;
      }
      std::vector<std::string> self = {"/proc/self/exe"};
      for (int i = 1; i < argc; ++i) self.emplace_back(argv[i]);
      // Resolve before forking: /proc/self/exe in the child is still us.
      self[0] = std::filesystem::read_symlink("/proc/self/exe").string();
      auto result = chorus::tools::launch_local(options.ranks, self);
      if (result.exit_code != 0) std::fprintf(stderr, "chorus-bench: %s\n", result.description.c_str());
      return result.exit_code;
    }
    return run_rank(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "chorus-bench: %s\n", error.what());
    return 1;
  }
}
