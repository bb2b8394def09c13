// Counting what a test's process writes to stderr while it runs something:
// the log-flood tests (garbage connections on a listener or a store) count
// the warning lines the flood cost.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>

namespace chorus::test {

// Runs `flood` with this process's stderr going to a file; returns the
// lines written meanwhile that contain `needle`.
inline size_t stderr_lines_during(const std::function<void()>& flood, const std::string& needle) {
  char path[] = "/tmp/chorus-stderr-lines.XXXXXX";
  const int file = ::mkstemp(path);
  if (file < 0) throw std::runtime_error("mkstemp failed");
  ::unlink(path);
  std::fflush(stderr);
  const int saved = ::dup(2);
  ::dup2(file, 2);
  flood();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string text;
  char chunk[4096];
  ::lseek(file, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(file, chunk, sizeof chunk)) > 0;) text.append(chunk, static_cast<size_t>(n));
  ::close(file);
  size_t lines = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++lines;
  return lines;
}

}  // namespace chorus::test
