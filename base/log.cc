// Logging: reads CHORUS_LOG once (any case) and writes each line to stderr
// with a single write(), so lines from many threads and ranks never
// interleave mid-line.
#include "base/log.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "base/config.h"

namespace chorus {
namespace {

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

// UTC wall-clock time to the microsecond ("2026-11-25T19:20:01.123456Z"):
// the lines of ranks on different hosts and time zones line up when sorted.
std::string timestamp_now() {
  const auto now = std::chrono::system_clock::now();
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const time_t seconds = static_cast<time_t>(micros / 1000000);
  tm utc{};
  gmtime_r(&seconds, &utc);
  char text[40];
  const size_t length = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + length, sizeof text - length, ".%06lldZ ", static_cast<long long>(micros % 1000000));
  return text;
}

std::string format_line(LogLevel level, int rank, std::string_view message) {
  const std::string timestamp = timestamp_now();

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
  // A value that is no level means the default here, quietly: the logger
  // may run before any connect and has no way to fail, and connect refuses
  // the value with InvalidArgument naming it (Config::from_environment).
  return parse_log_level(log_setting_from_environment()).value_or(LogLevel::warn);
}

}  // namespace

std::optional<LogLevel> parse_log_level(std::string_view name) {
  if (name.empty()) return LogLevel::warn;
  // Levels are words, whatever their case: DEBUG, Debug, debug.
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "error") return LogLevel::error;
  if (lower == "warn" || lower == "warning") return LogLevel::warn;
  if (lower == "info") return LogLevel::info;
  if (lower == "debug") return LogLevel::debug;
  if (lower == "trace") return LogLevel::trace;
  return std::nullopt;
}

LogLevel log_level() {
  static const LogLevel level = parse_level_from_environment();
  return level;
}

void log_line(LogLevel level, int rank, std::string_view message) {
  if (!log_enabled(level)) return;
  write_to_stderr(format_line(level, rank, message));
}

}  // namespace chorus
