// Grouped collectives: check every member, pack the members into one buffer
// of the call's memory, issue ONE collective over it (its signature carries a
// digest of the members' counts) and unpack once it succeeded.
//
// The packed buffer holds the fused call's blocks in rank order; block r
// holds every member's share of rank r end to end. The fused call runs in
// place on it: allreduce over the whole; allgather from this rank's block;
// reduce_scatter into this rank's block.
#include "chorus/collectives_grouped.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/collective_checks.h"
#include "api/device_memory.h"
#include "api/issue.h"
#include "base/error.h"
#include "base/log.h"
#include "memory/registry.h"

namespace chorus {
namespace {

using algorithms::Call;
using algorithms::Collective;
using namespace detail;

// Which blocks of the packed buffer one side of every member maps to.
struct Blocks {
  size_t first = 0;
  size_t count = 1;
};

struct Shape {
  const char* name;
  Collective collective;
  bool reduces;
  LargeSide large;
};

constexpr Shape kAllreduce{"grouped_allreduce", Collective::allreduce, true, LargeSide::neither};
constexpr Shape kAllgather{"grouped_allgather", Collective::allgather, false, LargeSide::output};
constexpr Shape kReduceScatter{"grouped_reduce_scatter", Collective::reduce_scatter, true, LargeSide::input};

Blocks input_blocks(const Shape& shape, Context& context) {
  const auto ranks = static_cast<size_t>(context.size());
  switch (shape.large) {
    case LargeSide::input: return {0, ranks};
    case LargeSide::output: return {static_cast<size_t>(context.rank()), 1};
    case LargeSide::neither: break;
  }
  return {};
}

Blocks output_blocks(const Shape& shape, Context& context) {
  const auto ranks = static_cast<size_t>(context.size());
  switch (shape.large) {
    case LargeSide::input: return {static_cast<size_t>(context.rank()), 1};
    case LargeSide::output: return {0, ranks};
    case LargeSide::neither: break;
  }
  return {};
}

// Nonzero, and different for groups that split one total differently.
uint64_t digest_of(std::span<const GroupMember> members) {
  uint64_t digest = 0xcbf29ce484222325ull ^ members.size();
  for (const GroupMember& member : members) digest = (digest ^ member.count) * 0x100000001b3ull;
  return digest == 0 ? 1 : digest;
}

// One member's own buffers, checked as the plain call checks them.
void check_member(Context& context, const Shape& shape, DataType type, size_t index, const GroupMember& member) {
  const std::string name = cat(shape.name, " member ", index);
  const auto ranks = static_cast<size_t>(context.size());
  const size_t input_count = shape.large == LargeSide::input
                                 ? checked_product(context, name.c_str(), member.count, ranks, type)
                                 : member.count;
  const size_t output_count = shape.large == LargeSide::output
                                  ? checked_product(context, name.c_str(), member.count, ranks, type)
                                  : member.count;
  check_bytes(context, name.c_str(), member.count, type);
  check_not_null(context, name.c_str(), "input", member.input, input_count);
  check_not_null(context, name.c_str(), "output", member.output, output_count);
  const size_t element = element_size(type);
  if (shape.large == LargeSide::neither) {
    if (member.input != member.output)
      check_overlap(context, name.c_str(), member.input, input_count * element, member.output,
                    output_count * element);
    return;
  }
  const Call call = make_call(context, shape.collective, member.count, type, ReduceOp::sum, 0, false);
  if (shape.large == LargeSide::output)
    block_in_place(context, name.c_str(), call, member.output, member.input);
  else
    block_in_place(context, name.c_str(), call, member.input, member.output);
}

// Two members writing the same bytes would leave them to whichever is unpacked last.
void check_outputs_apart(Context& context, const Shape& shape, DataType type, std::span<const GroupMember> members) {
  struct Extent {
    uintptr_t start;
    size_t bytes;
    size_t member;
  };
  const size_t blocks = output_blocks(shape, context).count;
  std::vector<Extent> extents;
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i].count > 0)
      extents.push_back({reinterpret_cast<uintptr_t>(members[i].output),
                         members[i].count * blocks * element_size(type), i});
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.start < b.start; });
  for (size_t i = 1; i < extents.size(); ++i) {
    const Extent& before = extents[i - 1];
    if (extents[i].start < before.start + before.bytes)
      throw InvalidArgument(cat("rank ", context.rank(), ": ", shape.name, " members ",
                                std::min(before.member, extents[i].member), " and ",
                                std::max(before.member, extents[i].member),
                                " have overlapping outputs (expected every member's output apart)"));
  }
}

void check_device_members(Context& context, const Shape& shape, const CollectiveOptions& options,
                          std::span<const GroupMember> members) {
  if (options.memory.on_host()) return;
  std::vector<std::string> names;
  names.reserve(2 * members.size());
  std::vector<NamedBuffer> buffers;
  for (size_t i = 0; i < members.size(); ++i) {
    names.push_back(cat("member ", i, "'s input"));
    buffers.push_back({names.back().c_str(), members[i].input});
    names.push_back(cat("member ", i, "'s output"));
    buffers.push_back({names.back().c_str(), members[i].output});
  }
  check_device_buffers(context, shape.name, options, buffers);
}

// Sums the counts; returns the elements of one rank's block of the packed buffer.
size_t checked_total(Context& context, const Shape& shape, DataType type, std::span<const GroupMember> members) {
  size_t total = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].count > SIZE_MAX - total)
      throw InvalidArgument(cat("rank ", context.rank(), ": ", shape.name, " counts overflow size_t at member ", i));
    total += members[i].count;
  }
  checked_product(context, shape.name, total, static_cast<size_t>(context.size()), type);
  return total;
}

// The members' bytes in and out of the packed buffer, through the memory's
// backend (host memcpy or device copies alike).
class Packing {
 public:
  Packing(Context& context, const Shape& shape, std::span<const GroupMember> members, size_t total, DataType type,
          const Memory& memory)
      : members_(members.begin(), members.end()),
        backend_(&memory_backend(memory)),
        element_(element_size(type)),
        block_bytes_(total * element_),
        input_(input_blocks(shape, context)),
        output_(output_blocks(shape, context)) {
    const size_t blocks = shape.large == LargeSide::neither ? 1 : static_cast<size_t>(context.size());
    if (block_bytes_ > 0) packed_ = backend_->allocate(block_bytes_ * blocks);
  }

  const std::byte* fused_input() const { return block(input_.first); }
  std::byte* fused_output() const { return block(output_.first); }

  void pack() const {
    size_t offset = 0;
    for (const GroupMember& member : members_) {
      const size_t bytes = member.count * element_;
      const auto* input = static_cast<const std::byte*>(member.input);
      for (size_t b = 0; b < input_.count && bytes > 0; ++b)
        backend_->copy(block(input_.first + b) + offset, input + b * bytes, bytes);
      offset += bytes;
    }
  }

  void unpack() const {
    size_t offset = 0;
    for (const GroupMember& member : members_) {
      const size_t bytes = member.count * element_;
      auto* output = static_cast<std::byte*>(member.output);
      for (size_t b = 0; b < output_.count && bytes > 0; ++b)
        backend_->copy(output + b * bytes, block(output_.first + b) + offset, bytes);
      offset += bytes;
    }
  }

 private:
  std::byte* block(size_t index) const { return packed_ ? packed_.get() + index * block_bytes_ : nullptr; }

  std::vector<GroupMember> members_;
  MemoryBackend* backend_;
  size_t element_;
  size_t block_bytes_;
  Blocks input_;
  Blocks output_;
  std::shared_ptr<std::byte> packed_;
};

Work grouped_impl(Context& context, const Shape& shape, std::span<const GroupMember> members, DataType type,
                  ReduceOp op, const CollectiveOptions& options, bool async) {
  if (shape.reduces)
    check_reduction(context, shape.name, type, op);
  else
    check_type(context, shape.name, type);
  for (size_t i = 0; i < members.size(); ++i) check_member(context, shape, type, i, members[i]);
  check_outputs_apart(context, shape, type, members);
  check_device_members(context, shape, options, members);
  const size_t total = checked_total(context, shape, type, members);
  Call call = make_call(context, shape.collective, total, type, shape.reduces ? op : ReduceOp::sum, 0, true);
  call.group_digest = digest_of(members);
  // A group of one is already laid out as the plain call wants it.
  if (members.size() == 1) {
    const GroupMember& only = members[0];
    if (shape.large == LargeSide::neither)
      call.in_place = only.input == only.output;
    else if (shape.large == LargeSide::output)
      call.in_place = block_in_place(context, shape.name, call, only.output, only.input);
    else
      call.in_place = block_in_place(context, shape.name, call, only.input, only.output);
    return issue(context, std::move(call), only.input, only.output, options, async);
  }
  auto packing = std::make_shared<const Packing>(context, shape, members, total, type, options.memory);
  const std::byte* input = packing->fused_input();
  std::byte* output = packing->fused_output();
  return issue(context, std::move(call), input, output, options, async,
               RunSteps{[packing] { packing->pack(); }, [packing] { packing->unpack(); }});
}

template <class... Args>
void blocking(Context& context, Args&&... args) {
  aborting_on_invalid_argument(context, [&] { return grouped_impl(context, std::forward<Args>(args)..., false); });
}

template <class... Args>
Work queued(Context& context, Args&&... args) {
  return aborting_on_invalid_argument(context,
                                      [&] { return grouped_impl(context, std::forward<Args>(args)..., true); });
}

}  // namespace

void grouped_allreduce(Context& context, std::span<const GroupMember> members, DataType type, ReduceOp op,
                       const CollectiveOptions& options) {
  blocking(context, kAllreduce, members, type, op, options);
}

Work grouped_allreduce_async(Context& context, std::span<const GroupMember> members, DataType type, ReduceOp op,
                             const CollectiveOptions& options) {
  return queued(context, kAllreduce, members, type, op, options);
}

void grouped_allgather(Context& context, std::span<const GroupMember> members, DataType type,
                       const CollectiveOptions& options) {
  blocking(context, kAllgather, members, type, ReduceOp::sum, options);
}

Work grouped_allgather_async(Context& context, std::span<const GroupMember> members, DataType type,
                             const CollectiveOptions& options) {
  return queued(context, kAllgather, members, type, ReduceOp::sum, options);
}

void grouped_reduce_scatter(Context& context, std::span<const GroupMember> members, DataType type, ReduceOp op,
                            const CollectiveOptions& options) {
  blocking(context, kReduceScatter, members, type, op, options);
}

Work grouped_reduce_scatter_async(Context& context, std::span<const GroupMember> members, DataType type,
                                  ReduceOp op, const CollectiveOptions& options) {
  return queued(context, kReduceScatter, members, type, op, options);
}

namespace detail {

size_t member_count(Context& context, const char* collective, size_t member, size_t input_size, size_t output_size,
                    LargeSide large) {
  const std::string name = cat("member ", member, "'s");
  switch (large) {
    case LargeSide::neither:
      if (input_size != output_size)
        throw_bad_span(context, collective,
                       cat(name, " input and output of one size, but got ", input_size, " and ", output_size,
                           " elements"));
      return input_size;
    case LargeSide::output:
      expect_blocks(context, collective, cat(name, " output").c_str(), input_size, output_size);
      return input_size;
    case LargeSide::input:
      expect_blocks(context, collective, cat(name, " input").c_str(), output_size, input_size);
      return output_size;
  }
  return 0;
}

void expect_one_output_per_input(Context& context, const char* collective, size_t inputs, size_t outputs) {
  if (inputs != outputs)
    throw_bad_span(context, collective, cat("one output per input, but got ", inputs, " inputs and ", outputs,
                                            " outputs"));
}

}  // namespace detail
}  // namespace chorus
