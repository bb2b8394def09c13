// The reductions (allreduce, reduce, reduce_scatter[_v]), broadcast and
// barrier as Context methods, each blocking and _async.
//
// Sizes that do not fit the collective go through chorus's own checks
// (collective_options.h): chorus.InvalidArgument, and the Context is aborted
// so the other ranks fail at once instead of waiting out their timeout.
// Problems with a Python object itself (no buffer protocol, strided,
// read-only, unknown format) raise TypeError/ValueError and touch nothing.
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "adapters/python_module/binding.h"

namespace chorus::python {

namespace {

using Counts = std::vector<size_t>;

py::object allreduce_call(bool async, PyContext& self, const py::object& data, const py::object& op,
                          const py::object& out, const py::object& dtype, const py::object& timeout,
                          const py::object& algorithm) {
  Call call(self, "allreduce", async, dtype, timeout, algorithm);
  const ReduceOp reduce_op = reduce_op_of(op);
  Context& context = call.context();
  if (out.is_none()) {
    BufferView& buffer = call.write(data, "data");
    return call.run(data, CHORUS_PYTHON_INVOKE(allreduce, context, buffer.data(), buffer.data(), buffer.count(),
                                               buffer.type(), reduce_op));
  }
  BufferView& input = call.read(data, "data");
  BufferView& output = call.write(out, "out");
  call.expect_same_type(input, output);
  if (input.count() != output.count()) throw_size_mismatch(context, "allreduce", input.count(), output.count());
  return call.run(out, CHORUS_PYTHON_INVOKE(allreduce, context, input.data(), output.data(), input.count(),
                                            input.type(), reduce_op));
}

py::object reduce_call(bool async, PyContext& self, const py::object& data, const py::object& op, int root,
                       const py::object& out, const py::object& dtype, const py::object& timeout,
                       const py::object& algorithm) {
  Call call(self, "reduce", async, dtype, timeout, algorithm);
  const ReduceOp reduce_op = reduce_op_of(op);
  Context& context = call.context();
  const bool is_root = context.rank() == root;
  if (!is_root || !out.is_none()) {
    BufferView& input = call.read(data, "data");
    void* output = nullptr;
    if (is_root) {
      BufferView& result = call.write(out, "out");
      call.expect_same_type(input, result);
      if (input.count() != result.count()) throw_size_mismatch(context, "reduce", input.count(), result.count());
      output = result.data();
    }
    return call.run(is_root ? out : py::none(), CHORUS_PYTHON_INVOKE(reduce, context, input.data(), output,
                                                                     input.count(), input.type(), reduce_op, root));
  }
  // In place on root.
  BufferView& buffer = call.write(data, "data");
  return call.run(data, CHORUS_PYTHON_INVOKE(reduce, context, buffer.data(), buffer.data(), buffer.count(),
                                             buffer.type(), reduce_op, root));
}

py::object reduce_scatter_call(bool async, PyContext& self, const py::object& data, const py::object& op,
                               const py::object& out, const py::object& dtype, const py::object& timeout,
                               const py::object& algorithm) {
  Call call(self, "reduce_scatter", async, dtype, timeout, algorithm);
  const ReduceOp reduce_op = reduce_op_of(op);
  Context& context = call.context();
  BufferView& input = call.read(data, "data");
  py::object result = out;
  BufferView* output = nullptr;
  if (out.is_none()) {
    const size_t block = detail::block_of(context, "reduce_scatter", input.count());
    output = &call.allocate(input.type(), block_shape(input, block, context.size()));
    result = output->object();
  } else {
    output = &call.write(out, "out");
    call.expect_same_type(input, *output);
    detail::expect_blocks(context, "reduce_scatter", "an input", output->count(), input.count());
  }
  return call.run(result, CHORUS_PYTHON_INVOKE(reduce_scatter, context, input.data(), output->data(),
                                               output->count(), input.type(), reduce_op));
}

py::object reduce_scatter_v_call(bool async, PyContext& self, const py::object& data, const Counts& counts,
                                 const py::object& op, const py::object& out, const py::object& dtype,
                                 const py::object& timeout, const py::object& algorithm) {
  Call call(self, "reduce_scatter_v", async, dtype, timeout, algorithm);
  const ReduceOp reduce_op = reduce_op_of(op);
  Context& context = call.context();
  BufferView& input = call.read(data, "data");
  detail::expect_elements(context, "reduce_scatter_v", "an input",
                          detail::sum_of_counts(context, "reduce_scatter_v", counts), input.count());
  const size_t mine = detail::count_of_rank(context, "reduce_scatter_v", counts);
  py::object result = out;
  BufferView* output = nullptr;
  if (out.is_none()) {
    output = &call.allocate(input.type(), py::make_tuple(mine));
    result = output->object();
  } else {
    output = &call.write(out, "out");
    call.expect_same_type(input, *output);
    detail::expect_elements(context, "reduce_scatter_v", "an output", mine, output->count());
  }
  return call.run(result, CHORUS_PYTHON_INVOKE(reduce_scatter_v, context, input.data(), output->data(),
                                               std::span<const size_t>(counts), input.type(), reduce_op));
}

py::object broadcast_call(bool async, PyContext& self, const py::object& data, int root, const py::object& dtype,
                          const py::object& timeout, const py::object& algorithm) {
  Call call(self, "broadcast", async, dtype, timeout, algorithm);
  Context& context = call.context();
  // Root only sends: its buffer may be read-only.
  BufferView& buffer = context.rank() == root ? call.read(data, "data") : call.write(data, "data");
  return call.run(data, CHORUS_PYTHON_INVOKE(broadcast, context, buffer.data(), buffer.count(), buffer.type(), root));
}

py::object barrier_call(bool async, PyContext& self, const py::object& timeout, const py::object& algorithm) {
  Call call(self, "barrier", async, py::none(), timeout, algorithm);
  Context& context = call.context();
  return call.run(py::none(), CHORUS_PYTHON_INVOKE(barrier, context));
}

}  // namespace

py::tuple block_shape(const BufferView& whole, size_t block, int size) {
  const py::tuple shape = whole.shape();
  if (shape.size() >= 2 && shape[0].cast<size_t>() == static_cast<size_t>(size)) {
    py::tuple rest(shape.size() - 1);
    for (size_t axis = 1; axis < shape.size(); ++axis) rest[axis - 1] = shape[axis];
    return rest;
  }
  return py::make_tuple(block);
}

py::tuple gathered_shape(const BufferView& input, int size) {
  const py::tuple shape = input.shape();
  py::tuple gathered(shape.size() + 1);
  gathered[0] = size;
  for (size_t axis = 0; axis < shape.size(); ++axis) gathered[axis + 1] = shape[axis];
  return gathered;
}

void bind_reductions(py::module_& module, py::class_<PyContext>& context) {
  // benchmarks/python_overhead.py times the same in-place allreduce from a
  // Python loop and from this C++ loop, on one Context in one run.
  module.def(
      "_allreduce_loop_cpp",
      [](PyContext& self, const py::object& data, size_t iterations) {
        const std::shared_ptr<Context> target = self.shared();
        const BufferView buffer(data, Access::write, "_allreduce_loop_cpp: data", std::nullopt);
        if (!buffer.memory().on_host()) throw py::type_error("_allreduce_loop_cpp: host memory only");
        py::gil_scoped_release released;
        const auto start = std::chrono::steady_clock::now();
        for (size_t i = 0; i < iterations; ++i)
          allreduce(*target, buffer.data(), buffer.data(), buffer.count(), buffer.type(), ReduceOp::sum);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      },
      py::arg("context"), py::arg("data"), py::arg("iterations"),
      "Seconds taken by `iterations` in-place sum allreduces of data called from C++ (for the overhead "
      "benchmark).");

  const auto op = py::arg("op") = ReduceOp::sum;
  const auto out = py::arg("out") = py::none();
  const auto dtype = py::arg("dtype") = py::none();
  const auto timeout = py::arg("timeout") = py::none();
  const auto algorithm = py::arg("algorithm") = py::none();
  def_blocking_and_async(context, "allreduce", &allreduce_call,
                         "Every rank's data reduced with op, in place (returns data) or into out (returns out).",
                         py::arg("data"), op, py::kw_only(), out, dtype, timeout, algorithm);
  def_blocking_and_async(context, "reduce", &reduce_call,
                         "Root receives op over every rank's data: in place in data, or into out. Returns the "
                         "result on root, None elsewhere.",
                         py::arg("data"), op, py::arg("root") = 0, py::kw_only(), out, dtype, timeout, algorithm);
  def_blocking_and_async(context, "reduce_scatter", &reduce_scatter_call,
                         "data holds size blocks; returns this rank's block reduced over every rank (into out, "
                         "else a new numpy array shaped like one block). In place: out is a view of this rank's "
                         "block of data.",
                         py::arg("data"), op, py::kw_only(), out, dtype, timeout, algorithm);
  def_blocking_and_async(context, "reduce_scatter_v", &reduce_scatter_v_call,
                         "As reduce_scatter with counts[r] elements in block r.", py::arg("data"),
                         py::arg("counts"), op, py::kw_only(), out, dtype, timeout, algorithm);
  def_blocking_and_async(context, "broadcast", &broadcast_call, "Root's data overwrites every rank's; returns data.",
                         py::arg("data"), py::arg("root") = 0, py::kw_only(), dtype, timeout, algorithm);
  def_blocking_and_async(context, "barrier", &barrier_call, "Returns once every rank has called it.",
                         py::kw_only(), timeout, algorithm);
}

}  // namespace chorus::python
