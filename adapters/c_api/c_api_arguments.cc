// C values to C++ ones for the C API's calls on a Context: element types,
// reduce ops, memory kinds, per-call options and count arrays, each checked
// before it is cast, so that no value a C caller passes is undefined
// behaviour here. Whether a type or op is one chorus knows, and whether the
// op applies to the type, the C++ API checks (the C values equal its enumerators).
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

#include "adapters/c_api/c_api.h"
#include "api/collective_checks.h"
#include "base/memory.h"

namespace chorus::c_api {
namespace {

// The C numbering is the C++ numbering, so converting is a range check and a cast.
static_assert(CHORUS_INT8 == static_cast<int>(DataType::int8));
static_assert(CHORUS_UINT8 == static_cast<int>(DataType::uint8));
static_assert(CHORUS_INT32 == static_cast<int>(DataType::int32));
static_assert(CHORUS_UINT32 == static_cast<int>(DataType::uint32));
static_assert(CHORUS_INT64 == static_cast<int>(DataType::int64));
static_assert(CHORUS_UINT64 == static_cast<int>(DataType::uint64));
static_assert(CHORUS_FLOAT16 == static_cast<int>(DataType::float16));
static_assert(CHORUS_BFLOAT16 == static_cast<int>(DataType::bfloat16));
static_assert(CHORUS_FLOAT32 == static_cast<int>(DataType::float32));
static_assert(CHORUS_FLOAT64 == static_cast<int>(DataType::float64));
static_assert(CHORUS_SUM == static_cast<int>(ReduceOp::sum));
static_assert(CHORUS_PROD == static_cast<int>(ReduceOp::prod));
static_assert(CHORUS_MIN == static_cast<int>(ReduceOp::min));
static_assert(CHORUS_MAX == static_cast<int>(ReduceOp::max));
static_assert(CHORUS_AVG == static_cast<int>(ReduceOp::avg));
static_assert(CHORUS_BAND == static_cast<int>(ReduceOp::band));
static_assert(CHORUS_BOR == static_cast<int>(ReduceOp::bor));
static_assert(CHORUS_BXOR == static_cast<int>(ReduceOp::bxor));

// A C value as the C++ enum, or nullopt when it does not fit the enum's
// underlying type (a cast would wrap 256 into 0, a valid value). Which values
// are known types and ops is the API's rule (api/collective_checks.cc, base/types.cc):
// the cast value goes to it as it is.
template <class Enum>
std::optional<Enum> enum_from(int32_t value) {
  using Underlying = std::underlying_type_t<Enum>;
  if (!std::in_range<Underlying>(value)) return std::nullopt;
  return static_cast<Enum>(value);
}

// The first version of chorus_collective_options: every field through device.
constexpr size_t collective_options_v1_size = offsetof(chorus_collective_options, device) + sizeof(int32_t);

CollectiveOptions collective_options_from(const chorus_collective_options& c, const CollectiveCall& call) {
  CollectiveOptions options;
  if (c.algorithm != nullptr && c.algorithm[0] != '\0') options.algorithm = c.algorithm;
  if (c.timeout_ms < 0 || c.timeout_ms > longest_timeout_ms)
    call.reject(cat("chorus_collective_options.timeout_ms is ", c.timeout_ms,
                    " (expected a positive timeout up to a year, or 0 for the context's)"));
  if (c.timeout_ms > 0) options.timeout = std::chrono::milliseconds(c.timeout_ms);
  switch (c.memory_kind) {
    case CHORUS_MEMORY_HOST: options.memory = Memory::host(); break;
    case CHORUS_MEMORY_CUDA:
      if (c.device < 0) call.reject(cat("chorus_collective_options.device is ", c.device, " for CUDA memory"));
      options.memory = Memory::cuda(c.device);
      options.cuda_stream = c.cuda_stream;
      break;
    default:
      call.reject(cat("chorus_collective_options.memory_kind is ", c.memory_kind,
                      ", not a memory kind (CHORUS_MEMORY_HOST 0, CHORUS_MEMORY_CUDA 1)"));
  }
  return options;
}

}  // namespace

CollectiveCall::CollectiveCall(chorus_context* handle, const char* function, const char* collective,
                               const chorus_collective_options* options)
    : handle_(handle), collective_(collective) {
  context_of(handle, function);
  chorus_collective_options defaults;
  chorus_collective_options_init(&defaults);
  chorus_collective_options given = defaults;
  try {
    given = versioned_options(options, defaults, collective_options_v1_size, "chorus_collective_options");
  } catch (const InvalidArgument& error) {
    reject(error.what());
  }
  options_ = collective_options_from(given, *this);
}

void CollectiveCall::reject(const std::string& what) const {
  Context& context = this->context();
  InvalidArgument error(cat("rank ", context.rank(), ": ", collective_, ": ", what));
  detail::abort_for(context, std::make_exception_ptr(error));
  throw error;
}

DataType CollectiveCall::type(chorus_datatype value) const {
  const std::optional<DataType> type = enum_from<DataType>(value);
  if (!type) reject(cat("unknown data type ", value, " (not a chorus_datatype value)"));
  return *type;
}

ReduceOp CollectiveCall::op(chorus_reduce_op value) const {
  const std::optional<ReduceOp> op = enum_from<ReduceOp>(value);
  if (!op) reject(cat("unknown reduce op ", value, " (not a chorus_reduce_op value)"));
  return *op;
}

std::span<const size_t> CollectiveCall::counts(const size_t* counts, const char* name) const {
  if (counts == nullptr)
    reject(cat("got a null ", name, " array (expected one count per rank, ", context().size(), ")"));
  return {counts, static_cast<size_t>(context().size())};
}

std::vector<GroupMember> CollectiveCall::members(const void* const* inputs, void* const* outputs,
                                                 const size_t* counts, size_t members) const {
  if (members > 0 && (inputs == nullptr || outputs == nullptr || counts == nullptr))
    reject(cat("got a null ", inputs == nullptr ? "inputs" : outputs == nullptr ? "outputs" : "counts",
               " array for ", members, " members"));
  std::vector<GroupMember> group;
  group.reserve(members);
  for (size_t i = 0; i < members; ++i) group.push_back({inputs[i], outputs[i], counts[i]});
  return group;
}

chorus_work*& CollectiveCall::work_output(chorus_work** work) const {
  if (work == nullptr) reject("got a null chorus_work** (where the async call returns its work)");
  return *work;
}

}  // namespace chorus::c_api

extern "C" chorus_status chorus_datatype_size(chorus_datatype type, size_t* size) {
  using namespace chorus;
  return c_api::guarded([&] {
    const std::optional<DataType> known = c_api::enum_from<DataType>(type);
    if (!known)
      throw InvalidArgument(cat("chorus_datatype_size: unknown data type ", type, " (not a chorus_datatype value)"));
    size_t bytes = 0;
    try {
      bytes = element_size(*known);  // refuses a type chorus does not know
    } catch (const InvalidArgument& error) {
      throw InvalidArgument(cat("chorus_datatype_size: ", error.what()));
    }
    c_api::output(size, nullptr, "chorus_datatype_size", "size") = bytes;
  });
}
