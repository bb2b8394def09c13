// chorus-run's last line names the rank that failed first (issue 45), not
// the first survivor to exit after noticing it: 4 ranks of chorus-bench
// looping on a small allreduce, one of them stopped or killed by pid, ten
// runs each. A rank stopped behind a shell (which the launcher cannot see
// stopped) is named from the surviving ranks' own reports.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test/launch/child_process.h"

using chorus::test::ChildProcess;

namespace {

constexpr int kRanks = 4;
constexpr int kRuns = 10;

// The children of `parent`, from every process's stat line.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  DIR* proc = ::opendir("/proc");
  if (!proc) return children;
  while (dirent* entry = ::readdir(proc)) {
    const std::string name = entry->d_name;
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat("/proc/" + name + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so read after its ')'.
    std::istringstream rest(line.substr(line.rfind(')') + 1));
    std::string state;
    pid_t ppid = 0;
    if (rest >> state >> ppid && ppid == parent) children.push_back(static_cast<pid_t>(std::stol(name)));
  }
  ::closedir(proc);
  return children;
}

// Each rank's pid, from CHORUS_RANK in its environment.
std::map<int, pid_t> rank_pids(pid_t launcher) {
  std::map<int, pid_t> ranks;
  for (pid_t pid : children_of(launcher)) {
    std::ifstream environ("/proc/" + std::to_string(pid) + "/environ");
    std::string variable;
    while (std::getline(environ, variable, '\0'))
      if (variable.rfind("CHORUS_RANK=", 0) == 0) ranks[std::stoi(variable.substr(12))] = pid;
  }
  return ranks;
}

std::string last_line(const std::string& output) {
  std::istringstream lines(output);
  std::string line, last;
  while (std::getline(lines, line))
    if (!line.empty()) last = line;
  return last;
}

std::vector<std::string> looping_bench(bool behind_a_shell) {
  const std::string bench = chorus::test::binary_from_environment("CHORUS_BENCH");
  const std::vector<std::string> loop = {bench, "-b", "8", "-e", "8", "--iters", "1000000000", "--rounds", "1",
                                         "--warmup", "0"};
  std::vector<std::string> argv = {chorus::test::binary_from_environment("CHORUS_RUN"), "-n", std::to_string(kRanks),
                                   "--grace", "0.3", "--"};
  if (!behind_a_shell) {
    argv.insert(argv.end(), loop.begin(), loop.end());
    return argv;
  }
  // The shell stays the rank (no exec); the benchmark is its child.
  std::string script;
  for (const std::string& word : loop) script += word + " ";
  argv.insert(argv.end(), {"/bin/sh", "-c", script + "; exit $?"});
  return argv;
}

// Starts the job, waits until every rank is in its loop, hands `act` the
// rank pids, and returns chorus-run's exit status.
template <typename Act>
int run_and(bool behind_a_shell, ChildProcess& run, Act act) {
  REQUIRE(run.wait_for_output("# chorus-bench: allreduce", 1, std::chrono::seconds(30)));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::map<int, pid_t> ranks = rank_pids(run.pid());
  REQUIRE(ranks.size() == kRanks);
  if (behind_a_shell)
    for (auto& [rank, pid] : ranks) {
      const std::vector<pid_t> children = children_of(pid);
      REQUIRE(children.size() == 1);
      pid = children[0];
    }
  act(ranks);
  return run.wait(std::chrono::seconds(30));
}

}  // namespace

TEST_CASE("chorus-run names a SIGSTOPped rank as the one that failed first, 10 runs of 10", "[launch][first-failure]") {
  for (int attempt = 0; attempt < kRuns; ++attempt) {
    const int target = attempt % kRanks;
    ChildProcess run(looping_bench(false), {"CHORUS_TIMEOUT=1"});
    const int status = run_and(false, run, [&](const std::map<int, pid_t>& ranks) { ::kill(ranks.at(target), SIGSTOP); });
    INFO("run " << attempt << ", rank " << target << " stopped:\n" << run.output());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) != 0);
    const std::string line = last_line(run.output());
    CHECK_THAT(line, Catch::StartsWith("chorus-run: rank " + std::to_string(target) +
                                       " failed first: stopped by SIGSTOP ("));
    CHECK_THAT(line, Catch::EndsWith("report it lost or unresponsive)") || Catch::EndsWith("reports it lost or "
                                                                                            "unresponsive)"));
  }
}

TEST_CASE("chorus-run names a SIGKILLed rank as the one that failed first, 10 runs of 10", "[launch][first-failure]") {
  for (int attempt = 0; attempt < kRuns; ++attempt) {
    const int target = (attempt + 1) % kRanks;
    ChildProcess run(looping_bench(false), {"CHORUS_TIMEOUT=1"});
    const int status = run_and(false, run, [&](const std::map<int, pid_t>& ranks) { ::kill(ranks.at(target), SIGKILL); });
    INFO("run " << attempt << ", rank " << target << " killed:\n" << run.output());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 128 + SIGKILL);
    CHECK_THAT(last_line(run.output()), Catch::StartsWith("chorus-run: rank " + std::to_string(target) +
                                                          " failed first: killed by SIGKILL"));
  }
}

TEST_CASE("a rank the launcher cannot see stopped is named from the other ranks' reports", "[launch][first-failure]") {
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int target = (attempt + 2) % kRanks;
    ChildProcess run(looping_bench(true), {"CHORUS_TIMEOUT=1"});
    pid_t stopped = -1;
    const int status = run_and(true, run, [&](const std::map<int, pid_t>& ranks) {
      stopped = ranks.at(target);
      ::kill(stopped, SIGSTOP);
    });
    INFO("run " << attempt << ", rank " << target << "'s benchmark stopped behind its shell:\n" << run.output());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) != 0);
    CHECK_THAT(last_line(run.output()), Catch::Matches("chorus-run: rank " + std::to_string(target) +
                                                       " failed first: ranks? [0-9, ]+ reports? it lost or "
                                                       "unresponsive; it was killed by SIG[A-Z]+ when the launcher "
                                                       "stopped the job"));
    // Its shell is gone; the stopped benchmark goes with its orphaned process group, or here.
    ::kill(stopped, SIGKILL);
  }
}
