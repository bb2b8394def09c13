// Bit-exact collective checks and RESULT reporting for the rank program.
// Every pattern uses small integers so each reduction is exact whatever order
// an algorithm adds in; results are compared byte for byte.
#include "test/integration/rank_checks.h"

#include <time.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>
#include <type_traits>

namespace chorus::integration {
namespace {

template <class T>
std::string describe_value(const T& value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  std::string text = cat_fields("0x", std::hex, bits, std::dec);
  if constexpr (std::is_arithmetic_v<T>) text += cat_fields(" (", +value, ")");
  if constexpr (std::is_same_v<T, bfloat16_t>)
    text += cat_fields(" (", std::bit_cast<float>(static_cast<uint32_t>(value.bits) << 16), ")");
  return text;
}

// bfloat16 is the top half of a float32; small integers lose no bits.
bfloat16_t small_integer_bfloat16(int value) {
  return bfloat16_t{static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(value)) >> 16)};
}

template <class T, class Expected>
void verify(const std::string& what, const T* data, size_t count, Expected expected) {
  for (size_t i = 0; i < count; ++i) {
    const T want = expected(i);
    if (std::memcmp(&data[i], &want, sizeof(T)) != 0)
      throw WrongResult(cat_fields(what, ": element ", i, " of ", count, " is ", describe_value(data[i]),
                                   ", expected ", describe_value(want)));
  }
}

template <class T, class Value>
std::vector<T> make_input(size_t count, int rank, Value value) {
  std::vector<T> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = value(i, rank);
  return data;
}

// value(i, rank) is rank's input; expected(i) the reduced element.
template <class T, class Value, class Expected>
void check_allreduce(Context& context, const char* name, size_t count, ReduceOp op, bool in_place, Value value,
                     Expected expected) {
  const std::string what = cat_fields("rank ", context.rank(), ": allreduce ", to_string(data_type_of<T>()), " ",
                                      name, " of ", count, in_place ? " (in place)" : " (out of place)");
  std::vector<T> input = make_input<T>(count, context.rank(), value);
  if (in_place) {
    allreduce(context, input.data(), input.data(), count, data_type_of<T>(), op);
    verify(what, input.data(), count, expected);
    return;
  }
  std::vector<T> output(count);
  // An empty vector's data() may be null, which memset may not be given even for 0 bytes.
  if (count != 0) std::memset(static_cast<void*>(output.data()), 0xcd, count * sizeof(T));
  allreduce(context, input.data(), output.data(), count, data_type_of<T>(), op);
  verify(what, output.data(), count, expected);
  verify(what + " changed its input;", input.data(), count, [&](size_t i) { return value(i, context.rank()); });
}

float float_sum_value(size_t i, int rank) { return static_cast<float>((i * 7 + static_cast<size_t>(rank) * 3) % 17); }

int32_t int_max_value(size_t i, int rank) {
  return static_cast<int32_t>((i * 2654435761ull + static_cast<uint64_t>(rank) * 40503ull) % 100003) - 50000;
}

}  // namespace

int64_t monotonic_ms() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000 + now.tv_nsec / 1000000;
}

void print_result(int rank, const std::string& status, const std::string& fields, const std::string& what) {
  std::string one_line = what;
  std::replace(one_line.begin(), one_line.end(), '\n', '|');
  std::printf("RESULT rank=%d status=%s%s%s what=%s\n", rank, status.c_str(), fields.empty() ? "" : " ",
              fields.c_str(), one_line.c_str());
  std::fflush(stdout);
}

int print_ok(int rank, int64_t iterations) {
  print_result(rank, "ok", cat_fields("iterations=", iterations), "");
  return 0;
}

std::string error_class(const Error& error) {
  if (dynamic_cast<const IoError*>(&error)) return "IoError";
  if (dynamic_cast<const TimeoutError*>(&error)) return "TimeoutError";
  if (dynamic_cast<const InvalidArgument*>(&error)) return "InvalidArgument";
  if (dynamic_cast<const MismatchError*>(&error)) return "MismatchError";
  if (dynamic_cast<const Aborted*>(&error)) return "Aborted";
  return "Error";
}

std::string exception_class(const std::exception& error) {
  if (auto* chorus_error = dynamic_cast<const Error*>(&error)) return error_class(*chorus_error);
  return "std_exception";
}

std::string describe_peer(const Error& error) {
  if (auto* io = dynamic_cast<const IoError*>(&error)) return cat_fields("peer=", io->peer_rank());
  return "peer=none";
}

std::string error_class_after(Context& context) {
  try {
    CollectiveOptions options;
    options.timeout = std::chrono::milliseconds(2000);
    barrier(context, options);
  } catch (const Error& error) {
    return error_class(error);
  }
  return "none";
}

GuardedBuffer::GuardedBuffer(size_t bytes, std::byte fill) : bytes_(bytes), storage_(bytes + 2 * kGuardBytes, kGuard) {
  std::fill(data(), data() + bytes_, fill);
}

bool GuardedBuffer::guards_intact() const {
  auto is_guard = [](std::byte b) { return b == kGuard; };
  return std::all_of(storage_.begin(), storage_.begin() + kGuardBytes, is_guard) &&
         std::all_of(storage_.end() - kGuardBytes, storage_.end(), is_guard);
}

void check_allreduce_float_sum(Context& context, size_t count, bool in_place) {
  const int size = context.size();
  check_allreduce<float>(context, "sum", count, ReduceOp::sum, in_place, float_sum_value, [size](size_t i) {
    float sum = 0;
    for (int r = 0; r < size; ++r) sum += float_sum_value(i, r);
    return sum;
  });
}

void check_allreduce_int_max(Context& context, size_t count, bool in_place) {
  const int size = context.size();
  check_allreduce<int32_t>(context, "max", count, ReduceOp::max, in_place, int_max_value, [size](size_t i) {
    int32_t best = int_max_value(i, 0);
    for (int r = 1; r < size; ++r) best = std::max(best, int_max_value(i, r));
    return best;
  });
}

void check_allreduce_bfloat16_sum(Context& context, size_t count, bool in_place) {
  const int size = context.size();
  auto value = [](size_t i, int rank) { return small_integer_bfloat16(static_cast<int>((i + static_cast<size_t>(rank)) % 5)); };
  check_allreduce<bfloat16_t>(context, "sum", count, ReduceOp::sum, in_place, value, [size](size_t i) {
    int sum = 0;
    for (int r = 0; r < size; ++r) sum += static_cast<int>((i + static_cast<size_t>(r)) % 5);
    return small_integer_bfloat16(sum);
  });
}

void check_allreduce_float_avg(Context& context, size_t count, bool in_place) {
  const int size = context.size();
  auto value = [](size_t i, int rank) { return static_cast<float>(i % 11 + static_cast<size_t>(rank)); };
  // The mean is (i % 11) + (size - 1) / 2: exact in float (a whole or half number).
  check_allreduce<float>(context, "avg", count, ReduceOp::avg, in_place, value, [size](size_t i) {
    return static_cast<float>(static_cast<double>(i % 11) + (size - 1) / 2.0);
  });
}

void check_allreduce_int_avg(Context& context, size_t count, bool in_place) {
  const int size = context.size();
  auto value = [](size_t i, int rank) { return (static_cast<int32_t>(i % 9) - 4) * (rank + 1); };
  // Negative sums too: integer averages truncate toward zero, like C++ division.
  check_allreduce<int32_t>(context, "avg", count, ReduceOp::avg, in_place, value, [size](size_t i) {
    int32_t sum = 0;
    for (int r = 0; r < size; ++r) sum += (static_cast<int32_t>(i % 9) - 4) * (r + 1);
    return sum / size;
  });
}

void check_broadcast(Context& context, int root) {
  const bool is_root = context.rank() == root;
  const std::string what = cat_fields("rank ", context.rank(), ": broadcast from root ", root);

  auto int_value = [root](size_t i) { return static_cast<int32_t>(static_cast<uint32_t>(i * 31 + static_cast<size_t>(root) * 1000)); };
  std::vector<int32_t> ints(1000003, -1);
  if (is_root) for (size_t i = 0; i < ints.size(); ++i) ints[i] = int_value(i);
  broadcast(context, std::span<int32_t>(ints), root);
  verify(what + " of 1000003 int32", ints.data(), ints.size(), int_value);

  auto byte_value = [root](size_t i) { return static_cast<uint8_t>(i * 5 + static_cast<size_t>(root)); };
  std::vector<uint8_t> bytes(13, 0xff);
  if (is_root) for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = byte_value(i);
  broadcast(context, std::span<uint8_t>(bytes), root);
  verify(what + " of 13 uint8", bytes.data(), bytes.size(), byte_value);

  double one = is_root ? root + 0.5 : -1.0;
  broadcast(context, std::span<double>(&one, 1), root);
  verify(what + " of 1 float64", &one, 1, [root](size_t) { return root + 0.5; });

  broadcast(context, nullptr, 0, DataType::float32, root);
}

void check_barrier(Context& context) {
  for (int round = 0; round < 5; ++round) barrier(context);
  // Stagger the entries; the last one to enter bounds everyone's exit.
  std::this_thread::sleep_for(std::chrono::milliseconds(30 * context.rank()));
  timespec entered{};
  clock_gettime(CLOCK_MONOTONIC, &entered);
  barrier(context);
  timespec left{};
  clock_gettime(CLOCK_MONOTONIC, &left);
  auto micros = [](const timespec& t) { return int64_t{t.tv_sec} * 1000000 + t.tv_nsec / 1000; };
  int64_t last_entry = micros(entered);
  allreduce(context, std::span<int64_t>(&last_entry, 1), ReduceOp::max);
  if (micros(left) < last_entry)
    throw WrongResult(cat_fields("rank ", context.rank(), ": left the barrier at ", micros(left),
                                 " us, before the last rank entered it at ", last_entry, " us"));
}

void check_async_sequence(Context& context) {
  const int rank = context.rank();
  const int size = context.size();
  const std::string what = cat_fields("rank ", rank, ": async sequence");

  const size_t big = 1000003;
  std::vector<float> sum_input = make_input<float>(big, rank, float_sum_value);
  std::vector<float> sum_output(big, -1.0f);
  Work sum_work = allreduce_async(context, sum_input.data(), sum_output.data(), big, DataType::float32, ReduceOp::sum);

  const int root = size - 1;
  std::vector<int32_t> broadcast_data(13, -7);
  if (rank == root) for (size_t i = 0; i < 13; ++i) broadcast_data[i] = static_cast<int32_t>(i * i);
  Work broadcast_work = broadcast_async(context, std::span<int32_t>(broadcast_data), root);

  int32_t largest_rank = rank;
  Work max_work = allreduce_async(context, std::span<int32_t>(&largest_rank, 1), ReduceOp::max);

  Work barrier_work = barrier_async(context);

  std::vector<bfloat16_t> halves(4099);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = small_integer_bfloat16(static_cast<int>(i % 3) + rank);
  Work halves_work = allreduce_async(context, std::span<bfloat16_t>(halves), ReduceOp::sum);

  // A blocking call behind queued async ones must run after all of them.
  std::vector<float> blocking(13);
  for (size_t i = 0; i < 13; ++i) blocking[i] = static_cast<float>(i + static_cast<size_t>(rank));
  allreduce(context, std::span<float>(blocking), ReduceOp::sum);
  if (!sum_work.test() || !halves_work.test())
    throw WrongResult(what + ": a blocking allreduce returned before the async ones issued earlier finished");
  const float rank_sum = static_cast<float>(size * (size - 1) / 2);
  verify(what + " blocking float32 sum of 13", blocking.data(), 13,
         [&](size_t i) { return static_cast<float>(i) * static_cast<float>(size) + rank_sum; });

  halves_work.wait();
  barrier_work.wait();
  max_work.wait();
  broadcast_work.wait();
  sum_work.wait();
  for (Work* work : {&sum_work, &broadcast_work, &max_work, &barrier_work, &halves_work}) {
    if (!work->test() || work->exception())
      throw WrongResult(what + ": a waited Work is not finished or carries an error");
  }
  verify(what + " float32 sum of 1000003", sum_output.data(), big, [size](size_t i) {
    float sum = 0;
    for (int r = 0; r < size; ++r) sum += float_sum_value(i, r);
    return sum;
  });
  verify(what + " broadcast of 13 int32", broadcast_data.data(), 13,
         [](size_t i) { return static_cast<int32_t>(i * i); });
  verify(what + " int32 max of 1", &largest_rank, 1, [size](size_t) { return size - 1; });
  verify(what + " bfloat16 sum of 4099", halves.data(), halves.size(), [size](size_t i) {
    return small_integer_bfloat16(static_cast<int>(i % 3) * size + size * (size - 1) / 2);
  });
}

void fill_loop_pattern(std::vector<float>& data, int rank, int64_t iteration) {
  const size_t shift = static_cast<size_t>(iteration) + static_cast<size_t>(rank);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>((i + shift) % 13);
}

std::string check_loop_pattern(const std::vector<float>& data, int size, int64_t iteration) {
  for (size_t i = 0; i < data.size(); ++i) {
    size_t sum = 0;
    for (int r = 0; r < size; ++r) sum += (i + static_cast<size_t>(iteration) + static_cast<size_t>(r)) % 13;
    if (data[i] != static_cast<float>(sum))
      return cat_fields("iteration ", iteration, ": element ", i, " is ", data[i], ", expected ", sum);
  }
  return "";
}

}  // namespace chorus::integration
