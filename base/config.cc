// The one place that reads the environment (see config.h).
#include "base/config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <charconv>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/log.h"

namespace chorus {
namespace {

// Connections per pair of ranks a Context accepts (CHORUS_STREAMS).
constexpr int kMaxStreams = 16;

std::optional<std::string> variable(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

template <class Integer>
std::optional<Integer> integer(std::string_view text) {
  Integer value{};
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}


// A variable holding a decimal number of seconds, up to a year (deadlines
// are steady_clock::now() + it), zero allowed or not; `range` says what is
// accepted in the error.
std::chrono::milliseconds seconds_variable(std::string_view name, const std::string& text, bool zero_allowed,
                                           std::string_view range) {
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str(), &end);
  const bool in_range = zero_allowed ? seconds >= 0 : seconds > 0;
  if (end == text.c_str() || *end != '\0' || !in_range || seconds > 365.0 * 24 * 3600)
    throw InvalidArgument(cat(name, "='", text, "' is not a number of seconds (", range, ")"));
  return std::chrono::milliseconds(std::llround(seconds * 1000));
}

// Two launcher variables that both hold the same count (a malformed one says nothing).
bool equal_counts(std::string_view local_name, std::string_view global_name) {
  const std::optional<std::string> local = variable(local_name);
  const std::optional<std::string> global = variable(global_name);
  if (!local || !global) return false;
  const std::optional<long long> local_count = integer<long long>(*local);
  return local_count && *local_count > 0 && local_count == integer<long long>(*global);
}

JobPlacement placement_from_environment() {
  JobPlacement placement;
  placement.store_host = variable("MASTER_ADDR").value_or("");
  placement.one_host = equal_counts("LOCAL_WORLD_SIZE", "WORLD_SIZE") ||
                       equal_counts("OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE") ||
                       variable("SLURM_JOB_NUM_NODES") == std::optional<std::string>("1");
  return placement;
}

// Secrets from the environment shorter than this are refused: an HMAC key
// is only as strong as it is long, and a typed word is guessable.
// (ConnectOptions::secret and the API's JobSecret take any length: a program
// that passes one chose it.)
constexpr size_t kShortSecretBytes = 16;
// A secret file is a key, not a document.
constexpr size_t kMaxSecretFileBytes = 4096;


}  // namespace

std::vector<std::string> comma_list(std::string_view text) {
  std::vector<std::string> items;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) items.emplace_back(item);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return items;
}

JobSecret secret_from_environment() {
  std::optional<std::string> text = variable("CHORUS_SECRET");
  std::optional<std::string> file = variable("CHORUS_SECRET_FILE");
  if (text && file)
    throw InvalidArgument("CHORUS_SECRET and CHORUS_SECRET_FILE are both set: set one of them");
  if (file) {
    std::ifstream in(*file, std::ios::binary);
    if (!in) throw InvalidArgument(cat("CHORUS_SECRET_FILE='", *file, "' cannot be read: ", std::strerror(errno)));
    // A secret other users can read is theirs too, and one they can write
    // is theirs to choose: refused, as ssh refuses such a private key.
    // (Only for a file: a pipe, as from <(...), is its process's alone.)
    struct stat info {};
    if (::stat(file->c_str(), &info) == 0 && S_ISREG(info.st_mode) && (info.st_mode & 077) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info.st_mode & 07777));
      throw InvalidArgument(cat("CHORUS_SECRET_FILE='", *file, "' may be read or written by other users (mode ", mode,
                                "): chmod 600 it (chorus-run's own secret files are 0600 in a 0700 directory)"));
    }
    std::string contents(kMaxSecretFileBytes + 1, '\0');
    in.read(contents.data(), static_cast<std::streamsize>(contents.size()));
    contents.resize(static_cast<size_t>(in.gcount()));
    if (contents.size() > kMaxSecretFileBytes)
      throw InvalidArgument(cat("CHORUS_SECRET_FILE='", *file, "' is longer than ", kMaxSecretFileBytes,
                                " bytes: is it really the job's secret?"));
    if (!contents.empty() && contents.back() == '\n') contents.pop_back();
    if (!contents.empty() && contents.back() == '\r') contents.pop_back();
    if (contents.empty()) throw InvalidArgument(cat("CHORUS_SECRET_FILE='", *file, "' is empty"));
    text = std::move(contents);
  }
  if (!text) return JobSecret();
  if (text->size() < kShortSecretBytes)
    throw InvalidArgument(cat(file ? "the secret in CHORUS_SECRET_FILE" : "CHORUS_SECRET", " is ", text->size(),
                              " bytes long: a job secret must be at least ", kShortSecretBytes,
                              " bytes, random (chorus-run makes 32; e.g. od -An -N32 -tx1 /dev/urandom | ",
                              "tr -d ' \\n')"));
  return JobSecret(std::move(*text));
}

std::shared_ptr<const TlsContext> tls_from_environment() {
  TlsFiles files;
  files.certificate = variable("CHORUS_TLS_CERT").value_or("");
  files.key = variable("CHORUS_TLS_KEY").value_or("");
  files.authority = variable("CHORUS_TLS_CA").value_or("");
  const int set = !files.certificate.empty() + !files.key.empty() + !files.authority.empty();
  if (set == 0) return nullptr;
  if (set != 3)
    throw InvalidArgument(cat("TLS needs CHORUS_TLS_CERT, CHORUS_TLS_KEY and CHORUS_TLS_CA together; missing:",
                              files.certificate.empty() ? " CHORUS_TLS_CERT" : "",
                              files.key.empty() ? " CHORUS_TLS_KEY" : "",
                              files.authority.empty() ? " CHORUS_TLS_CA" : ""));
  return TlsContext::load(files);
}

const char* to_string(Connections connections) {
  switch (connections) {
    case Connections::full_mesh: return "full";
    case Connections::on_demand: return "on-demand";
    case Connections::automatic: break;
  }
  return "auto";
}

std::optional<Connections> connections_from_string(std::string_view text) {
  for (Connections connections : {Connections::automatic, Connections::full_mesh, Connections::on_demand})
    if (text == to_string(connections)) return connections;
  return std::nullopt;
}

Config Config::from_environment() {
  Config config;
  check_log_setting();
  if (auto text = variable("CHORUS_TRANSPORT")) {
    config.transports = comma_list(*text);
    if (config.transports.empty())
      throw InvalidArgument(cat("CHORUS_TRANSPORT='", *text, "' names no transport (e.g. shm,tcp)"));
  }
  if (auto text = variable("CHORUS_SOCKET_IFNAME")) config.socket_interface = *text;
  config.placement = placement_from_environment();
  if (auto text = variable("CHORUS_IB_DEVICE")) config.ib_device = *text;
  if (auto text = variable("CHORUS_HOST_ID")) config.host_id = *text;
  if (auto text = variable("CHORUS_STREAMS")) {
    const std::optional<int> streams = integer<int>(*text);
    if (!streams || *streams < 1 || *streams > kMaxStreams)
      throw InvalidArgument(cat("CHORUS_STREAMS='", *text, "' is not a number of streams per peer (1..", kMaxStreams,
                                ")"));
    config.streams = *streams;
  }
  if (auto text = variable("CHORUS_CONNECTIONS")) {
    const std::optional<Connections> connections = connections_from_string(*text);
    if (!connections) throw InvalidArgument(cat("CHORUS_CONNECTIONS='", *text, "' is not full, on-demand or auto"));
    config.connections = *connections;
  }
  if (auto text = variable("CHORUS_POLL_US")) {
    const std::optional<long long> microseconds = integer<long long>(*text);
    if (!microseconds || *microseconds < 0)
      throw InvalidArgument(cat("CHORUS_POLL_US='", *text, "' is not a number of microseconds (0 or more)"));
    config.poll_time = std::chrono::microseconds(*microseconds);
  }
  if (auto text = variable("CHORUS_LINK_MODEL")) config.link_model = *text;
  if (auto text = variable("CHORUS_MEASURE_LINKS")) {
    if (*text != "0" && *text != "1")
      throw InvalidArgument(cat("CHORUS_MEASURE_LINKS='", *text, "' must be 0 or 1"));
    config.measure_links = *text == "1";
  }
  config.secret = secret_from_environment();
  config.tls = tls_from_environment();
  if (auto text = variable("CHORUS_MAX_UNEXPECTED_BYTES")) {
    const std::optional<size_t> bytes = integer<size_t>(*text);
    if (!bytes || *bytes == 0)
      throw InvalidArgument(cat("CHORUS_MAX_UNEXPECTED_BYTES='", *text, "' is not a number of bytes (1 or more)"));
    config.max_unexpected_bytes = *bytes;
  }
  if (auto text = variable("CHORUS_BOARD_BYTES")) {
    const std::optional<size_t> bytes = integer<size_t>(*text);
    if (!bytes || *bytes > kMaxBoardBytes)
      throw InvalidArgument(cat("CHORUS_BOARD_BYTES='", *text, "' is not a number of bytes from 0 (no board) to ",
                                kMaxBoardBytes));
    config.board_bytes = *bytes;
  }
  if (auto text = variable("CHORUS_ALGO")) config.algorithms = *text;
  if (auto text = variable("CHORUS_TIMEOUT"))
    config.timeout = std::max(std::chrono::milliseconds(1),
                              seconds_variable("CHORUS_TIMEOUT", *text, false,
                                               "more than 0, up to a year; e.g. 30 or 2.5"));
  if (auto text = variable("CHORUS_STALL_WARNING_S"))
    config.stall_warning =
        seconds_variable("CHORUS_STALL_WARNING_S", *text, true, "0 for no warnings, up to a year; e.g. 60 or 0.5");
  if (auto text = variable("CHORUS_TRACE")) config.trace = *text;
  if (auto text = variable("CHORUS_TRACE_STEPS")) {
    if (*text != "0" && *text != "1")
      throw InvalidArgument(cat("CHORUS_TRACE_STEPS='", *text, "' must be 0 or 1"));
    config.trace_steps = *text == "1";
  }
  if (auto text = variable("CHORUS_REQUIRE_SECRET")) {
    if (*text != "0" && *text != "1")
      throw InvalidArgument(cat("CHORUS_REQUIRE_SECRET='", *text, "' must be 0 or 1"));
    config.require_secret = *text == "1";
  }
  if (auto text = variable("CHORUS_CUDA_IPC_MESSAGES")) {
    if (*text != "0" && *text != "1")
      throw InvalidArgument(cat("CHORUS_CUDA_IPC_MESSAGES='", *text, "' must be 0 or 1"));
    config.cuda_ipc_messages = *text == "1";
  }
  if (auto text = variable("CHORUS_SHM_SINGLE_COPY")) {
    if (*text != "0" && *text != "1")
      throw InvalidArgument(cat("CHORUS_SHM_SINGLE_COPY='", *text, "' must be 0 or 1"));
    config.shm_single_copy = *text == "1";
  }
  return config;
}

std::string log_setting_from_environment() { return variable("CHORUS_LOG").value_or(""); }

void check_log_setting() {
  // The logger reads CHORUS_LOG itself and falls back to warn; a value that
  // is no level is refused here, at connect, like every other setting.
  if (auto text = variable("CHORUS_LOG"); text && !parse_log_level(*text))
    throw InvalidArgument(cat("CHORUS_LOG='", *text, "' is not a log level: it must be error, warn, info, debug or ",
                              "trace (any case)"));
}

std::optional<std::string> module_path_from_environment(std::string_view variable_name) {
  return variable(variable_name);
}

EnvLookup process_environment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

}  // namespace chorus
