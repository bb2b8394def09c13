// The grouped collectives (grouped_allreduce, grouped_allgather,
// grouped_reduce_scatter) as Context methods, each blocking and _async: a
// list of buffers of one type as ONE chorus collective
// (chorus/collectives_grouped.h). Outputs left out are allocated as numpy
// arrays, one per buffer; argument errors follow the rules at the top of
// reductions.cc.
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "base/log.h"
#include "adapters/python_module/binding.h"

namespace chorus::python {

namespace {

using detail::LargeSide;

// What a grouped call hands C++, and what it returns to Python: one output per buffer.
struct Group {
  std::vector<GroupMember> members;
  DataType type = DataType::uint8;
  py::list results;
};

// The buffers, exported for the call, all of one type.
std::vector<BufferView*> group_views(Call& call, const py::sequence& buffers, Access access) {
  std::vector<BufferView*> views;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const std::string argument = cat("buffers[", i, "]");
    views.push_back(access == Access::write ? &call.write(buffers[i], argument.c_str())
                                            : &call.read(buffers[i], argument.c_str()));
    if (views.back()->type() != views.front()->type())
      throw py::type_error(cat(call.name(), ": buffers[", i, "] holds ", to_string(views.back()->type()),
                               " but buffers[0] ", to_string(views.front()->type()),
                               "; a group is one type (one fused collective)"));
  }
  return views;
}

// The output chorus allocates for one buffer when out is left out, and its member.
BufferView& allocated_output(Call& call, LargeSide large, const BufferView& input, size_t& count) {
  Context& context = call.context();
  if (large == LargeSide::output) {
    count = input.count();
    return call.allocate(input.type(), gathered_shape(input, context.size()));
  }
  count = detail::block_of(context, call.name(), input.count());
  return call.allocate(input.type(), block_shape(input, count, context.size()));
}

// out=None: an allreduce runs in place, the others allocate their outputs.
Group prepare_group(Call& call, LargeSide large, const py::sequence& buffers, const py::object& out) {
  Context& context = call.context();
  const bool in_place = large == LargeSide::neither && out.is_none();
  const std::vector<BufferView*> inputs = group_views(call, buffers, in_place ? Access::write : Access::read);
  Group group;
  if (!inputs.empty()) group.type = inputs.front()->type();
  if (!out.is_none()) {
    if (!py::isinstance<py::sequence>(out))
      throw py::type_error(cat(call.name(), ": out must be a sequence of buffers, one per buffer, or None"));
    const auto outputs = out.cast<py::sequence>();
    detail::expect_one_output_per_input(context, call.name(), inputs.size(), outputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      BufferView& output = call.write(outputs[i], cat("out[", i, "]").c_str());
      call.expect_same_type(*inputs[i], output);
      group.members.push_back({inputs[i]->data(), output.data(),
                               detail::member_count(context, call.name(), i, inputs[i]->count(), output.count(),
                                                    large)});
      group.results.append(output.object());
    }
    return group;
  }
  for (BufferView* input : inputs) {
    size_t count = input->count();
    BufferView& output = in_place ? *input : allocated_output(call, large, *input, count);
    group.members.push_back({input->data(), output.data(), count});
    group.results.append(output.object());
  }
  return group;
}

// grouped_allreduce and grouped_reduce_scatter differ in which side of a member is large.
py::object grouped_reduction(bool async, PyContext& self, LargeSide large, const py::sequence& buffers,
                             const py::object& op, const py::object& out, const py::object& dtype,
                             const py::object& timeout, const py::object& algorithm) {
  const bool allreduce = large == LargeSide::neither;
  Call call(self, allreduce ? "grouped_allreduce" : "grouped_reduce_scatter", async, dtype, timeout, algorithm);
  const ReduceOp reduce_op = reduce_op_of(op);
  Context& context = call.context();
  Group group = prepare_group(call, large, buffers, out);
  const std::span<const GroupMember> members(group.members);
  if (allreduce)
    return call.run(group.results,
                    CHORUS_PYTHON_INVOKE(grouped_allreduce, context, members, group.type, reduce_op));
  return call.run(group.results,
                  CHORUS_PYTHON_INVOKE(grouped_reduce_scatter, context, members, group.type, reduce_op));
}

py::object grouped_allreduce_call(bool async, PyContext& self, const py::sequence& buffers, const py::object& op,
                                  const py::object& out, const py::object& dtype, const py::object& timeout,
                                  const py::object& algorithm) {
  return grouped_reduction(async, self, LargeSide::neither, buffers, op, out, dtype, timeout, algorithm);
}

py::object grouped_reduce_scatter_call(bool async, PyContext& self, const py::sequence& buffers,
                                       const py::object& op, const py::object& out, const py::object& dtype,
                                       const py::object& timeout, const py::object& algorithm) {
  return grouped_reduction(async, self, LargeSide::input, buffers, op, out, dtype, timeout, algorithm);
}

py::object grouped_allgather_call(bool async, PyContext& self, const py::sequence& buffers, const py::object& out,
                                  const py::object& dtype, const py::object& timeout, const py::object& algorithm) {
  Call call(self, "grouped_allgather", async, dtype, timeout, algorithm);
  Context& context = call.context();
  Group group = prepare_group(call, LargeSide::output, buffers, out);
  return call.run(group.results, CHORUS_PYTHON_INVOKE(grouped_allgather, context,
                                                      std::span<const GroupMember>(group.members), group.type));
}

}  // namespace

void bind_grouped(py::class_<PyContext>& context) {
  const auto op = py::arg("op") = ReduceOp::sum;
  const auto out = py::arg("out") = py::none();
  const auto dtype = py::arg("dtype") = py::none();
  const auto timeout = py::arg("timeout") = py::none();
  const auto algorithm = py::arg("algorithm") = py::none();
  def_blocking_and_async(context, "grouped_allreduce", &grouped_allreduce_call,
                         "A list of buffers of one type, each reduced with op as by allreduce, in ONE fused "
                         "collective: in place (returns the buffers) or into out, one output per buffer (returns "
                         "out). Every rank passes buffers of the same sizes in the same order; groups that differ "
                         "raise chorus.MismatchError on every rank, no buffer written.",
                         py::arg("buffers"), op, py::kw_only(), out, dtype, timeout, algorithm);
  def_blocking_and_async(context, "grouped_allgather", &grouped_allgather_call,
                         "Each buffer allgathered as by allgather, all in ONE fused collective; returns one output "
                         "per buffer (out, else new numpy arrays shaped (size, *buffer.shape)).",
                         py::arg("buffers"), py::kw_only(), out, dtype, timeout, algorithm);
  def_blocking_and_async(context, "grouped_reduce_scatter", &grouped_reduce_scatter_call,
                         "Each buffer (size blocks) reduce_scattered as by reduce_scatter, all in ONE fused "
                         "collective; returns one output per buffer (out, else new numpy arrays shaped like one "
                         "block).",
                         py::arg("buffers"), op, py::kw_only(), out, dtype, timeout, algorithm);
}

}  // namespace chorus::python
