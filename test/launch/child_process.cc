#include "test/launch/child_process.h"

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <netinet/in.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace chorus::test {
namespace {

// The test itself might run under a launcher (CI inside Slurm, say); its
// children must see only the variables each test gives them.
bool is_launcher_variable(std::string_view entry) {
  for (std::string_view prefix :
       {"CHORUS_", "RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT=",
        "TORCHELASTIC_", "OMPI_", "PMI_", "PMIX_", "SLURM_"}) {
    if (entry.starts_with(prefix)) return true;
  }
  return false;
}

using Clock = std::chrono::steady_clock;

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_environment) {
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry)
    if (!is_launcher_variable(*entry)) environment.emplace_back(*entry);
  for (const auto& variable : extra_environment) environment.push_back(variable);
  std::vector<char*> envp, args;
  for (auto& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::execvpe(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  output_fd_ = pipe_fds[0];
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (output_fd_ >= 0) ::close(output_fd_);
}

bool ChildProcess::read_some(std::chrono::milliseconds timeout) {
  if (output_fd_ < 0) return false;
  pollfd fd{output_fd_, POLLIN, 0};
  int ready = ::poll(&fd, 1, static_cast<int>(std::max<long long>(timeout.count(), 0)));
  if (ready <= 0) return true;
  char buffer[4096];
  ssize_t got = ::read(output_fd_, buffer, sizeof(buffer));
  if (got > 0) {
    output_.append(buffer, static_cast<size_t>(got));
    return true;
  }
  if (got < 0 && errno == EINTR) return true;
  ::close(output_fd_);
  output_fd_ = -1;
  return false;
}

bool ChildProcess::wait_for_output(std::string_view text, size_t times, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (count_occurrences(output_, text) < times) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    if (!read_some(left)) return count_occurrences(output_, text) >= times;
  }
  return true;
}

int ChildProcess::wait(std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    if (output_fd_ >= 0) {
      read_some(std::min(left, std::chrono::milliseconds(50)));
      continue;
    }
    int status = 0;
    pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      pid_ = -1;
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return -1;
}

size_t count_occurrences(std::string_view haystack, std::string_view text) {
  size_t count = 0;
  for (size_t at = haystack.find(text); at != std::string_view::npos; at = haystack.find(text, at + text.size()))
    ++count;
  return count;
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw std::runtime_error("cannot find a free port");
  ::close(fd);
  return ntohs(address.sin_port);
}

TemporaryDirectory::TemporaryDirectory() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/chorus-launch-test-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TemporaryDirectory::~TemporaryDirectory() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string binary_from_environment(const char* variable) {
  const char* path = std::getenv(variable);
  if (path == nullptr || *path == '\0')
    throw std::runtime_error(std::string(variable) + " is not set (meson test sets it to the built binary)");
  return path;
}

}  // namespace chorus::test
