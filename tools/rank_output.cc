#include "tools/rank_output.h"

#include <cerrno>
#include <string_view>
#include <unistd.h>

#include "base/log.h"

namespace chorus::tools {
namespace {

// A rank that prints megabytes without a newline must not grow the launcher
// without bound: past this, the tail is written as a line of its own.
constexpr size_t kLongestHeldLine = 64 * 1024;
// Where a chorus log line's tag starts at the latest (after its timestamp).
constexpr size_t kLongestTimestamp = 32;

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return;  // our own stdout is gone (closed pipe): nothing left to tell
    }
    text.remove_prefix(static_cast<size_t>(written));
  }
}

}  // namespace

PrefixedLineWriter::PrefixedLineWriter(int rank, int destination_fd)
    : prefix_(cat("[rank ", rank, "] ")), own_log_tag_(cat(" [chorus rank ", rank, " ")),
      destination_fd_(destination_fd) {}

void PrefixedLineWriter::feed(std::span<const char> bytes) {
  pending_.append(bytes.data(), bytes.size());
  size_t start = 0;
  for (size_t newline = pending_.find('\n'); newline != std::string::npos; newline = pending_.find('\n', start)) {
    write_line(std::string_view(pending_).substr(start, newline - start));
    start = newline + 1;
  }
  pending_.erase(0, start);
  if (pending_.size() >= kLongestHeldLine) finish();
}

void PrefixedLineWriter::finish() {
  if (pending_.empty()) return;
  write_line(pending_);
  pending_.clear();
}

void PrefixedLineWriter::write_line(std::string_view line_without_newline) {
  // One write per line, so lines of different ranks never interleave mid-line
  // (each destination is written by this launcher thread only).
  std::string line;
  line.reserve(prefix_.size() + line_without_newline.size() + 1);
  // chorus's own log lines already name this rank after their timestamp
  // ("2026-...Z [chorus rank 3 WARN] ..."): a second prefix says nothing new.
  // A line naming another rank (a sub-group's numbering) keeps the prefix.
  const size_t tag = line_without_newline.find(own_log_tag_);
  const bool own_log_line = tag != std::string_view::npos && tag <= kLongestTimestamp;
  if (!own_log_line) line.append(prefix_);
  line.append(line_without_newline).push_back('\n');
  write_all(destination_fd_, line);
}

}  // namespace chorus::tools
