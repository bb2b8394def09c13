// chorus-reduce-bench: how fast the reduction kernels run on this machine,
// next to memcpy of the same bytes, so "reductions at memory bandwidth" is a
// measured claim. A ring allreduce reduces every byte it receives once per
// step; if the kernel were slower than the wire, it would set the pace.
//
// GB/s counts the bytes of one operand per second (1 GB = 1e9 B), as a
// collective's busbw does. The kernel reads two streams and writes one;
// memcpy reads one and writes one, so at sizes beyond the caches a sum at
// ~2/3 of memcpy's figure is already running at memory bandwidth.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/copy.h"
#include "base/reduce.h"
#include "base/types.h"
#include "base/log.h"
#include "base/version.h"
#include "tools/flag_checks.h"

namespace {

using Clock = std::chrono::steady_clock;

// Best of `rounds` timings of `repeat` calls: the minimum filters the noise of
// a shared machine better than a mean does, and nothing here can run faster
// than the hardware allows.
template <class Body>
double best_seconds_per_call(int rounds, int repeat, Body&& body) {
  double best = 1e30;
  for (int round = 0; round < rounds; ++round) {
    const auto start = Clock::now();
    for (int i = 0; i < repeat; ++i) body();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count() / repeat;
    best = std::min(best, seconds);
  }
  return best;
}

// Small integers in every type, so no value is a NaN, inf or denormal,
// which some CPUs handle on a slow path.
void fill_small_integers(chorus::DataType type, std::vector<std::byte>& bytes) {
  const size_t count = bytes.size() / chorus::element_size(type);
  std::vector<std::byte> one(chorus::element_size(type));
  for (size_t i = 0; i < count; ++i) {
    const int value = static_cast<int>(i % 4);
    switch (type) {
      case chorus::DataType::float32: { float v = static_cast<float>(value); std::memcpy(one.data(), &v, 4); break; }
      case chorus::DataType::float64: { double v = value; std::memcpy(one.data(), &v, 8); break; }
      // 0..3 as bfloat16 / float16 bit patterns.
      case chorus::DataType::bfloat16: { const uint16_t bits[] = {0x0000, 0x3f80, 0x4000, 0x4040}; std::memcpy(one.data(), &bits[value], 2); break; }
      case chorus::DataType::float16: { const uint16_t bits[] = {0x0000, 0x3c00, 0x4000, 0x4200}; std::memcpy(one.data(), &bits[value], 2); break; }
      default: { std::fill(one.begin(), one.end(), std::byte{0}); one[0] = static_cast<std::byte>(value); break; }
    }
    std::memcpy(bytes.data() + i * one.size(), one.data(), one.size());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chorus-reduce-bench: reduction kernel GB/s against memcpy"};
  app.set_version_flag("--version", std::string("chorus-reduce-bench ") + chorus::version());
  std::vector<size_t> sizes = {size_t{256} << 10, size_t{64} << 20};
  std::vector<std::string> types = {"float32", "bfloat16", "float16", "float64", "int32"};
  int rounds = 5;
  app.add_option("--sizes", sizes, "Operand sizes (K, M, G suffixes = 2^10, 2^20, 2^30), at most 4G")
      ->transform(chorus::tools::ByteSize(1))
      ->check(CLI::Range(size_t{1}, size_t{4} << 30));
  app.add_option("--dtypes", types, "Element types to time (sum)")->check([](const std::string& name) {
    return chorus::parse_data_type(name) ? std::string() : "unknown element type '" + name + "'";
  });
  app.add_option("--rounds", rounds, "Timed rounds per row (best is reported)")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  if (const std::string problem = chorus::tools::log_setting_problem(); !problem.empty()) {
    std::fprintf(stderr, "chorus-reduce-bench: %s\n", problem.c_str());
    return 2;
  }
  // Each size holds an accumulator, an operand and a copy at once.
  const size_t largest = sizes.empty() ? 0 : *std::max_element(sizes.begin(), sizes.end());
  const std::string memory = chorus::tools::memory_shortfall(
      chorus::cat("--sizes ", chorus::tools::describe_bytes(largest)), chorus::tools::saturating_multiply(largest, 3), 0);
  if (!memory.empty()) {
    std::fprintf(stderr, "chorus-reduce-bench: %s\n", memory.c_str());
    return 2;
  }

  std::printf("# chorus-reduce-bench: sum kernels vs memcpy, best of %d rounds, GB/s of one operand\n", rounds);
  std::printf("# CPU %.*s: copy_bytes takes %.*s from %zu bytes (switching at %zu) up to %zu\n",
              static_cast<int>(chorus::this_cpu_vendor().size()), chorus::this_cpu_vendor().data(),
              static_cast<int>(chorus::mid_size_copy_name().size()), chorus::mid_size_copy_name().data(),
              chorus::kMidCopyFrom, chorus::kVectorCopyFrom, chorus::kVectorCopyBelow);
  std::printf("# %12s %10s %10s %12s\n", "size(B)", "kernel", "GB/s", "vs memcpy");
  for (const size_t bytes : sizes) {
    std::vector<std::byte> accumulator(bytes), operand(bytes), copy(bytes);
    // About 0.2 s of memory traffic per round whatever the size.
    const int repeat = static_cast<int>(std::max<size_t>(1, (size_t{1} << 30) / std::max<size_t>(bytes, 1) / 5));
    std::memset(operand.data(), 1, bytes);
    const double memcpy_seconds = best_seconds_per_call(rounds, repeat, [&] {
      std::memcpy(copy.data(), operand.data(), bytes);
      asm volatile("" ::: "memory");  // the copy must happen every time
    });
    const double memcpy_gbps = static_cast<double>(bytes) / memcpy_seconds / 1e9;
    std::printf("  %12zu %10s %10.2f %12s\n", bytes, "memcpy", memcpy_gbps, "1.00");
    // chorus's own copy (base/copy.h), and its vector loop at every size.
    const double copy_seconds = best_seconds_per_call(rounds, repeat, [&] {
      chorus::copy_bytes(copy.data(), operand.data(), bytes);
      asm volatile("" ::: "memory");
    });
    const double copy_gbps = static_cast<double>(bytes) / copy_seconds / 1e9;
    std::printf("  %12zu %10s %10.2f %12.2f\n", bytes, "copy_bytes", copy_gbps, copy_gbps / memcpy_gbps);
    const double loop_seconds = best_seconds_per_call(rounds, repeat, [&] {
      chorus::vector_copy(copy.data(), operand.data(), bytes);
      asm volatile("" ::: "memory");
    });
    const double loop_gbps = static_cast<double>(bytes) / loop_seconds / 1e9;
    std::printf("  %12zu %10s %10.2f %12.2f\n", bytes, "vec_copy", loop_gbps, loop_gbps / memcpy_gbps);
    for (const std::string& name : types) {
      const auto type = chorus::parse_data_type(name);
      if (!type) {
        std::fprintf(stderr, "chorus-reduce-bench: unknown type '%s'\n", name.c_str());
        return 2;
      }
      fill_small_integers(*type, accumulator);
      fill_small_integers(*type, operand);
      const size_t count = bytes / chorus::element_size(*type);
      // The accumulator grows by at most 3 per pass; a few thousand passes
      // stay far below float16's 65504, so no type reaches inf or NaN.
      const double seconds = best_seconds_per_call(rounds, repeat, [&] {
        chorus::reduce_into(*type, chorus::ReduceOp::sum, accumulator.data(), operand.data(), count);
        asm volatile("" ::: "memory");
      });
      const double gbps = static_cast<double>(bytes) / seconds / 1e9;
      std::printf("  %12zu %10s %10.2f %12.2f\n", bytes, name.c_str(), gbps, gbps / memcpy_gbps);
    }
  }
  return 0;
}
