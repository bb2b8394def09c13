// Logging to stderr, filtered by CHORUS_LOG=error|warn|info|debug|trace (default warn).
// Every line carries the rank it concerns so interleaved output of many ranks reads.
#pragma once

#include <optional>
#include <sstream>
#include <string>
#include <string_view>

namespace chorus {

enum class LogLevel : int { error = 0, warn = 1, info = 2, debug = 3, trace = 4 };

LogLevel log_level();
// A CHORUS_LOG value as a level: error, warn (or warning), info, debug or
// trace, in any case (empty: the default, warn); nullopt for anything else,
// which connect refuses (base/config.h) like any other malformed setting.
std::optional<LogLevel> parse_log_level(std::string_view name);
inline bool log_enabled(LogLevel level) { return static_cast<int>(level) <= static_cast<int>(log_level()); }
void log_line(LogLevel level, int rank, std::string_view message);

// Builds a string from any streamable pieces: cat("rank ", r, ": ", what).
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

}  // namespace chorus

// Arguments are only evaluated when the level is enabled.
#define CHORUS_LOG(level, rank, ...)                                             \
  do {                                                                           \
    if (::chorus::log_enabled(::chorus::LogLevel::level))                        \
      ::chorus::log_line(::chorus::LogLevel::level, (rank), ::chorus::cat(__VA_ARGS__)); \
  } while (0)
