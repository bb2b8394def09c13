// connect_from_env / connect_to_store and the Context: rank, size, topology,
// timeout, split, shrink, abort, close.
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "chorus/connect.h"
#include "chorus/shrink.h"
#include "adapters/python_module/statistics_dict.h"
#include "adapters/python_module/binding.h"

namespace chorus::python {

namespace {

ConnectOptions connect_options_of(const py::object& timeout, const py::object& transports,
                                  const std::string& interface, const std::string& hostname,
                                  const std::string& host_id, const py::object& streams, const std::string& secret,
                                  const std::string& trace, const py::object& trace_steps,
                                  const py::object& connections) {
  ConnectOptions options;
  if (!connections.is_none()) {
    const std::string text = connections.cast<std::string>();
    options.connections = connections_from_string(text);
    if (!options.connections)
      throw py::value_error("connections='" + text + "' is not 'full', 'on-demand' or 'auto'");
  }
  if (const auto limit = milliseconds_of(timeout, "timeout")) options.timeout = *limit;
  if (!transports.is_none()) options.transports = transports.cast<std::vector<std::string>>();
  options.interface = interface;
  options.hostname = hostname;
  options.host_id = host_id;
  if (!streams.is_none()) options.streams = streams.cast<int>();
  options.secret = secret;
  options.trace = trace;
  if (!trace_steps.is_none()) options.trace_steps = trace_steps.cast<bool>();
  return options;
}

std::unique_ptr<PyContext> wrap(std::shared_ptr<Context> context) {
  return std::make_unique<PyContext>(std::move(context));
}

}  // namespace

PyContext::~PyContext() {
  // ~Context joins its worker thread, which never needs the GIL, but other
  // Python threads should not stall behind it.
  if (context_) {
    py::gil_scoped_release released;
    context_.reset();
  }
}

Context& PyContext::get() const {
  if (!context_) throw py::value_error("the chorus Context is closed");
  return *context_;
}

const std::shared_ptr<Context>& PyContext::shared() const {
  get();
  return context_;
}

void PyContext::close() {
  py::gil_scoped_release released;
  context_.reset();
}

py::class_<PyContext> bind_context(py::module_& module) {
  const char* connect_options_doc =
      "Options (all keyword, defaults from the CHORUS_* variables as in C++): timeout (seconds, default of "
      "every collective and of connecting; CHORUS_TIMEOUT, else 30), transports (['shm', 'tcp']), interface, "
      "hostname, host_id, streams, secret, trace (a Chrome trace file per rank: '{rank}' in the name, else .rank<N> before the "
      "extension; CHORUS_TRACE), trace_steps (every step of every collective too; CHORUS_TRACE_STEPS), connections "
      "('full': every pair at connect, 'on-demand': each pair when first needed, 'auto': full up to 64 ranks; "
      "CHORUS_CONNECTIONS; docs/connections.md).";
  module.def(
      "connect_from_env",
      [](const py::object& timeout, const py::object& transports, const std::string& interface,
         const std::string& hostname, const std::string& host_id, const py::object& streams,
         const std::string& secret, const std::string& trace, const py::object& trace_steps,
         const py::object& connections) {
        const ConnectOptions options = connect_options_of(timeout, transports, interface, hostname, host_id, streams,
                                                          secret, trace, trace_steps, connections);
        std::shared_ptr<Context> context;
        {
          py::gil_scoped_release released;
          context = connect_from_env(options);
        }
        return wrap(std::move(context));
      },
      py::kw_only(), py::arg("timeout") = py::none(), py::arg("transports") = py::none(),
      py::arg("interface") = "", py::arg("hostname") = "", py::arg("host_id") = "", py::arg("streams") = py::none(),
      py::arg("secret") = "", py::arg("trace") = "", py::arg("trace_steps") = py::none(),
      py::arg("connections") = py::none(),
      (std::string("Joins the job its launcher described (chorus-run, torchrun, mpirun, Slurm: README). ") +
       connect_options_doc)
          .c_str());
  module.def(
      "connect_to_store",
      [](const std::string& store_url, int rank, int size, const std::string& job_id, const py::object& timeout,
         const py::object& transports, const std::string& interface, const std::string& hostname,
         const std::string& host_id, const py::object& streams, const std::string& secret, const std::string& trace,
         const py::object& trace_steps, const py::object& connections) {
        const ConnectOptions options = connect_options_of(timeout, transports, interface, hostname, host_id, streams,
                                                          secret, trace, trace_steps, connections);
        std::shared_ptr<Context> context;
        {
          py::gil_scoped_release released;
          context = connect_to_store(store_url, rank, size, job_id, options);
        }
        return wrap(std::move(context));
      },
      py::arg("store_url"), py::arg("rank"), py::arg("size"), py::arg("job_id") = "", py::kw_only(),
      py::arg("timeout") = py::none(), py::arg("transports") = py::none(), py::arg("interface") = "",
      py::arg("hostname") = "", py::arg("host_id") = "", py::arg("streams") = py::none(), py::arg("secret") = "",
      py::arg("trace") = "", py::arg("trace_steps") = py::none(), py::arg("connections") = py::none(),
      (std::string("Joins the job meeting at store_url (tcp://host:port, file:///dir, redis://...) as rank of "
                   "size; Contexts of one job meet under one job_id. ") +
       connect_options_doc)
          .c_str());

  py::class_<PyContext> context(module, "Context",
                                "One rank's membership in a group of ranks. Collectives are its methods; every "
                                "rank calls the same ones in the same order. A context manager: leaving the "
                                "with block closes it.");
  context.def_property_readonly("rank", [](const PyContext& self) { return self.get().rank(); })
      .def_property_readonly("size", [](const PyContext& self) { return self.get().size(); })
      .def_property_readonly("local_rank", [](const PyContext& self) { return self.get().local_rank(); },
                             "This rank's index among the ranks of its host.")
      .def_property_readonly("local_size", [](const PyContext& self) { return self.get().local_size(); })
      .def_property_readonly("hosts", [](const PyContext& self) { return self.get().hosts(); })
      .def("host_of", [](const PyContext& self, int rank) { return self.get().host_of(rank); }, py::arg("rank"),
           "The host index of a rank (hosts are numbered in order of their lowest rank).")
      .def(
          "link_to",
          [](const PyContext& self, int peer) {
            const PeerLink link = self.get().link_to(peer);
            return py::make_tuple(link.transport, link.streams);
          },
          py::arg("peer"), "(transport, streams) serving that peer, e.g. ('shm', 1).")
      .def_property(
          "timeout", [](const PyContext& self) { return static_cast<double>(self.get().timeout().count()) / 1000.0; },
          [](PyContext& self, const py::object& seconds) {
            const auto limit = milliseconds_of(seconds, "Context.timeout");
            if (!limit) throw py::value_error("Context.timeout cannot be None");
            self.get().set_timeout(*limit);
          },
          "Default timeout of every collective, in seconds.")
      .def(
          "split",
          [](PyContext& self, int color, const py::object& key) -> py::object {
            // A reference of our own: another thread may close `self` while this one waits.
            const std::shared_ptr<Context> parent = self.shared();
            const int rank_key = key.is_none() ? parent->rank() : key.cast<int>();
            std::shared_ptr<Context> child;
            {
              py::gil_scoped_release released;
              child = parent->split(color, rank_key);
            }
            if (!child) return py::none();
            return py::cast(wrap(std::move(child)));
          },
          py::arg("color"), py::arg("key") = py::none(),
          "MPI_Comm_split, a collective on this Context: ranks passing the same color form a child Context "
          "ranked by (key, rank; key defaults to rank); color=chorus.NO_COLOR takes part and gets None.")
      .def(
          "shrink",
          [](PyContext& self, const py::object& join_window) {
            ShrinkOptions options;
            if (const auto window = milliseconds_of(join_window, "join_window")) options.join_window = *window;
            const std::shared_ptr<Context> old = self.shared();
            std::shared_ptr<Context> survivors;
            {
              py::gil_scoped_release released;
              survivors = shrink(*old, options);
            }
            return wrap(std::move(survivors));
          },
          py::arg("join_window") = py::none(),
          "After a rank died: the survivors' new Context, renumbered 0..n-1 in their old order (a collective "
          "among the survivors; join_window in seconds, default the Context's timeout).")
      .def(
          "abort",
          [](PyContext& self, const std::string& reason) {
            const std::shared_ptr<Context> target = self.shared();
            py::gil_scoped_release released;
            target->abort(reason);
          },
          py::arg("reason") = "aborted by the application",
          "Fails every pending and later call, here and on every Context sharing its connections, with "
          "chorus.Aborted(reason). Any thread.")
      .def(
          "statistics",
          [](const PyContext& self) { return chorus::python::statistics_dict(self.get().statistics()); },
          "What this Context has done since it was made: collectives (finished) and failed_collectives, "
          "messages_sent/received (point to point), bytes_sent/received by this rank over every transport, "
          "time_in_collectives and time_waiting (seconds: running collectives; callers blocked in calls and "
          "Work.wait).")
      .def("check", [](const PyContext& self) { self.get().throw_if_failed(); },
           "Raises the error that finished this Context, if any.")
      .def("close", &PyContext::close,
           "Drops this handle; the connections close once no Work or split child needs them. Idempotent.")
      .def_property_readonly("closed", &PyContext::closed)
      .def(
          "_shared_context",
          [](const PyContext& self) {
            // Other native code of the process (chorus.tensorflow's op library)
            // copies the std::shared_ptr out and so shares this Context.
            return py::capsule(new std::shared_ptr<Context>(self.shared()), "chorus.Context",
                               [](PyObject* capsule) {
                                 delete static_cast<std::shared_ptr<Context>*>(
                                     PyCapsule_GetPointer(capsule, "chorus.Context"));
                               });
          },
          "A capsule named chorus.Context holding a std::shared_ptr<chorus::Context> to this Context, for "
          "native code linked to the same libchorus.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyContext& self, const py::args&) { self.close(); })
      .def("__repr__", [](const PyContext& self) {
        if (self.closed()) return std::string("<chorus.Context closed>");
        return "<chorus.Context rank " + std::to_string(self.get().rank()) + " of " +
               std::to_string(self.get().size()) + ">";
      });
  return context;
}

}  // namespace chorus::python
