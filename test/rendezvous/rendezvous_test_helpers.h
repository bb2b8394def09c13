// Helpers shared by the rendezvous tests: byte/text conversion, a temporary
// directory, stopwatches, and running a function in a forked child process.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace chorus::test {

inline std::vector<std::byte> bytes(const std::string& text) {
  std::vector<std::byte> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<std::byte>(text[i]);
  return out;
}

inline std::string text(const std::vector<std::byte>& value) {
  return std::string(reinterpret_cast<const char*>(value.data()), value.size());
}

// A blob unique to (rank, round), with a rank-dependent length (rank 0's is empty).
inline std::vector<std::byte> rank_blob(int rank, int round) {
  std::vector<std::byte> blob(static_cast<size_t>(rank) * 37);
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<std::byte>((rank * 31 + round * 7 + i) % 256);
  return blob;
}

class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    std::string pattern = (std::filesystem::temp_directory_path() / "chorus-rendezvous-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TemporaryDirectory() {
    std::error_code ignored;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ignored);
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

class Stopwatch {
 public:
  std::chrono::milliseconds elapsed() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start_);
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Runs `body`, which must throw Exception; returns its message. Anything else fails the test.
template <class Exception, class Body>
std::string thrown_message(Body body) {
  try {
    body();
  } catch (const Exception& error) {
    return error.what();
  }
  throw std::runtime_error("the expected exception was not thrown");
}

// Children must not return into Catch2: they report through their exit code.
inline void child_check(bool condition, const std::string& what) {
  if (!condition) throw std::runtime_error("check failed: " + what);
}

inline pid_t fork_child(const std::function<void()>& body) {
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int code = 0;
    try {
      body();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "child %d failed: %s\n", ::getpid(), error.what());
      code = 1;
    } catch (...) {
      code = 2;
    }
    std::fflush(nullptr);
    ::_exit(code);
  }
  return pid;
}

// The child's exit code; -1 if it was killed or still ran after `timeout` (then it is killed).
inline int wait_child(pid_t pid, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace chorus::test
