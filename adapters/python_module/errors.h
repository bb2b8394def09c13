// chorus's C++ errors (base/error.h) as Python exceptions.
//
//   chorus.Error(Exception)              .peer: rank to blame or None; str(): the full message
//     IoError(Error, ConnectionError)    .peer: the peer whose connection failed, None for a store
//       PeerLostError(IoError)           the peer's process is gone (shrink helps)
//     TimeoutError(Error, builtins.TimeoutError)
//     InvalidArgument(Error, ValueError)
//     MismatchError(Error)
//     Aborted(Error)
//
// The builtin bases let code that knows nothing of chorus catch what it
// expects (a ValueError for a bad argument, a TimeoutError, a
// ConnectionError); catching chorus.Error catches every chorus failure.
#pragma once

#include <pybind11/pybind11.h>

#include <exception>

namespace chorus::python {

namespace py = pybind11;

// Creates the exception types in `module` and registers the translator
// that turns thrown chorus errors into them.
void bind_errors(py::module_& module);

// The Python exception instance for a C++ error (also for non-chorus
// std::exceptions, as chorus.Error); null stays None.
py::object python_error_of(const std::exception_ptr& error);

}  // namespace chorus::python
