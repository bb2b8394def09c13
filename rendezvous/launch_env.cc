// Launcher detection: a table of launchers, tried in order, each naming the
// variables that carry rank and size and where its job id comes from.
#include "rendezvous/launch_env.h"

#include <array>
#include <charconv>

#include "base/error.h"
#include "base/log.h"

namespace chorus {
namespace {

struct LauncherVariables {
  const char* source;
  const char* rank;
  const char* size;
  // Only CHORUS_* insists on CHORUS_STORE; other launchers know nothing of a
  // store, so they fall back to rank 0 hosting one at MASTER_ADDR:MASTER_PORT.
  bool store_must_be_chorus_store;
};

// Order matters: an explicit CHORUS_* setting beats whatever launched us,
// and torchrun's generic RANK beats the launchers that torchrun may itself
// run under (srun torchrun ... sets both RANK and SLURM_PROCID).
constexpr std::array<LauncherVariables, 5> kLaunchers{{
    {"CHORUS_*", "CHORUS_RANK", "CHORUS_SIZE", true},
    {"torchrun", "RANK", "WORLD_SIZE", false},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", false},
    {"PMI", "PMI_RANK", "PMI_SIZE", false},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", false},
}};

std::optional<std::string> lookup_set(const EnvLookup& lookup, std::string_view name) {
  std::optional<std::string> value = lookup(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

int parse_integer(const LauncherVariables& launcher, std::string_view name, const std::string& text) {
  int value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    throw InvalidArgument(cat(launcher.source, " launch: ", name, "='", text, "' is not an integer"));
  return value;
}

// MASTER_ADDR may be an IPv6 literal, which a URL must bracket.
std::string tcp_url(const std::string& host, int port) {
  bool bracket = host.find(':') != std::string::npos && host.front() != '[';
  return cat("tcp://", bracket ? "[" : "", host, bracket ? "]" : "", ":", port);
}

std::string store_url(const LauncherVariables& launcher, const EnvLookup& lookup) {
  if (auto store = lookup_set(lookup, "CHORUS_STORE")) return *store;
  if (launcher.store_must_be_chorus_store)
    throw InvalidArgument(cat(launcher.source, " launch: CHORUS_RANK and CHORUS_SIZE are set but CHORUS_STORE is not "
                              "(expected tcp://host:port, file:///dir or redis://host:port)"));
  std::optional<std::string> address = lookup_set(lookup, "MASTER_ADDR");
  std::optional<std::string> port_text = lookup_set(lookup, "MASTER_PORT");
  if (!address && !port_text)
    throw InvalidArgument(cat(launcher.source, " launch (", launcher.rank, ", ", launcher.size,
                              " set): no rendezvous store: set CHORUS_STORE (tcp://host:port, file:///dir or "
                              "redis://host:port), or MASTER_ADDR and MASTER_PORT for rank 0 to host one"));
  if (!address)
    throw InvalidArgument(cat(launcher.source, " launch: MASTER_PORT is set but MASTER_ADDR is not (the host of rank 0, "
                              "which serves the rendezvous store)"));
  if (!port_text)
    throw InvalidArgument(cat(launcher.source, " launch: MASTER_ADDR is set but MASTER_PORT is not (the port rank 0 "
                              "serves the rendezvous store on)"));
  int port = parse_integer(launcher, "MASTER_PORT", *port_text);
  if (port < 1 || port > 65535)
    throw InvalidArgument(cat(launcher.source, " launch: MASTER_PORT=", port, " is not a TCP port (1..65535)"));
  return tcp_url(*address, port);
}

std::string job_id(const LauncherVariables& launcher, const EnvLookup& lookup) {
  if (auto id = lookup_set(lookup, "CHORUS_JOB_ID")) return *id;
  std::string_view source = launcher.source;
  if (source == "torchrun") return lookup_set(lookup, "TORCHELASTIC_RUN_ID").value_or("");
  if (source == "Open MPI") return lookup_set(lookup, "PMIX_NAMESPACE").value_or("");
  if (source == "Slurm") {
    std::optional<std::string> job = lookup_set(lookup, "SLURM_JOB_ID");
    if (!job) return "";
    // Each srun in one allocation is a step with its own ranks.
    std::optional<std::string> step = lookup_set(lookup, "SLURM_STEP_ID");
    return step ? cat(*job, ".", *step) : *job;
  }
  return "";
}

}  // namespace

LaunchEnv detect_launch_env(const EnvLookup& lookup) {
  for (const LauncherVariables& launcher : kLaunchers) {
    std::optional<std::string> rank_text = lookup_set(lookup, launcher.rank);
    std::optional<std::string> size_text = lookup_set(lookup, launcher.size);
    if (!rank_text && !size_text) continue;
    if (!size_text)
      throw InvalidArgument(cat(launcher.source, " launch: ", launcher.rank, "=", *rank_text, " is set but ",
                                launcher.size, " is not"));
    if (!rank_text)
      throw InvalidArgument(cat(launcher.source, " launch: ", launcher.size, "=", *size_text, " is set but ",
                                launcher.rank, " is not"));
    LaunchEnv launch;
    launch.source = launcher.source;
    launch.rank = parse_integer(launcher, launcher.rank, *rank_text);
    launch.size = parse_integer(launcher, launcher.size, *size_text);
    if (launch.size < 1)
      throw InvalidArgument(cat(launcher.source, " launch: ", launcher.size, "=", launch.size, " must be at least 1"));
    if (launch.rank < 0 || launch.rank >= launch.size)
      throw InvalidArgument(cat(launcher.source, " launch: ", launcher.rank, "=", launch.rank, " is out of range for ",
                                launcher.size, "=", launch.size, " (expected 0 to ", launch.size - 1, ")"));
    launch.store = store_url(launcher, lookup);
    launch.job_id = job_id(launcher, lookup);
    return launch;
  }
  throw InvalidArgument(
      "connect_from_env: no launcher environment found: set CHORUS_RANK, CHORUS_SIZE and CHORUS_STORE "
      "(chorus-run does), or run under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), mpirun "
      "(OMPI_COMM_WORLD_RANK/SIZE or PMI_RANK/SIZE) or srun (SLURM_PROCID/NTASKS) with CHORUS_STORE or "
      "MASTER_ADDR/MASTER_PORT; see the README");
}

std::string describe(const LaunchEnv& launch) {
  return cat(launch.source, ": rank ", launch.rank, " of ", launch.size, ", store ", launch.store, ", job id ",
             launch.job_id.empty() ? "(none)" : launch.job_id);
}

}  // namespace chorus
