// What the binding files share: the Python-side Context and Work, and Call,
// the plumbing every collective binding goes through (buffers, options,
// releasing the GIL, blocking or async).
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chorus/collectives.h"
#include "chorus/context.h"
#include "chorus/work.h"
#include "adapters/python_module/buffers.h"

namespace chorus::python {

namespace py = pybind11;

// A Context that Python can close before the garbage collector gets to it.
class PyContext {
 public:
  explicit PyContext(std::shared_ptr<Context> context) : context_(std::move(context)) {}
  ~PyContext();
  // Throws ValueError once closed.
  Context& get() const;
  const std::shared_ptr<Context>& shared() const;
  bool closed() const { return context_ == nullptr; }
  // Drops this reference; the C++ Context ends (joining its worker) once
  // the last Work and split child referring to its connections is gone.
  void close();

 private:
  std::shared_ptr<Context> context_;
};

// An asynchronous call. Holds the buffer exports and the Context until the
// collective has finished: C++ needs both to outlive it, and Python code may
// drop every other reference to them right after the call.
class PyWork {
 public:
  PyWork(Work work, std::shared_ptr<Context> context, std::vector<std::unique_ptr<BufferView>> views,
         py::object result);
  // Waits for an unfinished collective (the GIL released) before the buffers
  // go back to Python: dropping a Work is a wait, as in C++.
  ~PyWork();
  PyWork(const PyWork&) = delete;
  PyWork& operator=(const PyWork&) = delete;

  // True once done (raising its error), False when `timeout` seconds passed first.
  bool wait(const py::object& timeout);
  bool test();
  py::object exception();
  // Waits, then returns the output (None where this rank has none).
  py::object result(const py::object& timeout);
  // Work::source_rank: the sender of a finished recv_any_async, else -1.
  int source_rank();

 private:
  // Gives the buffers back once C++ no longer touches them.
  void release_if_finished(bool finished);

  std::shared_ptr<Context> context_;
  Work work_;
  std::vector<std::unique_ptr<BufferView>> views_;
  py::object result_;
};

// Seconds (a Python number) to milliseconds; None stays unset.
std::optional<std::chrono::milliseconds> milliseconds_of(const py::object& seconds, const char* what);
// A ReduceOp or its name ("sum").
ReduceOp reduce_op_of(const py::object& op);
// None, a DataType or its name ("bfloat16").
std::optional<DataType> data_type_of(const py::object& dtype);

// One collective call from Python.
class Call {
 public:
  Call(PyContext& context, const char* name, bool async, const py::object& dtype, const py::object& timeout,
       const py::object& algorithm);

  Context& context() const { return context_; }
  bool async() const { return async_; }
  const char* name() const { return name_; }
  // Exports `object` for the call's lifetime (an async call's: until done).
  BufferView& read(const py::handle& object, const char* argument);
  BufferView& write(const py::handle& object, const char* argument);
  // A fresh numpy array of `type` to write into (TypeError for a call on
  // CUDA arrays: chorus allocates host outputs only, the caller passes out=).
  BufferView& allocate(DataType type, const py::tuple& shape);
  // TypeError unless `output` holds the same type as `input`.
  void expect_same_type(const BufferView& input, const BufferView& output) const;
  // The output of a call whose input fixes the element type: `out` (TypeError
  // unless it holds input's type), or when out is None a fresh array of `shape`.
  BufferView& output_for(const BufferView& input, const py::object& out, const py::tuple& shape);

  // Runs the call: blocking (returning `result`) or async (returning a Work
  // that yields `result`), the GIL released either way. `invoke(options,
  // async)` makes the C++ call: the _async form's Work, or an empty one.
  template <class Invoke>
  py::object run(py::object result, Invoke&& invoke) {
    Work work;
    {
      py::gil_scoped_release released;
      work = invoke(options_, async_);
    }
    if (!async_) return result;
    return py::cast(std::make_unique<PyWork>(std::move(work), shared_, std::move(views_), std::move(result)));
  }

 private:
  // The buffer just exported joins the call: every buffer of one call lives
  // in one place (host memory or one CUDA device), which sets the options'
  // memory and stream.
  BufferView& joined(std::unique_ptr<BufferView> view);

  Context& context_;
  std::shared_ptr<Context> shared_;
  const char* name_;
  bool async_;
  std::optional<DataType> override_type_;
  CollectiveOptions options_;
  bool memory_set_ = false;
  std::vector<std::unique_ptr<BufferView>> views_;
};

py::class_<PyContext> bind_context(py::module_& module);
void bind_work(py::module_& module);
// The `invoke` of Call::run for the C++ collective `function` (and
// function_async) with these arguments before the options.
#define CHORUS_PYTHON_INVOKE(function, ...)                                 \
  [&](const CollectiveOptions& options, bool async) -> Work {               \
    if (async) return function##_async(__VA_ARGS__, options);               \
    function(__VA_ARGS__, options);                                         \
    return Work();                                                          \
  }

// A block-sized output shaped like one block of `whole`: its shape without the
// first axis when that axis has one entry per rank, else flat.
py::tuple block_shape(const BufferView& whole, size_t block, int size);
// (size, *shape of one rank's input), the shape of gathered outputs.
py::tuple gathered_shape(const BufferView& input, int size);

// Registers name and name_async from one implementation taking `async` first.
template <class... Args, class... Extra>
void def_blocking_and_async(py::class_<PyContext>& context, const char* name,
                            py::object (*call)(bool, PyContext&, Args...), const char* doc, const Extra&... extra) {
  context.def(
      name, [call](PyContext& self, Args... args) { return call(false, self, args...); }, extra..., doc);
  const std::string async_name = std::string(name) + "_async";
  const std::string async_doc = std::string("As ") + name + ", returning a chorus.Work at once.";
  context.def(
      async_name.c_str(), [call](PyContext& self, Args... args) { return call(true, self, args...); }, extra...,
      py::doc(async_doc.c_str()));
}

void bind_reductions(py::module_& module, py::class_<PyContext>& context);
void bind_movement(py::module_& module, py::class_<PyContext>& context);
void bind_grouped(py::class_<PyContext>& context);
// chorus.register_buffer and chorus.RegisteredBuffer (registration.cc).
void bind_registration(py::module_& module);

}  // namespace chorus::python
