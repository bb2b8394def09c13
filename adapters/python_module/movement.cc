// The collectives that move blocks (allgather[v], gather[v], scatter[v],
// alltoall[v]) and send/recv/recv_any as Context methods, each blocking and _async.
// Outputs left out are allocated as numpy arrays of the input's type;
// argument errors follow the rules at the top of reductions.cc.
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "adapters/python_module/binding.h"

namespace chorus::python {

namespace {

using Counts = std::vector<size_t>;

// data=None with out= means in place: this rank's block of out is filled.
py::object allgather_call(bool async, PyContext& self, const py::object& data, const py::object& out,
                          const py::object& dtype, const py::object& timeout, const py::object& algorithm) {
  Call call(self, "allgather", async, dtype, timeout, algorithm);
  Context& context = call.context();
  if (data.is_none()) {
    if (out.is_none()) throw py::type_error("allgather: pass data, out or both");
    BufferView& output = call.write(out, "out");
    const size_t block = detail::block_of(context, "allgather", output.count());
    const size_t offset = block * element_size(output.type()) * static_cast<size_t>(context.rank());
    const void* input = static_cast<const std::byte*>(output.data()) + offset;
    return call.run(out, CHORUS_PYTHON_INVOKE(allgather, context, input, output.data(), block, output.type()));
  }
  BufferView& input = call.read(data, "data");
  BufferView& output = call.output_for(input, out, gathered_shape(input, context.size()));
  detail::expect_blocks(context, "allgather", "an output", input.count(), output.count());
  return call.run(output.object(), CHORUS_PYTHON_INVOKE(allgather, context, input.data(), output.data(),
                                                        input.count(), input.type()));
}

py::object allgatherv_call(bool async, PyContext& self, const py::object& data, const Counts& counts,
                           const py::object& out, const py::object& dtype, const py::object& timeout,
                           const py::object& algorithm) {
  Call call(self, "allgatherv", async, dtype, timeout, algorithm);
  Context& context = call.context();
  const size_t total = detail::sum_of_counts(context, "allgatherv", counts);
  const size_t mine = detail::count_of_rank(context, "allgatherv", counts);
  if (data.is_none()) {
    if (out.is_none()) throw py::type_error("allgatherv: pass data, out or both");
    BufferView& output = call.write(out, "out");
    detail::expect_elements(context, "allgatherv", "an output", total, output.count());
    const size_t offset = detail::block_offset_of_rank(context, counts) * element_size(output.type());
    const void* input = static_cast<const std::byte*>(output.data()) + offset;
    return call.run(out, CHORUS_PYTHON_INVOKE(allgatherv, context, input, output.data(),
                                              std::span<const size_t>(counts), output.type()));
  }
  BufferView& input = call.read(data, "data");
  detail::expect_elements(context, "allgatherv", "an input", mine, input.count());
  BufferView& output = call.output_for(input, out, py::make_tuple(total));
  detail::expect_elements(context, "allgatherv", "an output", total, output.count());
  return call.run(output.object(), CHORUS_PYTHON_INVOKE(allgatherv, context, input.data(), output.data(),
                                                        std::span<const size_t>(counts), input.type()));
}

py::object gather_call(bool async, PyContext& self, const py::object& data, int root, const py::object& out,
                       const py::object& dtype, const py::object& timeout, const py::object& algorithm) {
  Call call(self, "gather", async, dtype, timeout, algorithm);
  Context& context = call.context();
  BufferView& input = call.read(data, "data");
  py::object result = py::none();
  void* output = nullptr;
  if (context.rank() == root) {
    BufferView& buffer = call.output_for(input, out, gathered_shape(input, context.size()));
    detail::expect_blocks(context, "gather", "an output on root", input.count(), buffer.count());
    result = buffer.object();
    output = buffer.data();
  }
  return call.run(result, CHORUS_PYTHON_INVOKE(gather, context, input.data(), output, input.count(), input.type(),
                                               root));
}

py::object gatherv_call(bool async, PyContext& self, const py::object& data, const Counts& counts, int root,
                        const py::object& out, const py::object& dtype, const py::object& timeout,
                        const py::object& algorithm) {
  Call call(self, "gatherv", async, dtype, timeout, algorithm);
  Context& context = call.context();
  BufferView& input = call.read(data, "data");
  detail::expect_elements(context, "gatherv", "an input", detail::count_of_rank(context, "gatherv", counts),
                          input.count());
  py::object result = py::none();
  void* output = nullptr;
  if (context.rank() == root) {
    const size_t total = detail::sum_of_counts(context, "gatherv", counts);
    BufferView& buffer = call.output_for(input, out, py::make_tuple(total));
    detail::expect_elements(context, "gatherv", "an output on root", total, buffer.count());
    result = buffer.object();
    output = buffer.data();
  }
  return call.run(result, CHORUS_PYTHON_INVOKE(gatherv, context, input.data(), output,
                                               std::span<const size_t>(counts), input.type(), root));
}

// data matters on root only; elsewhere it may be None when out is given (or
// a buffer like root's, which only gives the output's shape and type).
py::object scatter_call(bool async, PyContext& self, const py::object& data, int root, const py::object& out,
                        const py::object& dtype, const py::object& timeout, const py::object& algorithm) {
  Call call(self, "scatter", async, dtype, timeout, algorithm);
  Context& context = call.context();
  const bool is_root = context.rank() == root;
  BufferView* input = nullptr;
  if (!data.is_none()) input = &call.read(data, "data");
  if (is_root && input == nullptr) throw py::type_error("scatter: the root must pass data");
  py::object result = out;
  BufferView* output = nullptr;
  if (out.is_none()) {
    if (input == nullptr) throw py::type_error("scatter: pass out= (or data shaped like root's) on this rank");
    const size_t block = detail::block_of(context, "scatter", input->count());
    output = &call.allocate(input->type(), block_shape(*input, block, context.size()));
    result = output->object();
  } else {
    output = &call.write(out, "out");
    if (is_root) {
      call.expect_same_type(*input, *output);
      detail::expect_blocks(context, "scatter", "an input on root", output->count(), input->count());
    }
  }
  const void* source = is_root ? input->data() : nullptr;
  return call.run(result, CHORUS_PYTHON_INVOKE(scatter, context, source, output->data(), output->count(),
                                               output->type(), root));
}

py::object scatterv_call(bool async, PyContext& self, const py::object& data, const Counts& counts, int root,
                         const py::object& out, const py::object& dtype, const py::object& timeout,
                         const py::object& algorithm) {
  Call call(self, "scatterv", async, dtype, timeout, algorithm);
  Context& context = call.context();
  const bool is_root = context.rank() == root;
  const size_t mine = detail::count_of_rank(context, "scatterv", counts);
  BufferView* input = nullptr;
  if (!data.is_none()) input = &call.read(data, "data");
  if (is_root) {
    if (input == nullptr) throw py::type_error("scatterv: the root must pass data");
    detail::expect_elements(context, "scatterv", "an input on root",
                            detail::sum_of_counts(context, "scatterv", counts), input->count());
  }
  py::object result = out;
  BufferView* output = nullptr;
  if (out.is_none()) {
    const std::optional<DataType> type = input != nullptr ? std::optional(input->type()) : data_type_of(dtype);
    if (!type) throw py::type_error("scatterv: pass out=, data or dtype= on this rank");
    output = &call.allocate(*type, py::make_tuple(mine));
    result = output->object();
  } else {
    output = &call.write(out, "out");
    if (input != nullptr) call.expect_same_type(*input, *output);
    detail::expect_elements(context, "scatterv", "an output", mine, output->count());
  }
  const void* source = is_root ? input->data() : nullptr;
  return call.run(result, CHORUS_PYTHON_INVOKE(scatterv, context, source, output->data(),
                                               std::span<const size_t>(counts), output->type(), root));
}

py::object alltoall_call(bool async, PyContext& self, const py::object& data, const py::object& out,
                         const py::object& dtype, const py::object& timeout, const py::object& algorithm) {
  Call call(self, "alltoall", async, dtype, timeout, algorithm);
  Context& context = call.context();
  BufferView& input = call.read(data, "data");
  BufferView& output = call.output_for(input, out, input.shape());
  if (input.count() != output.count()) throw_size_mismatch(context, "alltoall", input.count(), output.count());
  const size_t block = detail::block_of(context, "alltoall", input.count());
  return call.run(output.object(),
                  CHORUS_PYTHON_INVOKE(alltoall, context, input.data(), output.data(), block, input.type()));
}

py::object alltoallv_call(bool async, PyContext& self, const py::object& data, const Counts& send_counts,
                          const Counts& recv_counts, const py::object& out, const py::object& dtype,
                          const py::object& timeout, const py::object& algorithm) {
  Call call(self, "alltoallv", async, dtype, timeout, algorithm);
  Context& context = call.context();
  BufferView& input = call.read(data, "data");
  detail::expect_elements(context, "alltoallv", "an input", detail::sum_of_counts(context, "alltoallv", send_counts),
                          input.count());
  const size_t total = detail::sum_of_counts(context, "alltoallv", recv_counts);
  BufferView& output = call.output_for(input, out, py::make_tuple(total));
  detail::expect_elements(context, "alltoallv", "an output", total, output.count());
  return call.run(output.object(),
                  CHORUS_PYTHON_INVOKE(alltoallv, context, input.data(), std::span<const size_t>(send_counts),
                                       output.data(), std::span<const size_t>(recv_counts), input.type()));
}

py::object send_call(bool async, PyContext& self, const py::object& data, int peer, uint32_t tag,
                     const py::object& dtype, const py::object& timeout) {
  Call call(self, "send", async, dtype, timeout, py::none());
  Context& context = call.context();
  BufferView& buffer = call.read(data, "data");
  return call.run(py::none(), CHORUS_PYTHON_INVOKE(send, context, buffer.data(), buffer.count(), buffer.type(), peer,
                                                   tag));
}

py::object recv_call(bool async, PyContext& self, const py::object& data, int peer, uint32_t tag,
                     const py::object& dtype, const py::object& timeout) {
  Call call(self, "recv", async, dtype, timeout, py::none());
  Context& context = call.context();
  BufferView& buffer = call.write(data, "data");
  return call.run(data, CHORUS_PYTHON_INVOKE(recv, context, buffer.data(), buffer.count(), buffer.type(), peer, tag));
}

// Blocking: the sender's rank; async: a Work whose source_rank() tells it.
py::object recv_any_call(bool async, PyContext& self, const py::object& data, uint32_t tag, const py::object& dtype,
                         const py::object& timeout) {
  Call call(self, "recv_any", async, dtype, timeout, py::none());
  Context& context = call.context();
  BufferView& buffer = call.write(data, "data");
  int source = -1;
  py::object work = call.run(data, [&](const CollectiveOptions& options, bool is_async) -> Work {
    if (is_async) return recv_any_async(context, buffer.data(), buffer.count(), buffer.type(), tag, options);
    source = recv_any(context, buffer.data(), buffer.count(), buffer.type(), tag, options);
    return Work();
  });
  return async ? work : py::int_(source);
}

}  // namespace

void bind_movement(py::module_&, py::class_<PyContext>& context) {
  const auto out = py::arg("out") = py::none();
  const auto dtype = py::arg("dtype") = py::none();
  const auto timeout = py::arg("timeout") = py::none();
  const auto algorithm = py::arg("algorithm") = py::none();
  const auto root = py::arg("root") = 0;
  def_blocking_and_async(context, "allgather", &allgather_call,
                         "Every rank's data, stacked in rank order: into out, else a new numpy array of shape "
                         "(size, *data.shape). data=None with out= is in place (this rank's block already "
                         "filled).",
                         py::arg("data"), py::kw_only(), out, dtype, timeout, algorithm);
  def_blocking_and_async(context, "allgatherv", &allgatherv_call,
                         "As allgather with counts[r] elements from rank r; the output is flat.", py::arg("data"),
                         py::arg("counts"), py::kw_only(), out, dtype, timeout, algorithm);
  def_blocking_and_async(context, "gather", &gather_call,
                         "As allgather, but only root receives (returns None elsewhere). In place on root: data "
                         "is a view of root's block of out.", py::arg("data"), root,
                         py::kw_only(), out, dtype, timeout, algorithm);
  def_blocking_and_async(context, "gatherv", &gatherv_call, "As gather with counts[r] elements from rank r.",
                         py::arg("data"), py::arg("counts"), root, py::kw_only(), out, dtype, timeout, algorithm);
  def_blocking_and_async(context, "scatter", &scatter_call,
                         "Block r of root's data goes to rank r (into out, else a new array shaped like one "
                         "block). Other ranks pass out= (data may be None) or data shaped like root's. In place on "
                         "root: out is a view of root's block of data.",
                         py::arg("data"), root, py::kw_only(), out, dtype, timeout, algorithm);
  def_blocking_and_async(context, "scatterv", &scatterv_call, "As scatter with counts[r] elements for rank r.",
                         py::arg("data"), py::arg("counts"), root, py::kw_only(), out, dtype, timeout, algorithm);
  def_blocking_and_async(context, "alltoall", &alltoall_call,
                         "Block p of this rank's data goes to block rank of peer p's output (out of place).",
                         py::arg("data"), py::kw_only(), out, dtype, timeout, algorithm);
  def_blocking_and_async(context, "alltoallv", &alltoallv_call,
                         "Sends send_counts[p] elements to peer p, receives recv_counts[p] from it.",
                         py::arg("data"), py::arg("send_counts"), py::arg("recv_counts"), py::kw_only(), out, dtype,
                         timeout, algorithm);
  def_blocking_and_async(context, "send", &send_call,
                         "Sends data to peer under tag; done once the transport holds it.", py::arg("data"),
                         py::arg("peer"), py::arg("tag") = 0u, py::kw_only(), dtype, timeout);
  def_blocking_and_async(context, "recv", &recv_call,
                         "Receives into data (same count and type as the send) from peer under tag; returns data.",
                         py::arg("data"), py::arg("peer"), py::arg("tag") = 0u, py::kw_only(), dtype, timeout);
  def_blocking_and_async(context, "recv_any", &recv_any_call,
                         "Receives into data the first message under tag from any other rank and returns that "
                         "rank (the _async form's Work tells it with source_rank()). Other ranks' messages stay "
                         "for later receives.",
                         py::arg("data"), py::arg("tag") = 0u, py::kw_only(), dtype, timeout);
}

}  // namespace chorus::python
