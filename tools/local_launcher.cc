#include "tools/local_launcher.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chorus/log.h"
#include "chorus/store.h"

namespace chorus::tools {
namespace {

std::string random_job_id() {
  std::random_device device;
  return cat("local-", getpid(), "-", std::hex, device());
}

std::string describe_status(int rank, int status) {
  if (WIFSIGNALED(status)) return cat("rank ", rank, " was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  return cat("rank ", rank, " exited with status ", WEXITSTATUS(status));
}

}  // namespace

LaunchResult launch_local(int ranks, const std::vector<std::string>& argv) {
  LaunchResult result;
  if (ranks < 1 || argv.empty()) {
    result.exit_code = 2;
    result.description = "nothing to launch";
    return result;
  }
  // The launcher serves the store so that no rank has to outlive the others
  // just to keep rendezvous alive.
  auto server = std::make_unique<TcpStoreServer>("127.0.0.1", 0);
  const std::string store = cat("tcp://127.0.0.1:", server->port());
  const std::string job_id = random_job_id();

  std::vector<pid_t> children(static_cast<size_t>(ranks), -1);
  for (int rank = 0; rank < ranks; ++rank) {
    pid_t pid = fork();
    if (pid < 0) {
      result.exit_code = 1;
      result.description = cat("fork failed for rank ", rank, ": ", strerror(errno));
      break;
    }
    if (pid == 0) {
      setenv("CHORUS_RANK", std::to_string(rank).c_str(), 1);
      setenv("CHORUS_SIZE", std::to_string(ranks).c_str(), 1);
      setenv("CHORUS_STORE", store.c_str(), 1);
      setenv("CHORUS_JOB_ID", job_id.c_str(), 1);
      std::vector<char*> args;
      for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
      args.push_back(nullptr);
      execvp(args[0], args.data());
      fprintf(stderr, "chorus launcher: cannot execute %s: %s\n", args[0], strerror(errno));
      _exit(127);
    }
    children[static_cast<size_t>(rank)] = pid;
  }

  // After the first failure the others get a grace period to report their
  // own view of it (usually an IoError naming the failed rank), then SIGTERM,
  // then SIGKILL: a launcher must never hang on a stuck rank.
  using namespace std::chrono;
  constexpr auto grace = seconds(5);
  steady_clock::time_point failed_at{};
  bool terminated = false;
  int running = 0;
  for (pid_t pid : children) running += pid > 0;
  while (running > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno != EINTR) break;
    if (pid <= 0) {
      if (result.first_failed_rank >= 0) {
        auto waited = steady_clock::now() - failed_at;
        if (waited > grace * 2) {
          for (pid_t other : children) if (other > 0) kill(other, SIGKILL);
        } else if (waited > grace && !terminated) {
          for (pid_t other : children) if (other > 0) kill(other, SIGTERM);
          terminated = true;
        }
      }
      usleep(2000);
      continue;
    }
    int rank = -1;
    for (size_t i = 0; i < children.size(); ++i) {
      if (children[i] == pid) rank = static_cast<int>(i);
    }
    if (rank < 0) continue;
    children[static_cast<size_t>(rank)] = -1;
    --running;
    bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (failed && result.first_failed_rank < 0) {
      result.first_failed_rank = rank;
      result.exit_code = 1;
      result.description = describe_status(rank, status);
      failed_at = steady_clock::now();
    }
  }
  return result;
}

}  // namespace chorus::tools
