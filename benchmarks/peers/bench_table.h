// Shared by the peer drivers (Gloo, MPI): command-line sizes, the nccl-tests
// bus factors, chorus-bench's exact row format and its timing, so a peer's
// table lines up column for column with ours.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace chorus::peers {

struct Settings {
  std::string op = "allreduce";
  std::string algo;
  size_t min_bytes = 8, max_bytes = 64u << 20;
  double factor = 2.0;
  int warmup = 5, rounds = 3;
  double budget_ms = 200;
  int iters = 0;  // --iters: timed iterations per round (0: fit the budget)
  bool check = false;
  bool in_place = false;      // --in-place: allreduce whose output is its input (MPI_IN_PLACE)
  bool barrier_each = false;  // --barrier: time each iteration alone, after a barrier
  bool rewrite_input = false;  // --rewrite-input: the call's input written afresh before each call (timed)
};

// What a driver runs: its collectives, and whether it takes --in-place and --barrier.
struct Accepts {
  std::vector<std::string> ops{"allreduce", "broadcast", "allgather"};
  bool in_place = false;
  bool barrier = false;
  bool rewrite_input = false;
};

// Messages made of one block per rank (nccl-tests' and chorus-bench's size: all the blocks).
inline bool blocks_per_rank(const std::string& op) {
  return op == "allgather" || op == "reduce_scatter" || op == "alltoall";
}

inline bool reduces(const std::string& op) { return op == "allreduce" || op == "reduce_scatter"; }

inline size_t parse_bytes(const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  switch (*end) {
    case 'K': case 'k': value *= 1024.0; break;
    case 'M': case 'm': value *= 1024.0 * 1024; break;
    case 'G': case 'g': value *= 1024.0 * 1024 * 1024; break;
    default: break;
  }
  return static_cast<size_t>(value);
}

// -b/-e/-f, --op, --algo, --check, --warmup, --rounds, --time-budget-ms, --iters, and
// where the driver accepts them --in-place and --barrier: chorus-bench's spellings.
inline Settings parse_settings(int argc, char** argv, const Accepts& accepts = {}) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", arg.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (arg == "-b" || arg == "--min-bytes") s.min_bytes = parse_bytes(next());
    else if (arg == "-e" || arg == "--max-bytes") s.max_bytes = parse_bytes(next());
    else if (arg == "-f" || arg == "--step-factor") s.factor = std::stod(next());
    else if (arg == "--op") s.op = next();
    else if (arg == "--algo") s.algo = next();
    else if (arg == "--warmup") s.warmup = std::stoi(next());
    else if (arg == "--rounds") s.rounds = std::stoi(next());
    else if (arg == "--time-budget-ms") s.budget_ms = std::stod(next());
    else if (arg == "--iters") s.iters = std::stoi(next());
    else if (arg == "--check") s.check = true;
    else if (arg == "--in-place" && accepts.in_place) s.in_place = true;
    else if (arg == "--barrier" && accepts.barrier) s.barrier_each = true;
    else if (arg == "--rewrite-input" && accepts.rewrite_input) s.rewrite_input = true;
    else { std::fprintf(stderr, "unknown option %s\n", arg.c_str()); std::exit(2); }
  }
  if (std::find(accepts.ops.begin(), accepts.ops.end(), s.op) == accepts.ops.end()) {
    std::string valid;
    for (const std::string& op : accepts.ops) valid += (valid.empty() ? "" : ", ") + op;
    std::fprintf(stderr, "--op must be one of %s, not %s\n", valid.c_str(), s.op.c_str());
    std::exit(2);
  }
  if (s.in_place && s.op != "allreduce") {
    std::fprintf(stderr, "--in-place is for --op allreduce, not %s\n", s.op.c_str());
    std::exit(2);
  }
  return s;
}

inline double bus_factor(const std::string& op, int size) {
  if (size <= 1) return 0;
  if (op == "allreduce") return 2.0 * (size - 1) / size;
  if (blocks_per_rank(op)) return double(size - 1) / size;
  if (op == "barrier") return 0;
  return 1.0;
}

// A message of one block per rank is sized by all its blocks, as in chorus-bench:
// count per rank = bytes / 4 / size.
inline size_t per_rank_count(const std::string& op, int size, size_t bytes) {
  if (op == "barrier") return 0;
  return blocks_per_rank(op) ? bytes / 4 / size : bytes / 4;
}

// Elements of a rank's input and output buffers for `count` per rank.
inline size_t input_count(const std::string& op, int size, size_t count) {
  return op == "reduce_scatter" || op == "alltoall" ? count * size : count;
}
inline size_t output_count(const std::string& op, int size, size_t count) {
  return op == "allgather" || op == "alltoall" ? count * size : count;
}

inline std::vector<size_t> sizes(const Settings& s) {
  if (s.op == "barrier") return {0};  // one row, as chorus-bench prints it
  std::vector<size_t> out;
  for (double b = double(s.min_bytes); b <= double(s.max_bytes); b *= s.factor) out.push_back(size_t(b));
  return out;
}

inline void print_header(const Settings& s, const std::string& library, int size, const std::string& algo) {
  std::printf("# %s: %s, %d ranks, algorithm %s, float32%s%s%s%s%s, median of %d rounds\n", library.c_str(),
              s.op.c_str(), size, algo.c_str(), reduces(s.op) ? " sum" : "", s.check ? ", checked" : "",
              s.in_place ? ", in place" : "", s.barrier_each ? ", barrier before each iteration" : "",
              s.rewrite_input ? ", input rewritten before each call" : "", s.rounds);
  std::printf("#%13s %13s %9s %6s %5s %12s %12s %12s %8s\n", "size(B)", "count", "type", "redop", "root",
              "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  std::fflush(stdout);
}

inline void print_row(const Settings& s, int size, size_t count_per_rank, double seconds, long long wrong) {
  const size_t count = blocks_per_rank(s.op) ? count_per_rank * size : count_per_rank;
  const size_t bytes = count * 4;
  const double algbw = seconds > 0 ? double(bytes) / seconds / 1e9 : 0;
  std::printf("%14zu %13zu %9s %6s %5d %12.2f %12.3f %12.3f %8s\n", bytes, count, "float32",
              reduces(s.op) ? "sum" : "-", s.op == "broadcast" ? 0 : -1, seconds * 1e6, algbw,
              algbw * bus_factor(s.op, size), s.check ? std::to_string(wrong).c_str() : "N/A");
  std::fflush(stdout);
}

// Inputs are small integers so any summation order is exact: rank r, element i holds (r + 1) * (i % 7 + 1).
inline float input_value(int rank, size_t i) { return float((rank + 1) * int(i % 7 + 1)); }
// Element i of the sum over all ranks of input_value.
inline float sum_value(int size, size_t i) { return float(size * (size + 1) / 2 * int(i % 7 + 1)); }

// Elements of `result` (broadcast: the data buffer; otherwise the output)
// that differ from the exact result; inputs as input_value fills them over
// input_count(op, size, count_per_rank) elements.
inline long long count_wrong(const Settings& s, int rank, int size, const std::vector<float>& result,
                             size_t count_per_rank) {
  long long wrong = 0;
  const size_t n = count_per_rank;
  if (s.op == "allreduce") {
    for (size_t i = 0; i < n; ++i) wrong += result[i] != sum_value(size, i);
  } else if (s.op == "broadcast") {
    for (size_t i = 0; i < n; ++i) wrong += result[i] != input_value(0, i);
  } else if (s.op == "allgather") {
    for (int r = 0; r < size; ++r)
      for (size_t i = 0; i < n; ++i) wrong += result[r * n + i] != input_value(r, i);
  } else if (s.op == "reduce_scatter") {  // this rank's block of the sum
    for (size_t i = 0; i < n; ++i) wrong += result[i] != sum_value(size, rank * n + i);
  } else if (s.op == "alltoall") {  // block r: what rank r's input held at this rank's block
    for (int r = 0; r < size; ++r)
      for (size_t i = 0; i < n; ++i) wrong += result[r * n + i] != input_value(r, rank * n + i);
  }
  return wrong;
}

// chorus-bench's timing (benchmarks/bench_runner.cc): warmup, iterations
// sized to the budget from one timed call, then the median over rounds of
// the slowest rank's mean (max_over_ranks). A round times its iterations
// back to back, or with --barrier each one alone after `barrier` and sums them.
inline double time_collective(const Settings& s, const std::function<void()>& once,
                              const std::function<double(double)>& max_over_ranks,
                              const std::function<void()>& barrier = {}) {
  using clock = std::chrono::steady_clock;
  if (s.barrier_each && !barrier) {
    std::fprintf(stderr, "--barrier: this driver has no barrier\n");
    std::exit(2);
  }
  auto time_iterations = [&](int iters) {
    double seconds = 0;
    if (s.barrier_each) {
      for (int i = 0; i < iters; ++i) {
        barrier();
        const auto start = clock::now();
        once();
        seconds += std::chrono::duration<double>(clock::now() - start).count();
      }
    } else {
      const auto start = clock::now();
      for (int i = 0; i < iters; ++i) once();
      seconds = std::chrono::duration<double>(clock::now() - start).count();
    }
    return seconds;
  };
  for (int i = 0; i < s.warmup; ++i) once();
  const double single = max_over_ranks(time_iterations(1));
  const int rounds = std::max(s.rounds, 1);
  // A fixed count (--iters) lets counters per call (perf stat) divide by it.
  const int iters = s.iters > 0 ? s.iters
                                : int(std::clamp(s.budget_ms * 1e-3 / rounds / std::max(single, 1e-7), 2.0, 2000.0));
  std::vector<double> samples;
  for (int round = 0; round < rounds; ++round) samples.push_back(max_over_ranks(time_iterations(iters)) / iters);
  std::nth_element(samples.begin(), samples.begin() + long(samples.size() / 2), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace chorus::peers
