#include "adapters/python_module/errors.h"

#include <string>

#include "base/error.h"

namespace chorus::python {

namespace {

// Created once at import and kept for the life of the process: the module
// dict holds a reference too, and translators may run until interpreter exit.
struct ErrorTypes {
  PyObject* error = nullptr;
  PyObject* io_error = nullptr;
  PyObject* peer_lost = nullptr;
  PyObject* timeout = nullptr;
  PyObject* invalid_argument = nullptr;
  PyObject* mismatch = nullptr;
  PyObject* aborted = nullptr;
};
ErrorTypes types;

PyObject* new_type(py::module_& module, const char* name, const char* doc, std::initializer_list<PyObject*> bases) {
  py::tuple base_tuple(bases.size());
  size_t index = 0;
  for (PyObject* base : bases) base_tuple[index++] = py::reinterpret_borrow<py::object>(base);
  const std::string qualified = std::string("chorus.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base_tuple.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  module.add_object(name, py::reinterpret_borrow<py::object>(type));
  return type;
}

py::object instance_of(PyObject* type, const char* message, int peer) {
  py::object error = py::reinterpret_borrow<py::object>(type)(py::str(message));
  error.attr("peer") = peer >= 0 ? py::object(py::int_(peer)) : py::object(py::none());
  return error;
}

// Which type and peer a C++ exception maps to. Most-derived first.
py::object translate(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const PeerLostError& e) {
    return instance_of(types.peer_lost, e.what(), e.peer_rank());
  } catch (const IoError& e) {
    return instance_of(types.io_error, e.what(), e.peer_rank());
  } catch (const TimeoutError& e) {
    return instance_of(types.timeout, e.what(), -1);
  } catch (const InvalidArgument& e) {
    return instance_of(types.invalid_argument, e.what(), -1);
  } catch (const MismatchError& e) {
    return instance_of(types.mismatch, e.what(), -1);
  } catch (const Aborted& e) {
    return instance_of(types.aborted, e.what(), -1);
  } catch (const Error& e) {
    return instance_of(types.error, e.what(), -1);
  }
}

}  // namespace

void bind_errors(py::module_& module) {
  // A RuntimeError, as torch's and Horovod's errors are: their tests and
  // users' `except RuntimeError` must catch chorus's failures too.
  types.error = new_type(module, "Error",
                         "Base of every chorus failure (a RuntimeError). .peer is the rank to blame (or None); str() "
                         "is the full message, naming this rank and what was expected.",
                         {PyExc_RuntimeError});
  // A class attribute, so .peer exists even on errors raised from Python.
  PyObject_SetAttrString(types.error, "peer", Py_None);
  types.io_error = new_type(module, "IoError",
                            "A connection failed (closed, reset, unreachable). .peer is that peer's rank, None "
                            "when no single peer is to blame (a store).",
                            {types.error, PyExc_ConnectionError});
  types.peer_lost = new_type(module, "PeerLostError",
                             "The peer's process is gone (killed, crashed, exited without closing). Survivors "
                             "may Context.shrink() and go on.",
                             {types.io_error});
  types.timeout = new_type(module, "TimeoutError", "A wait ran out of time; the message says what for.",
                           {types.error, PyExc_TimeoutError});
  types.invalid_argument = new_type(module, "InvalidArgument",
                                    "A bad root, peer, type, op, option or buffer size. Collective arguments "
                                    "rejected by chorus abort the Context, so that the other ranks fail too.",
                                    {types.error, PyExc_ValueError});
  types.mismatch = new_type(module, "MismatchError",
                            "Ranks disagree on the collective, its count, type, op or root.", {types.error});
  types.aborted = new_type(module, "Aborted", "The Context was aborted (Context.abort, or a failure elsewhere).",
                           {types.error});

  py::register_exception_translator([](std::exception_ptr error) {
    if (!error) return;
    try {
      std::rethrow_exception(error);
    } catch (const Error&) {
      py::object instance = translate(error);
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance.ptr())), instance.ptr());
    }
    // Anything else falls through to pybind11's own translators.
  });
}

py::object python_error_of(const std::exception_ptr& error) {
  if (!error) return py::none();
  try {
    std::rethrow_exception(error);
  } catch (const Error&) {
    return translate(error);
  } catch (const std::exception& e) {
    return instance_of(types.error, e.what(), -1);
  } catch (...) {
    return instance_of(types.error, "unknown C++ exception", -1);
  }
}

}  // namespace chorus::python
