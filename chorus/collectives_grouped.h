// Grouped collectives: many buffers of one type reduced or gathered as ONE
// collective (included by chorus/collectives.h). The members are packed end
// to end into one buffer of the call's memory, one collective runs over it
// and the results are unpacked into each member's output, by the time the
// call returns (async: before its Work finishes). So a group costs one
// message per peer per step, not one per buffer: what Horovod's grouped
// calls and torch's coalesced calls are for.
//
// Every rank passes the same number of members with the same counts in the
// same order. Ranks whose groups differ, even with equal totals, fail with
// MismatchError on every rank before any member's output is written (a
// group whose every count is 0 moves nothing, so it is not compared).
// Members of count 0 are allowed, with null buffers if the caller likes.
// Outputs of different members must not overlap. The member list is copied;
// buffers of the async forms must stay valid until the Work finishes.
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "base/types.h"
#include "chorus/collective_options.h"
#include "chorus/context.h"
#include "chorus/work.h"

namespace chorus {

// One buffer of a grouped call. `count` means what it means for the plain
// call: the whole buffer for allreduce, one rank's block for allgather
// (input: count, output: size() * count) and reduce_scatter (input:
// size() * count, output: count).
struct GroupMember {
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;
};

// Each member allreduced with op. In place: input == output.
void grouped_allreduce(Context& context, std::span<const GroupMember> members, DataType type, ReduceOp op,
                       const CollectiveOptions& options = {});
Work grouped_allreduce_async(Context& context, std::span<const GroupMember> members, DataType type, ReduceOp op,
                             const CollectiveOptions& options = {});

// Each member allgathered: block r of its output is rank r's input, as
// allgather gives. In place: input is this rank's block inside output.
void grouped_allgather(Context& context, std::span<const GroupMember> members, DataType type,
                       const CollectiveOptions& options = {});
Work grouped_allgather_async(Context& context, std::span<const GroupMember> members, DataType type,
                             const CollectiveOptions& options = {});

// Each member reduce_scattered: its output is op over every rank's block
// number rank(). In place: output is this rank's block inside input.
void grouped_reduce_scatter(Context& context, std::span<const GroupMember> members, DataType type, ReduceOp op,
                            const CollectiveOptions& options = {});
Work grouped_reduce_scatter_async(Context& context, std::span<const GroupMember> members, DataType type,
                                  ReduceOp op, const CollectiveOptions& options = {});

// ---- typed overloads: one span per member (the element type from the
// outputs); span sizes that do not fit are rejected with InvalidArgument.

namespace detail {
// Which side of a member holds size() blocks of its count.
enum class LargeSide { neither, input, output };
// The member's count, from its spans' sizes.
size_t member_count(Context& context, const char* collective, size_t member, size_t input_size,
                    size_t output_size, LargeSide large);
void expect_one_output_per_input(Context& context, const char* collective, size_t inputs, size_t outputs);

template <class T>
std::vector<GroupMember> typed_members(Context& context, const char* collective,
                                       std::span<const std::span<const T>> inputs,
                                       std::span<const std::span<T>> outputs, LargeSide large) {
  expect_one_output_per_input(context, collective, inputs.size(), outputs.size());
  std::vector<GroupMember> members;
  members.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    members.push_back({inputs[i].data(), outputs[i].data(),
                       member_count(context, collective, i, inputs[i].size(), outputs[i].size(), large)});
  return members;
}

template <class T>
std::vector<GroupMember> in_place_members(std::span<const std::span<T>> buffers) {
  std::vector<GroupMember> members;
  members.reserve(buffers.size());
  for (const std::span<T>& buffer : buffers) members.push_back({buffer.data(), buffer.data(), buffer.size()});
  return members;
}
}  // namespace detail

template <class T>
void grouped_allreduce(Context& context, std::span<const std::span<T>> buffers, ReduceOp op,
                       const CollectiveOptions& options = {}) {
  grouped_allreduce(context, detail::in_place_members(buffers), data_type_of<T>(), op, options);
}
template <class T>
Work grouped_allreduce_async(Context& context, std::span<const std::span<T>> buffers, ReduceOp op,
                             const CollectiveOptions& options = {}) {
  return grouped_allreduce_async(context, detail::in_place_members(buffers), data_type_of<T>(), op, options);
}
template <class T>
void grouped_allreduce(Context& context, std::span<const std::span<const std::type_identity_t<T>>> inputs,
                       std::span<const std::span<T>> outputs, ReduceOp op, const CollectiveOptions& options = {}) {
  grouped_allreduce(context,
                    detail::typed_members(context, "grouped_allreduce", inputs, outputs, detail::LargeSide::neither),
                    data_type_of<T>(), op, options);
}

template <class T>
void grouped_allgather(Context& context, std::span<const std::span<const std::type_identity_t<T>>> inputs,
                       std::span<const std::span<T>> outputs, const CollectiveOptions& options = {}) {
  grouped_allgather(context,
                    detail::typed_members(context, "grouped_allgather", inputs, outputs, detail::LargeSide::output),
                    data_type_of<T>(), options);
}
template <class T>
Work grouped_allgather_async(Context& context, std::span<const std::span<const std::type_identity_t<T>>> inputs,
                             std::span<const std::span<T>> outputs, const CollectiveOptions& options = {}) {
  return grouped_allgather_async(
      context, detail::typed_members(context, "grouped_allgather", inputs, outputs, detail::LargeSide::output),
      data_type_of<T>(), options);
}

template <class T>
void grouped_reduce_scatter(Context& context, std::span<const std::span<const std::type_identity_t<T>>> inputs,
                            std::span<const std::span<T>> outputs, ReduceOp op, const CollectiveOptions& options = {}) {
  grouped_reduce_scatter(
      context, detail::typed_members(context, "grouped_reduce_scatter", inputs, outputs, detail::LargeSide::input),
      data_type_of<T>(), op, options);
}
template <class T>
Work grouped_reduce_scatter_async(Context& context, std::span<const std::span<const std::type_identity_t<T>>> inputs,
                                  std::span<const std::span<T>> outputs, ReduceOp op,
                                  const CollectiveOptions& options = {}) {
  return grouped_reduce_scatter_async(
      context, detail::typed_members(context, "grouped_reduce_scatter", inputs, outputs, detail::LargeSide::input),
      data_type_of<T>(), op, options);
}

}  // namespace chorus
