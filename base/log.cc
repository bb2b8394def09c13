// Logging: reads CHORUS_LOG once and writes each line to stderr with a single
// write(), so lines from many threads and ranks never interleave mid-line.
#include "base/log.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>

#include "base/config.h"

namespace chorus {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point process_start() {
  static const Clock::time_point start = Clock::now();
  return start;
}
// Touch the clock while static initialisers run, so timestamps count from
// (about) process start rather than from the first log line.
[[maybe_unused]] const Clock::time_point start_at_load = process_start();

std::string_view level_name(LogLevel level) {
  switch (level) {
    case LogLevel::error: return "ERROR";
    case LogLevel::warn: return "WARN";
    case LogLevel::info: return "INFO";
    case LogLevel::debug: return "DEBUG";
    case LogLevel::trace: return "TRACE";
  }
  return "LOG";
}

void write_to_stderr(std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = ::write(STDERR_FILENO, text.data(), text.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return;  // Nowhere left to report a failing stderr.
    }
    text.remove_prefix(static_cast<size_t>(written));
  }
}

std::string format_line(LogLevel level, int rank, std::string_view message) {
  const auto since_start = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - process_start());
  const long long micros = since_start.count();
  char timestamp[32];
  std::snprintf(timestamp, sizeof timestamp, "%lld.%06lld ", micros / 1000000, micros % 1000000);

  std::string line;
  line.reserve(message.size() + 64);
  line += timestamp;
  line += "[chorus ";
  if (rank >= 0) {
    line += "rank ";
    line += std::to_string(rank);
    line += ' ';
  }
  line += level_name(level);
  line += "] ";
  line += message;
  if (line.back() != '\n') line += '\n';
  return line;
}

LogLevel parse_level_from_environment() {
  const std::string setting = log_setting_from_environment();
  if (setting.empty()) return LogLevel::warn;
  const std::string_view name(setting);
  if (name == "error") return LogLevel::error;
  if (name == "warn" || name == "warning") return LogLevel::warn;
  if (name == "info") return LogLevel::info;
  if (name == "debug") return LogLevel::debug;
  if (name == "trace") return LogLevel::trace;
  write_to_stderr(format_line(LogLevel::warn, -1,
                              cat("CHORUS_LOG='", name, "' is not a log level (expected error, warn, info, debug "
                                                        "or trace); using warn")));
  return LogLevel::warn;
}

}  // namespace

LogLevel log_level() {
  static const LogLevel level = parse_level_from_environment();
  return level;
}

void log_line(LogLevel level, int rank, std::string_view message) {
  if (!log_enabled(level)) return;
  write_to_stderr(format_line(level, rank, message));
}

}  // namespace chorus
