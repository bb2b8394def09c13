// The extension chorus.torch._backend: the process group class torch's
// register_backend creator returns, and the store of chorus's launchers for
// init_process_group under chorus-run. chorus/torch/__init__.py registers
// both with torch.distributed.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>

#include "adapters/python_module/statistics_dict.h"
#include "adapters/torch/compat.h"
#include "adapters/torch/process_group.h"
#include "adapters/torch/store_bridge.h"

namespace py = pybind11;
using chorus::torch_backend::BackendBase;
using chorus::torch_backend::ChorusProcessGroup;
using chorus::torch_backend::LauncherStore;

PYBIND11_MODULE(_backend, module) {
  module.doc() = "chorus as a torch.distributed backend (import chorus.torch)";
  // The base classes below are torch's; they exist once torch.distributed is imported.
  py::module_::import("torch.distributed");
  // chorus's exception types and their translator (chorus.PeerLostError, ...).
  py::module_::import("chorus");

  py::class_<ChorusProcessGroup, BackendBase, c10::intrusive_ptr<ChorusProcessGroup>>(module, "ProcessGroupChorus")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::duration<double> timeout) {
             return c10::make_intrusive<ChorusProcessGroup>(
                 store, rank, size, std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           // Connecting waits for the group's other ranks.
           py::call_guard<py::gil_scoped_release>(),
           "Joins the group's other ranks through `store` (torch's prefix store of the group) and connects them.")
      .def_property_readonly(
          "timeout", [](const ChorusProcessGroup& self) { return self.timeout(); },
          "The group's timeout: of connecting and, unless a call gives its own, of every collective.")
      .def_property_readonly(
          "local_rank", [](ChorusProcessGroup& self) { return self.context().local_rank(); },
          "This rank's index among the group's ranks on its host (the host identity chorus publishes).")
      .def_property_readonly(
          "local_size", [](ChorusProcessGroup& self) { return self.context().local_size(); },
          "The number of the group's ranks on this rank's host.")
      .def(
          "statistics",
          [](ChorusProcessGroup& self) { return chorus::python::statistics_dict(self.context().statistics()); },
          "The group's chorus Context counters, as chorus.Context.statistics().");

  module.def("_drain", &chorus::torch_backend::Completer::drain_all, py::call_guard<py::gil_scoped_release>(),
             "Waits until every issued call has finished and let go of its tensors (chorus.torch runs it at exit).");

  py::class_<LauncherStore, c10d::Store, c10::intrusive_ptr<LauncherStore>>(module, "LauncherStore");
  module.def(
      "launcher_store",
      [](std::chrono::duration<double> timeout) {
        chorus::torch_backend::LaunchedStore launched;
        {
          // Reaching the store may take until the timeout (rank 0 not up yet).
          py::gil_scoped_release release;
          launched = chorus::torch_backend::open_launcher_store(
              std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
        }
        return py::make_tuple(launched.store, launched.rank, launched.size);
      },
      py::arg("timeout"),
      "(store, rank, size) from the variables of chorus's launchers (CHORUS_RANK, CHORUS_SIZE, CHORUS_STORE, ...), "
      "the store as a torch.distributed.Store.");
}
