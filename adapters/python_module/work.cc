// Work (async calls) and Call (the plumbing of every collective binding).
#include <cmath>
#include <string>

#include "base/error.h"
#include "adapters/python_module/binding.h"
#include "adapters/python_module/errors.h"

namespace chorus::python {

PyWork::PyWork(Work work, std::shared_ptr<Context> context, std::vector<std::unique_ptr<BufferView>> views,
               py::object result)
    : context_(std::move(context)), work_(std::move(work)), views_(std::move(views)), result_(std::move(result)) {}

PyWork::~PyWork() {
  if (!views_.empty() || context_) {
    py::gil_scoped_release released;
    // The error, if any, was the caller's to collect; a destructor cannot raise it.
    try {
      if (work_.valid()) work_.wait();
    } catch (const std::exception&) {
    }
    work_ = Work();
    context_.reset();
  }
  views_.clear();
}

void PyWork::release_if_finished(bool finished) {
  if (!finished) return;
  views_.clear();
  // A finished Work no longer needs its Context; holding it would keep the
  // connections open after Context.close() for as long as Python keeps the Work.
  if (context_) {
    py::gil_scoped_release released;
    context_.reset();
  }
}

bool PyWork::wait(const py::object& timeout) {
  const std::optional<std::chrono::milliseconds> limit = milliseconds_of(timeout, "Work.wait: timeout");
  bool finished = false;
  try {
    py::gil_scoped_release released;
    finished = limit ? work_.wait_for(*limit) : (work_.wait(), true);
  } catch (...) {
    release_if_finished(true);
    throw;
  }
  release_if_finished(finished);
  return finished;
}

bool PyWork::test() {
  bool finished = false;
  {
    // A point-to-point Work moves bytes in test(); keep other threads running.
    py::gil_scoped_release released;
    finished = work_.test();
  }
  release_if_finished(finished);
  return finished;
}

py::object PyWork::exception() {
  std::exception_ptr error;
  {
    py::gil_scoped_release released;
    error = work_.exception();
  }
  return python_error_of(error);
}

int PyWork::source_rank() {
  int source = -1;
  {
    // Like test(): an unfinished receive from any peer looks for its message here.
    py::gil_scoped_release released;
    source = work_.source_rank();
  }
  return source;
}

py::object PyWork::result(const py::object& timeout) {
  if (!wait(timeout)) {
    PyErr_SetString(PyExc_TimeoutError, "Work.result: the call is still running");
    throw py::error_already_set();
  }
  return result_;
}

std::optional<std::chrono::milliseconds> milliseconds_of(const py::object& seconds, const char* what) {
  if (seconds.is_none()) return std::nullopt;
  const double value = seconds.cast<double>();
  if (!(value >= 0) || !std::isfinite(value))
    throw py::value_error(std::string(what) + " must be a finite number of seconds >= 0, got " +
                          py::repr(seconds).cast<std::string>());
  // Round up: a positive timeout below a millisecond must not become "no wait".
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(value * 1000.0)));
}

ReduceOp reduce_op_of(const py::object& op) {
  if (py::isinstance<py::str>(op)) {
    const std::string name = op.cast<std::string>();
    if (const std::optional<ReduceOp> parsed = parse_reduce_op(name)) return *parsed;
    throw py::value_error("unknown reduce op '" + name + "' (sum, prod, min, max, avg, band, bor, bxor)");
  }
  return op.cast<ReduceOp>();
}

std::optional<DataType> data_type_of(const py::object& dtype) {
  if (dtype.is_none()) return std::nullopt;
  if (py::isinstance<py::str>(dtype)) {
    const std::string name = dtype.cast<std::string>();
    if (const std::optional<DataType> parsed = parse_data_type(name)) return *parsed;
    throw py::value_error("unknown dtype '" + name + "' (int8, uint8, int32, uint32, int64, uint64, float16, "
                          "bfloat16, float32, float64)");
  }
  return dtype.cast<DataType>();
}

Call::Call(PyContext& context, const char* name, bool async, const py::object& dtype, const py::object& timeout,
           const py::object& algorithm)
    : context_(context.get()), shared_(context.shared()), name_(name), async_(async),
      override_type_(data_type_of(dtype)) {
  options_.timeout = milliseconds_of(timeout, "timeout");
  if (!algorithm.is_none()) options_.algorithm = algorithm.cast<std::string>();
}

BufferView& Call::read(const py::handle& object, const char* argument) {
  const std::string what = std::string(name_) + ": " + argument;
  return joined(std::make_unique<BufferView>(object, Access::read, what.c_str(), override_type_));
}

BufferView& Call::write(const py::handle& object, const char* argument) {
  const std::string what = std::string(name_) + ": " + argument;
  return joined(std::make_unique<BufferView>(object, Access::write, what.c_str(), override_type_));
}

BufferView& Call::joined(std::unique_ptr<BufferView> view) {
  if (!view->fits_any_memory()) {
    if (!memory_set_) {
      memory_set_ = true;
      options_.memory = view->memory();
      options_.cuda_stream = view->stream();
    } else if (view->memory() != options_.memory) {
      throw py::type_error(std::string(name_) + ": buffers in " + to_string(options_.memory) + " and in " +
                           to_string(view->memory()) + "; every buffer of one call must live in one place");
    } else if (view->stream() != options_.cuda_stream) {
      throw py::value_error(std::string(name_) + ": CUDA arrays whose __cuda_array_interface__ names different "
                            "streams; chorus orders a call after one stream");
    }
  }
  views_.push_back(std::move(view));
  return *views_.back();
}

BufferView& Call::allocate(DataType type, const py::tuple& shape) {
  if (!options_.memory.on_host())
    throw py::type_error(std::string(name_) + ": its input is CUDA memory (" + to_string(options_.memory) +
                         "), so pass out= (a CUDA array of shape " + py::str(static_cast<py::handle>(shape)).cast<std::string>() + " and type " +
                         std::string(to_string(type)) + "): chorus allocates numpy (host) outputs only");
  py::module_ numpy;
  try {
    numpy = py::module_::import("numpy");
  } catch (py::error_already_set&) {
    throw py::type_error(std::string(name_) + ": pass out= (allocating the output needs numpy, which is missing)");
  }
  py::object array = numpy.attr("empty")(shape, py::arg("dtype") = numpy_storage_name(type));
  views_.push_back(std::make_unique<BufferView>(array, Access::write, name_, type));
  return *views_.back();
}

void Call::expect_same_type(const BufferView& input, const BufferView& output) const {
  if (input.type() != output.type())
    throw py::type_error(std::string(name_) + ": the input holds " + std::string(to_string(input.type())) +
                         " but the output " + std::string(to_string(output.type())) + "; both must be one type");
}

BufferView& Call::output_for(const BufferView& input, const py::object& out, const py::tuple& shape) {
  if (out.is_none()) return allocate(input.type(), shape);
  BufferView& output = write(out, "out");
  expect_same_type(input, output);
  return output;
}

void bind_work(py::module_& module) {
  py::class_<PyWork>(module, "Work",
                     "An asynchronous call (the *_async methods). It keeps the buffers and the Context alive "
                     "until the call has finished; dropping an unfinished Work waits for it.")
      .def("wait", &PyWork::wait, py::arg("timeout") = py::none(),
           "Blocks (the GIL released) until done and returns True, raising the call's error; with a timeout "
           "in seconds, returns False if it is still running then.")
      .def("__repr__",
           [](PyWork& self) { return std::string("<chorus.Work ") + (self.test() ? "done" : "running") + ">"; })
      .def("test", &PyWork::test, "True once finished (successfully or not); never blocks.")
      .def("done", &PyWork::test, "Same as test().")
      .def("exception", &PyWork::exception, "The error the call finished with, or None (also while running).")
      .def("source_rank", &PyWork::source_rank,
           "The rank a finished recv_any_async's message came from; -1 while it runs, after an error, and for "
           "every other call. Never blocks.")
      .def("result", &PyWork::result, py::arg("timeout") = py::none(),
           "Waits as wait() and returns the output buffer (None on ranks without one); raises the builtin "
           "TimeoutError if the timeout passes first.");
}

}  // namespace chorus::python
