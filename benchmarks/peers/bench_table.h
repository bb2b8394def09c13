// Shared by the peer drivers (Gloo, Open MPI): command-line sizes, the
// nccl-tests bus factors and chorus-bench's exact row format, so a peer's
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
  bool check = false;
};

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

// -b/-e/-f, --op, --algo, --check, --warmup, --rounds, --time-budget-ms: chorus-bench's spellings.
inline Settings parse_settings(int argc, char** argv) {
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
    else if (arg == "--check") s.check = true;
    else { std::fprintf(stderr, "unknown option %s\n", arg.c_str()); std::exit(2); }
  }
  if (s.op != "allreduce" && s.op != "broadcast" && s.op != "allgather") {
    std::fprintf(stderr, "--op must be allreduce, broadcast or allgather, not %s\n", s.op.c_str());
    std::exit(2);
  }
  return s;
}

inline double bus_factor(const std::string& op, int size) {
  if (size <= 1) return 0;
  if (op == "allreduce") return 2.0 * (size - 1) / size;
  if (op == "allgather") return double(size - 1) / size;
  return 1.0;
}

// Allgather's size is the gathered total, as in chorus-bench: count per rank = bytes / 4 / size.
inline size_t per_rank_count(const std::string& op, int size, size_t bytes) {
  return op == "allgather" ? bytes / 4 / size : bytes / 4;
}

inline std::vector<size_t> sizes(const Settings& s) {
  std::vector<size_t> out;
  for (double b = double(s.min_bytes); b <= double(s.max_bytes); b *= s.factor) out.push_back(size_t(b));
  return out;
}

inline void print_header(const Settings& s, const std::string& library, int size, const std::string& algo) {
  std::printf("# %s: %s, %d ranks, algorithm %s, float32%s%s, median of %d rounds\n", library.c_str(),
              s.op.c_str(), size, algo.c_str(), s.op == "allreduce" ? " sum" : "", s.check ? ", checked" : "",
              s.rounds);
  std::printf("#%13s %13s %9s %6s %5s %12s %12s %12s %8s\n", "size(B)", "count", "type", "redop", "root",
              "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  std::fflush(stdout);
}

inline void print_row(const Settings& s, int size, size_t count_per_rank, double seconds, long long wrong) {
  const size_t count = s.op == "allgather" ? count_per_rank * size : count_per_rank;
  const size_t bytes = count * 4;
  const double algbw = seconds > 0 ? double(bytes) / seconds / 1e9 : 0;
  std::printf("%14zu %13zu %9s %6s %5d %12.2f %12.3f %12.3f %8s\n", bytes, count, "float32",
              s.op == "allreduce" ? "sum" : "-", s.op == "broadcast" ? 0 : -1, seconds * 1e6, algbw,
              algbw * bus_factor(s.op, size), s.check ? std::to_string(wrong).c_str() : "N/A");
  std::fflush(stdout);
}

// Inputs are small integers so any summation order is exact: rank r, element i holds (r + 1) * (i % 7 + 1).
inline float input_value(int rank, size_t i) { return float((rank + 1) * int(i % 7 + 1)); }

inline long long count_wrong(const Settings& s, int rank, int size, const std::vector<float>& result,
                             size_t count_per_rank) {
  long long wrong = 0;
  if (s.op == "allreduce") {
    for (size_t i = 0; i < count_per_rank; ++i)
      wrong += result[i] != float(size * (size + 1) / 2 * int(i % 7 + 1));
  } else if (s.op == "broadcast") {
    for (size_t i = 0; i < count_per_rank; ++i) wrong += result[i] != input_value(0, i);
  } else {
    for (int r = 0; r < size; ++r)
      for (size_t i = 0; i < count_per_rank; ++i) wrong += result[r * count_per_rank + i] != input_value(r, i);
  }
  (void)rank;
  return wrong;
}

// chorus-bench's timing: warmup, iterations sized to the budget from one timed
// call, then the median over rounds of the slowest rank's mean (max_over_ranks).
inline double time_collective(const Settings& s, const std::function<void()>& once,
                              const std::function<double(double)>& max_over_ranks) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < s.warmup; ++i) once();
  auto t0 = clock::now();
  once();
  const double single = max_over_ranks(std::chrono::duration<double>(clock::now() - t0).count());
  const int rounds = std::max(s.rounds, 1);
  const int iters = int(std::clamp(s.budget_ms * 1e-3 / rounds / std::max(single, 1e-7), 2.0, 2000.0));
  std::vector<double> samples;
  for (int round = 0; round < rounds; ++round) {
    auto start = clock::now();
    for (int i = 0; i < iters; ++i) once();
    samples.push_back(max_over_ranks(std::chrono::duration<double>(clock::now() - start).count()) / iters);
  }
  std::nth_element(samples.begin(), samples.begin() + long(samples.size() / 2), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace chorus::peers
