// chorus.register_buffer: a buffer-protocol object registered with
// chorus::register_buffer (chorus/registered_buffer.h). The Python object
// holds the buffer (and its export) for as long as it is registered: the
// memory cannot be freed, a bytearray refuses to resize while exported and
// numpy to resize an array something else references, so the C++ contract
// (the memory stays while registered) holds whatever the Python code does
// short of numpy's resize(refcheck=False).
#include <pybind11/pybind11.h>

#include <memory>
#include <optional>

#include "chorus/registered_buffer.h"
#include "adapters/python_module/binding.h"
#include "adapters/python_module/buffers.h"

namespace chorus::python {
namespace {

// Registration pins host pages for RDMA; device memory is not pinned that way.
std::unique_ptr<BufferView> host_view(const py::handle& object) {
  auto view = std::make_unique<BufferView>(object, Access::read, "register_buffer", std::nullopt);
  if (!view->memory().on_host())
    throw py::type_error("register_buffer takes host memory; this is a CUDA array (" + to_string(view->memory()) +
                         "), which chorus moves without registration");
  return view;
}

class PyRegisteredBuffer {
 public:
  explicit PyRegisteredBuffer(const py::handle& object)
      : view_(host_view(object)),
        registration_(register_buffer(view_->data(), view_->count() * element_size(view_->type()))) {}
  ~PyRegisteredBuffer() { close(); }

  // Deregisters first (no pin may outlive the memory), then lets the export go.
  void close() {
    registration_.reset();
    view_.reset();
  }
  bool registered() const { return registration_.registered(); }
  size_t nbytes() const { return registration_.bytes(); }

 private:
  std::unique_ptr<BufferView> view_;
  RegisteredBuffer registration_;
};

}  // namespace

void bind_registration(py::module_& module) {
  py::class_<PyRegisteredBuffer>(module, "RegisteredBuffer",
                                 "A buffer registered with register_buffer; close() (or the end of a with block) "
                                 "deregisters it")
      .def("close", &PyRegisteredBuffer::close, "Deregister now: every pin of the buffer is gone when it returns")
      .def_property_readonly("registered", &PyRegisteredBuffer::registered)
      .def_property_readonly("nbytes", &PyRegisteredBuffer::nbytes)
      .def("__enter__", [](PyRegisteredBuffer& self) -> PyRegisteredBuffer& { return self; },
           py::return_value_policy::reference)
      .def("__exit__", [](PyRegisteredBuffer& self, const py::args&) { self.close(); })
      .def("__repr__", [](const PyRegisteredBuffer& self) {
        return self.registered() ? "<chorus.RegisteredBuffer " + std::to_string(self.nbytes()) + " bytes>"
                                 : std::string("<chorus.RegisteredBuffer closed>");
      });
  module.def(
      "register_buffer", [](const py::handle& buffer) { return std::make_unique<PyRegisteredBuffer>(buffer); },
      py::arg("buffer"),
      "Register a C-contiguous host buffer (numpy array, bytearray, memoryview) that collectives reuse call after "
      "call, so that verbs devices without on-demand paging pin it once instead of once per message. The buffer "
      "stays exported (it cannot be resized) until the returned RegisteredBuffer is closed. Per process: every "
      "Context sees it. A range overlapping a registered one without being it raises InvalidArgument.");
}

}  // namespace chorus::python
