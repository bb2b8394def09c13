// A real child process for the launch tests: started with an exact
// environment (the test's own, minus every launcher variable, plus the given
// ones), its stdout and stderr captured together.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace chorus::test {

class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_environment);
  ~ChildProcess();  // SIGKILLs a child still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Reads output until it contains `text` `times` times; false on timeout or EOF first.
  bool wait_for_output(std::string_view text, size_t times, std::chrono::milliseconds timeout);
  // Reads until EOF and reaps the child; returns the raw wait status. After the
  // timeout the child is SIGKILLed and -1 returned.
  int wait(std::chrono::milliseconds timeout);
  const std::string& output() const { return output_; }

 private:
  bool read_some(std::chrono::milliseconds timeout);  // false at EOF
  pid_t pid_ = -1;
  int output_fd_ = -1;
  std::string output_;
};

// How often `text` occurs in `haystack`.
size_t count_occurrences(std::string_view haystack, std::string_view text);

// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port();

// A fresh empty directory under $TMPDIR (or /tmp), removed by the destructor.
class TemporaryDirectory {
 public:
  TemporaryDirectory();
  ~TemporaryDirectory();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The path of a binary the build passed in an environment variable (meson `env:`).
std::string binary_from_environment(const char* variable);

}  // namespace chorus::test
