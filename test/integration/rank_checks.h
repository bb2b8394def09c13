// What the integration rank program checks and how it reports: bit-exact
// collective checks (data patterns of small integers, so every sum is exact in
// every type and any reduction order), guarded buffers, and the RESULT line.
#pragma once

#include <chorus/chorus.h>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace chorus::integration {

// A collective returned data other than expected; the text says where.
class WrongResult : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// CLOCK_MONOTONIC is one clock for every process on the host, so the driver
// can subtract the time it sent a signal from the time a rank saw the error.
int64_t monotonic_ms();

template <class... Parts>
std::string cat_fields(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// Prints "RESULT rank=R status=S <fields> what=<text on one line>" and flushes.
void print_result(int rank, const std::string& status, const std::string& fields, const std::string& what);
int print_ok(int rank, int64_t iterations);

// "IoError", "TimeoutError", ... (the most derived chorus class).
std::string error_class(const chorus::Error& error);
std::string exception_class(const std::exception& error);
// "peer=N" for an IoError, "peer=none" otherwise.
std::string describe_peer(const chorus::Error& error);
// A finished Context must throw again on the next call; the class it throws, or "none".
std::string error_class_after(chorus::Context& context);

// Memory with guard bytes on both sides, to prove nobody wrote out of bounds.
class GuardedBuffer {
 public:
  GuardedBuffer(size_t bytes, std::byte fill);
  std::byte* data() { return storage_.data() + kGuardBytes; }
  size_t size() const { return bytes_; }
  bool guards_intact() const;

 private:
  static constexpr size_t kGuardBytes = 4096;
  static constexpr std::byte kGuard{0xe7};
  size_t bytes_;
  std::vector<std::byte> storage_;
};

// Allreduce checks; each throws WrongResult on the first differing element
// (also when an out-of-place call changed its input).
void check_allreduce_float_sum(chorus::Context& context, size_t count, bool in_place);
void check_allreduce_int_max(chorus::Context& context, size_t count, bool in_place);
void check_allreduce_bfloat16_sum(chorus::Context& context, size_t count, bool in_place);
void check_allreduce_float_avg(chorus::Context& context, size_t count, bool in_place);
void check_allreduce_int_avg(chorus::Context& context, size_t count, bool in_place);
// Broadcasts of several types and counts (0, 1, 13, 1000003) from root.
void check_broadcast(chorus::Context& context, int root);
// Ranks enter at staggered times; nobody may leave before the last entered.
void check_barrier(chorus::Context& context);
// Several async collectives in flight, a blocking one issued behind them,
// waited in reverse order.
void check_async_sequence(chorus::Context& context);

// The loop scenarios' 4 MiB allreduce: small integers varying per iteration.
void fill_loop_pattern(std::vector<float>& data, int rank, int64_t iteration);
// Empty when data holds the sum over `size` ranks, else where it differs.
std::string check_loop_pattern(const std::vector<float>& data, int size, int64_t iteration);

}  // namespace chorus::integration
