// The environment a launcher (or a user) hands a rank: which launcher, rank,
// size, store and job id (rendezvous/launch_env.cc), the CHORUS_* settings
// (base/config.cc, Config::from_environment) and what connect() parses out
// of two of them: CHORUS_LINK_MODEL (base/link_model.cc) and CHORUS_ALGO
// (algorithms/selection/selection.cc).
//
// Input: a list of (variable u8, value: u8 length + bytes); the variable is
// an index into the names below.
// Checks: a bad environment is refused only with InvalidArgument; the
// launcher detection agrees with a model written from launch_env.h's rules
// (which source wins, rank, size, store URL, job id), and its store URL for
// MASTER_ADDR/MASTER_PORT parses back to that host and port; the Config
// agrees with a model of config.h; a link model that parses has positive,
// finite numbers; every algorithm override names a real algorithm.
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>

#include "algorithms/selection/registry.h"
#include "algorithms/selection/selection.h"
#include "base/config.h"
#include "base/link_model.h"
#include "fuzz/fuzz_common.h"
#include "rendezvous/launch_env.h"
#include "rendezvous/store_url.h"

using namespace chorus;
using namespace chorus::fuzz;

namespace {

const char* const kLaunchNames[] = {
    "CHORUS_RANK", "CHORUS_SIZE", "CHORUS_STORE", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
    "CHORUS_JOB_ID", "TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE", "SLURM_JOB_ID", "SLURM_STEP_ID"};
// Read by Config::from_environment through getenv.
const char* const kConfigNames[] = {"CHORUS_TRANSPORT", "CHORUS_SOCKET_IFNAME", "CHORUS_HOST_ID",
                                    "CHORUS_STREAMS",   "CHORUS_POLL_US",       "CHORUS_LINK_MODEL",
                                    "CHORUS_ALGO",      "CHORUS_SHM_SINGLE_COPY"};
constexpr size_t kLaunchCount = std::size(kLaunchNames);
constexpr size_t kConfigCount = std::size(kConfigNames);

using Environment = std::map<std::string, std::string>;

// Set and not empty, as the rules read it.
std::optional<std::string> set(const Environment& env, const std::string& name) {
  auto found = env.find(name);
  if (found == env.end() || found->second.empty()) return std::nullopt;
  return found->second;
}

// Decimal, an optional '-', nothing else, within T's range: written out, not from_chars.
template <class T>
std::optional<T> integer(const std::string& text) {
  size_t at = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) at = 1;
  if (at == text.size()) return std::nullopt;
  __int128 value = 0;
  for (; at < text.size(); ++at) {
    if (text[at] < '0' || text[at] > '9') return std::nullopt;
    value = value * 10 + (text[at] - '0');
    if (value > static_cast<__int128>(std::numeric_limits<T>::max()) + 1) return std::nullopt;
  }
  if (negative) value = -value;
  if (value > std::numeric_limits<T>::max() || value < std::numeric_limits<T>::min()) return std::nullopt;
  return static_cast<T>(value);
}

// launch_env.h's rules, written again; nullopt: InvalidArgument.
std::optional<LaunchEnv> model_launch(const Environment& env) {
  struct Source {
    const char *name, *rank, *size;
  };
  const Source sources[] = {{"CHORUS_*", "CHORUS_RANK", "CHORUS_SIZE"},
                            {"torchrun", "RANK", "WORLD_SIZE"},
                            {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"PMI", "PMI_RANK", "PMI_SIZE"},
                            {"Slurm", "SLURM_PROCID", "SLURM_NTASKS"}};
  for (const Source& source : sources) {
    auto rank = set(env, source.rank);
    auto size = set(env, source.size);
    if (!rank && !size) continue;
    if (!rank || !size) return std::nullopt;
    auto r = integer<int>(*rank);
    auto s = integer<int>(*size);
    if (!r || !s || *s < 1 || *r < 0 || *r >= *s) return std::nullopt;
    LaunchEnv launch;
    launch.source = source.name;
    launch.rank = *r;
    launch.size = *s;
    const std::string name = source.name;
    if (auto store = set(env, "CHORUS_STORE")) {
      launch.store = *store;
    } else {
      if (name == "CHORUS_*") return std::nullopt;
      auto address = set(env, "MASTER_ADDR");
      auto port_text = set(env, "MASTER_PORT");
      if (!address || !port_text) return std::nullopt;
      auto port = integer<int>(*port_text);
      if (!port || *port < 1 || *port > 65535) return std::nullopt;
      const bool bracket = address->find(':') != std::string::npos && (*address)[0] != '[';
      launch.store = "tcp://" + (bracket ? "[" + *address + "]" : *address) + ":" + std::to_string(*port);
    }
    if (auto id = set(env, "CHORUS_JOB_ID")) {
      launch.job_id = *id;
    } else if (name == "torchrun") {
      launch.job_id = set(env, "TORCHELASTIC_RUN_ID").value_or("");
    } else if (name == "Open MPI") {
      launch.job_id = set(env, "PMIX_NAMESPACE").value_or("");
    } else if (name == "Slurm" && set(env, "SLURM_JOB_ID")) {
      launch.job_id = *set(env, "SLURM_JOB_ID");
      if (auto step = set(env, "SLURM_STEP_ID")) launch.job_id += "." + *step;
    }
    return launch;
  }
  return std::nullopt;
}

// config.h's rules, written again; nullopt: InvalidArgument.
std::optional<Config> model_config(const Environment& env) {
  Config config;
  if (auto text = set(env, "CHORUS_TRANSPORT")) {
    std::string item;
    auto flush = [&] {
      size_t first = item.find_first_not_of(' ');
      size_t last = item.find_last_not_of(' ');
      if (first != std::string::npos) config.transports.push_back(item.substr(first, last - first + 1));
      item.clear();
    };
    for (char c : *text) {
      if (c == ',') flush();
      else item += c;
    }
    flush();
    if (config.transports.empty()) return std::nullopt;
  }
  config.socket_interface = set(env, "CHORUS_SOCKET_IFNAME").value_or("");
  config.host_id = set(env, "CHORUS_HOST_ID").value_or("");
  if (auto text = set(env, "CHORUS_STREAMS")) {
    auto streams = integer<int>(*text);
    if (!streams || *streams < 1 || *streams > 16) return std::nullopt;
    config.streams = *streams;
  }
  if (auto text = set(env, "CHORUS_POLL_US")) {
    auto us = integer<long long>(*text);
    if (!us || *us < 0) return std::nullopt;
    config.poll_time = std::chrono::microseconds(*us);
  }
  config.link_model = set(env, "CHORUS_LINK_MODEL").value_or("");
  config.algorithms = set(env, "CHORUS_ALGO").value_or("");
  if (auto text = set(env, "CHORUS_SHM_SINGLE_COPY")) {
    if (*text != "0" && *text != "1") return std::nullopt;
    config.shm_single_copy = *text == "1";
  }
  return config;
}

bool plain_host(const std::string& host) {
  if (host.empty() || host[0] == '[') return false;
  for (char c : host)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':')) return false;
  return true;
}

void check_launch(const Environment& env) {
  const EnvLookup lookup = [&](std::string_view name) -> std::optional<std::string> {
    auto found = env.find(std::string(name));
    if (found == env.end()) return std::nullopt;
    return found->second;
  };
  LaunchEnv launch;
  const std::string kind = run_expecting_chorus_errors("detect_launch_env", [&] { launch = detect_launch_env(lookup); });
  FUZZ_CHECK(kind.empty() || kind == "InvalidArgument", "detect_launch_env refused with " + kind);
  const std::optional<LaunchEnv> model = model_launch(env);
  FUZZ_CHECK(kind.empty() == model.has_value(),
             kind.empty() ? "detect_launch_env accepted what the rules refuse: " + describe(launch)
                          : "detect_launch_env refused what the rules accept: " + describe(*model));
  if (!model) return;
  FUZZ_CHECK(launch.source == model->source && launch.rank == model->rank && launch.size == model->size &&
                 launch.store == model->store && launch.job_id == model->job_id,
             "detect_launch_env: " + describe(launch) + "; the rules: " + describe(*model));
  FUZZ_CHECK(launch.rank >= 0 && launch.rank < launch.size, "a rank outside [0, size)");
  if (set(env, "CHORUS_STORE")) return;
  // rank 0's store at MASTER_ADDR:MASTER_PORT, as connect opens it.
  StoreUrl url;
  const std::string url_kind = run_expecting_chorus_errors("parse_store_url", [&] { url = parse_store_url(launch.store); });
  FUZZ_CHECK(url_kind.empty() || url_kind == "InvalidArgument", "parse_store_url refused with " + url_kind);
  const std::string address = *set(env, "MASTER_ADDR");
  if (plain_host(address)) {
    FUZZ_CHECK(url_kind.empty(), "the store URL '" + launch.store + "' for a plain MASTER_ADDR does not parse");
    FUZZ_CHECK(url.scheme == "tcp" && url.host == address && url.port == *integer<int>(*set(env, "MASTER_PORT")),
               "the store URL '" + launch.store + "' does not name MASTER_ADDR:MASTER_PORT");
  }
}

void check_config(const Environment& env) {
  for (const char* name : kConfigNames) ::unsetenv(name);
  for (const char* name : kConfigNames)
    if (auto found = env.find(name); found != env.end()) ::setenv(name, found->second.c_str(), 1);
  Config config;
  const std::string kind = run_expecting_chorus_errors("Config::from_environment", [&] {
    config = Config::from_environment();
  });
  for (const char* name : kConfigNames) ::unsetenv(name);
  FUZZ_CHECK(kind.empty() || kind == "InvalidArgument", "Config::from_environment refused with " + kind);
  const std::optional<Config> model = model_config(env);
  FUZZ_CHECK(kind.empty() == model.has_value(), kind.empty() ? "Config accepted what config.h refuses"
                                                             : "Config refused what config.h accepts");
  if (!model) return;
  FUZZ_CHECK(config.transports == model->transports && config.socket_interface == model->socket_interface &&
                 config.host_id == model->host_id && config.streams == model->streams &&
                 config.poll_time == model->poll_time && config.link_model == model->link_model &&
                 config.algorithms == model->algorithms && config.shm_single_copy == model->shm_single_copy,
             "Config::from_environment differs from config.h's rules");

  // What connect does with two of them.
  for (LinkLevel level : {LinkLevel::local, LinkLevel::remote}) {
    LinkModel link;
    const std::string link_kind = run_expecting_chorus_errors("apply_link_model_override", [&] {
      link = apply_link_model_override(config.link_model, level, LinkModel{});
    });
    FUZZ_CHECK(link_kind.empty() || link_kind == "InvalidArgument", "the link model refused with " + link_kind);
    if (!link_kind.empty()) continue;
    FUZZ_CHECK(link.alpha_seconds > 0 && std::isfinite(link.alpha_seconds) && link.beta_seconds_per_byte > 0 &&
                   std::isfinite(link.beta_seconds_per_byte),
               cat("CHORUS_LINK_MODEL='", config.link_model, "' gives alpha ", link.alpha_seconds, " s, beta ",
                   link.beta_seconds_per_byte, " s/byte"));
  }
  std::map<algorithms::Collective, std::string> overrides;
  const std::string algo_kind = run_expecting_chorus_errors("parse_algorithm_overrides", [&] {
    overrides = algorithms::parse_algorithm_overrides(config.algorithms);
  });
  FUZZ_CHECK(algo_kind.empty() || algo_kind == "InvalidArgument", "CHORUS_ALGO refused with " + algo_kind);
  for (const auto& [collective, name] : overrides)
    FUZZ_CHECK(algorithms::find_candidate(collective, name) != nullptr, "an override names no candidate: " + name);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  Environment env;
  while (!in.empty()) {
    const size_t index = in.u8() % (kLaunchCount + kConfigCount);
    std::string value = in.short_text();
    if (index < kLaunchCount) {
      env[kLaunchNames[index]] = value;
    } else {
      // An environment variable ends at its first NUL.
      env[kConfigNames[index - kLaunchCount]] = value.substr(0, value.find('\0'));
    }
  }
  check_launch(env);
  check_config(env);
  return 0;
}
