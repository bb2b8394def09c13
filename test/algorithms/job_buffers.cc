// Test helpers for simulating whole jobs.
#include "test/algorithms/job_buffers.h"

#include <cstring>

#include "base/half.h"

namespace chorus::algorithms::testing {

namespace {
template <class T>
void put(std::byte* base, size_t index, T value) {
  std::memcpy(base + index * sizeof(T), &value, sizeof(T));
}
template <class T>
T get(const std::byte* base, size_t index) {
  T value;
  std::memcpy(&value, base + index * sizeof(T), sizeof(T));
  return value;
}
}  // namespace

void store_value(DataType type, std::byte* base, size_t index, int64_t value) {
  switch (type) {
    case DataType::int8: return put(base, index, static_cast<int8_t>(value));
    case DataType::uint8: return put(base, index, static_cast<uint8_t>(value));
    case DataType::int32: return put(base, index, static_cast<int32_t>(value));
    case DataType::uint32: return put(base, index, static_cast<uint32_t>(value));
    case DataType::int64: return put(base, index, static_cast<int64_t>(value));
    case DataType::uint64: return put(base, index, static_cast<uint64_t>(value));
    case DataType::float16: return put(base, index, float_to_half_bits(static_cast<float>(value)));
    case DataType::bfloat16: return put(base, index, float_to_bfloat16_bits(static_cast<float>(value)));
    case DataType::float32: return put(base, index, static_cast<float>(value));
    case DataType::float64: return put(base, index, static_cast<double>(value));
  }
}

int64_t load_value(DataType type, const std::byte* base, size_t index) {
  switch (type) {
    case DataType::int8: return get<int8_t>(base, index);
    case DataType::uint8: return get<uint8_t>(base, index);
    case DataType::int32: return get<int32_t>(base, index);
    case DataType::uint32: return get<uint32_t>(base, index);
    case DataType::int64: return get<int64_t>(base, index);
    case DataType::uint64: return static_cast<int64_t>(get<uint64_t>(base, index));
    case DataType::float16: return static_cast<int64_t>(half_bits_to_float(get<uint16_t>(base, index)));
    case DataType::bfloat16: return static_cast<int64_t>(bfloat16_bits_to_float(get<uint16_t>(base, index)));
    case DataType::float32: return static_cast<int64_t>(get<float>(base, index));
    case DataType::float64: return static_cast<int64_t>(get<double>(base, index));
  }
  return 0;
}

JobBuffers JobBuffers::make(const Call& call, const std::function<int64_t(int, size_t)>& value) {
  JobBuffers job;
  for (int rank = 0; rank < call.size; ++rank) {
    std::vector<std::byte> data(call.bytes());
    for (size_t i = 0; i < call.count; ++i) store_value(call.type, data.data(), i, value(rank, i));
    if (call.in_place) {
      job.outputs.push_back(std::move(data));
    } else {
      job.inputs.push_back(std::move(data));
      job.outputs.emplace_back(call.bytes(), std::byte{0xee});
    }
  }
  return job;
}

std::vector<RankBuffers> JobBuffers::views() {
  std::vector<RankBuffers> views(outputs.size());
  for (size_t rank = 0; rank < outputs.size(); ++rank) {
    views[rank].output = outputs[rank].data();
    views[rank].input = inputs.empty() ? outputs[rank].data() : inputs[rank].data();
  }
  return views;
}

std::vector<Plan> build_plans(PlanBuilder build, const Call& call, const PlanTuning& tuning) {
  std::vector<Plan> plans;
  for (int rank = 0; rank < call.size; ++rank) {
    Call mine = call;
    mine.rank = rank;
    plans.push_back(build(mine, tuning));
  }
  return plans;
}

std::vector<std::byte> expected_bytes(const Call& call, const std::function<int64_t(size_t)>& expected) {
  std::vector<std::byte> bytes(call.bytes());
  for (size_t i = 0; i < call.count; ++i) store_value(call.type, bytes.data(), i, expected(i));
  return bytes;
}

}  // namespace chorus::algorithms::testing
