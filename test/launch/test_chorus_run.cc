// chorus-run as users run it: real ranks, real signals. Checks the output
// prefixes, the exit codes, that a failing or killed rank stops the others
// within the grace period, and that SIGTERM reaches every rank.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <csignal>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "test/launch/child_process.h"

using chorus::test::ChildProcess;
using Clock = std::chrono::steady_clock;

namespace {

std::string chorus_run() { return chorus::test::binary_from_environment("CHORUS_RUN"); }
std::string launch_rank() { return chorus::test::binary_from_environment("CHORUS_LAUNCH_RANK"); }

std::vector<std::string> run_arguments(std::vector<std::string> launcher_arguments, std::vector<std::string> program) {
  std::vector<std::string> argv{chorus_run()};
  argv.insert(argv.end(), launcher_arguments.begin(), launcher_arguments.end());
  argv.push_back("--");
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

std::vector<std::string> shell(const std::string& script) { return {"/bin/sh", "-c", script}; }

// Pids the ranks printed as "pid <n>".
std::vector<pid_t> printed_pids(const std::string& output) {
  std::vector<pid_t> pids;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    auto at = line.find("pid ");
    if (at != std::string::npos) pids.push_back(static_cast<pid_t>(std::stol(line.substr(at + 4))));
  }
  return pids;
}

bool process_gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

TEST_CASE("chorus-run starts N connected ranks and prefixes every output line", "[launch][chorus-run]") {
  for (const char* store : {"tcp", "embedded", "file"}) {
    ChildProcess run(run_arguments({"-n", "3", "--store", store}, {launch_rank()}), {});
    int status = run.wait(std::chrono::seconds(30));
    INFO("store " << store << ", output:\n" << run.output());
    CHECK(status == 0);
    for (int rank = 0; rank < 3; ++rank) {
      std::string r = std::to_string(rank);
      CHECK_THAT(run.output(), Catch::Contains("[rank " + r + "] rank " + r + " of 3 via CHORUS_* (job id 'local-"));
    }
    std::istringstream lines(run.output());
    std::string line;
    while (std::getline(lines, line)) CHECK_THAT(line, Catch::StartsWith("[rank "));
  }
}

TEST_CASE("chorus-run prefixes stdout and stderr, and ends an unfinished last line", "[launch][chorus-run]") {
  ChildProcess run(run_arguments({"-n", "2"}, shell("echo out $CHORUS_RANK; echo err $CHORUS_RANK >&2; printf tail")), {});
  int status = run.wait(std::chrono::seconds(10));
  INFO(run.output());
  CHECK(status == 0);
  for (const char* rank : {"0", "1"}) {
    CHECK_THAT(run.output(), Catch::Contains(std::string("[rank ") + rank + "] out " + rank + "\n"));
    CHECK_THAT(run.output(), Catch::Contains(std::string("[rank ") + rank + "] err " + rank + "\n"));
    CHECK_THAT(run.output(), Catch::Contains(std::string("[rank ") + rank + "] tail\n"));
  }
}

TEST_CASE("a rank exiting 1 stops the others within the grace period and is named", "[launch][chorus-run]") {
  auto start = Clock::now();
  ChildProcess run(run_arguments({"-n", "3", "--grace", "1"},
                                 shell("echo pid $$; if [ \"$CHORUS_RANK\" = 1 ]; then exit 1; fi; exec sleep 60")),
                   {});
  int status = run.wait(std::chrono::seconds(20));
  double elapsed = seconds_since(start);
  INFO(run.output());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK_THAT(run.output(), Catch::Contains("chorus-run: rank 1 failed first: it exited with status 1"));
  // SIGTERM after the 1 s grace: well before the sleeps would have ended.
  CHECK(elapsed >= 0.9);
  CHECK(elapsed < 6);
  std::vector<pid_t> pids = printed_pids(run.output());
  CHECK(pids.size() == 3);
  for (pid_t pid : pids) CHECK(process_gone(pid));
}

TEST_CASE("a killed rank is named; ranks ignoring SIGTERM are SIGKILLed after twice the grace",
          "[launch][chorus-run]") {
  auto start = Clock::now();
  ChildProcess run(run_arguments({"-n", "3", "--timeout", "0.5"},
                                 shell("trap '' TERM; echo pid $$; "
                                       "if [ \"$CHORUS_RANK\" = 2 ]; then kill -9 $$; fi; exec sleep 60")),
                   {});
  int status = run.wait(std::chrono::seconds(20));
  double elapsed = seconds_since(start);
  INFO(run.output());
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGKILL);
  CHECK_THAT(run.output(), Catch::Contains("chorus-run: rank 2 was killed by signal 9"));
  CHECK_THAT(run.output(), Catch::Contains("chorus-run: rank 2 failed first: killed by SIGKILL"));
  CHECK(elapsed >= 0.9);
  CHECK(elapsed < 6);
  for (pid_t pid : printed_pids(run.output())) CHECK(process_gone(pid));
}

TEST_CASE("by default the others are stopped a second after a rank fails", "[launch][chorus-run]") {
  auto start = Clock::now();
  ChildProcess run(run_arguments({"-n", "2"}, shell("if [ \"$CHORUS_RANK\" = 0 ]; then exit 3; fi; exec sleep 60")), {});
  int status = run.wait(std::chrono::seconds(20));
  INFO(run.output());
  CHECK(WEXITSTATUS(status) == 3);
  CHECK_THAT(run.output(), Catch::Contains("SIGTERM in 1.0 s"));
  CHECK(seconds_since(start) < 3);
}

TEST_CASE("every rank learns its local rank and size, and TCP stays on loopback", "[launch][chorus-run]") {
  ChildProcess run(run_arguments({"-n", "4", "--fake-hosts", "1,3"},
                                 shell("echo place $CHORUS_RANK $CHORUS_LOCAL_RANK $CHORUS_LOCAL_SIZE $LOCAL_RANK "
                                       "$LOCAL_WORLD_SIZE $CHORUS_SOCKET_IFNAME")),
                   {});
  CHECK(run.wait(std::chrono::seconds(20)) == 0);
  INFO(run.output());
  for (const char* line : {"] place 0 0 1 0 1 lo", "] place 1 0 3 0 3 lo", "] place 2 1 3 1 3 lo",
                           "] place 3 2 3 2 3 lo"})
    CHECK_THAT(run.output(), Catch::Contains(line));
  // The caller's interface is kept.
  ChildProcess chosen(run_arguments({"-n", "1"}, shell("echo interface $CHORUS_SOCKET_IFNAME")),
                      {"CHORUS_SOCKET_IFNAME=eth7"});
  CHECK(chosen.wait(std::chrono::seconds(20)) == 0);
  CHECK_THAT(chosen.output(), Catch::Contains("] interface eth7"));
}

TEST_CASE("chorus-run hands the secret it made through an owner-only file, gone when the job ends",
          "[launch][chorus-run]") {
  ChildProcess run(run_arguments({"-n", "2"}, shell("echo secret ${CHORUS_SECRET:-none} $CHORUS_SECRET_FILE "
                                                    "$(stat -c %a \"$CHORUS_SECRET_FILE\") "
                                                    "$(stat -c %a \"$(dirname \"$CHORUS_SECRET_FILE\")\")")),
                   {});
  CHECK(run.wait(std::chrono::seconds(20)) == 0);
  INFO(run.output());
  const std::string output = run.output();
  const auto at = output.find("] secret none /");
  REQUIRE(at != std::string::npos);
  std::istringstream fields(output.substr(at + 14));
  std::string path, file_mode, directory_mode;
  fields >> path >> file_mode >> directory_mode;
  CHECK(file_mode == "600");
  CHECK(directory_mode == "700");
  CHECK(::access(path.c_str(), F_OK) != 0);  // removed with the job
  // A secret the caller gave is the ranks' as it is.
  ChildProcess given(run_arguments({"-n", "1"}, shell("echo secret ${CHORUS_SECRET_FILE:-nofile} $CHORUS_SECRET")),
                     {"CHORUS_SECRET=the-callers-own-secret-0123456789"});
  CHECK(given.wait(std::chrono::seconds(20)) == 0);
  CHECK_THAT(given.output(), Catch::Contains("] secret nofile the-callers-own-secret-0123456789"));
}

TEST_CASE("a normal job logs nothing at the default level, and a line per collective at debug",
          "[launch][chorus-run]") {
  ChildProcess quiet(run_arguments({"-n", "3"}, {launch_rank()}), {});
  CHECK(quiet.wait(std::chrono::seconds(30)) == 0);
  INFO(quiet.output());
  CHECK_THAT(quiet.output(), !Catch::Contains("[chorus"));
  ChildProcess debug(run_arguments({"-n", "2"}, {launch_rank()}), {"CHORUS_LOG=Debug"});
  CHECK(debug.wait(std::chrono::seconds(30)) == 0);
  INFO(debug.output());
  for (const char* rank : {"0", "1"})
    CHECK_THAT(debug.output(), Catch::Contains(std::string("Z [chorus rank ") + rank + " DEBUG] allreduce #0 (4099 float32): "));
  CHECK(chorus::test::count_occurrences(debug.output(), " us\n") >= 2);
}

TEST_CASE("chorus-bench --json records the version, time, hosts and settings of the run", "[launch][chorus-run]") {
  chorus::test::TemporaryDirectory directory;
  const std::string file = directory.path() + "/bench.json";
  ChildProcess run(run_arguments({"-n", "2"}, {chorus::test::binary_from_environment("CHORUS_BENCH"), "-b", "8", "-e",
                                               "64", "--iters", "2", "--check", "--json", file}),
                   {"CHORUS_POLL_US=150", "CHORUS_SECRET=a-secret-that-must-stay-out-of-the-file"});
  REQUIRE(run.wait(std::chrono::seconds(30)) == 0);
  std::ifstream in(file);
  const nlohmann::json document = nlohmann::json::parse(in);
  INFO(document.dump(2));
  CHECK(document.at("version").get<std::string>().rfind("0.", 0) == 0);
  CHECK(document.at("time").get<std::string>().size() == 20);  // 2026-11-25T19:20:01Z
  CHECK(document.at("host_names").size() == 2);
  CHECK(document.at("settings").at("dtype") == "float32");
  CHECK(document.at("settings").at("check") == true);
  CHECK(document.at("environment").at("CHORUS_POLL_US") == "150");
  CHECK(document.at("environment").at("CHORUS_SECRET") == "(set, not recorded)");
  CHECK(document.dump().find("a-secret-that-must-stay-out") == std::string::npos);
  CHECK(document.at("rows").size() == 4);
}

TEST_CASE("chorus-bench takes its timeout from CHORUS_TIMEOUT unless --timeout-ms says otherwise",
          "[launch][chorus-run]") {
  // A default of the tool's own once beat the job's variable: a stopped
  // rank was named after 61 s instead of CHORUS_TIMEOUT's 3 + 1.
  chorus::test::TemporaryDirectory directory;
  const std::string file = directory.path() + "/bench.json";
  const std::string bench = chorus::test::binary_from_environment("CHORUS_BENCH");
  for (const auto& [flag, expected] : {std::pair<std::string, int>{"", 7000}, {"4000", 4000}}) {
    std::vector<std::string> argv = {bench, "--ranks", "2", "-b", "8", "-e", "8", "--iters", "2", "--json", file};
    if (!flag.empty()) argv.insert(argv.end(), {"--timeout-ms", flag});
    ChildProcess run(argv, {"CHORUS_TIMEOUT=7"});
    INFO(run.output());
    REQUIRE(run.wait(std::chrono::seconds(30)) == 0);
    std::ifstream in(file);
    CHECK(nlohmann::json::parse(in).at("settings").at("timeout_ms") == expected);
  }
}

TEST_CASE("every tool answers --version", "[launch][chorus-run]") {
  ChildProcess run({chorus_run(), "--version"}, {});
  CHECK(run.wait(std::chrono::seconds(10)) == 0);
  CHECK_THAT(run.output(), Catch::StartsWith("chorus-run 0."));
}

TEST_CASE("SIGTERM to chorus-run is forwarded to every rank", "[launch][chorus-run]") {
  ChildProcess run(run_arguments({"-n", "3"}, shell("trap 'echo rank $CHORUS_RANK got TERM; exit 0' TERM; "
                                                     "echo ready; sleep 60 & wait")),
                   {});
  REQUIRE(run.wait_for_output("] ready", 3, std::chrono::seconds(10)));
  auto start = Clock::now();
  ::kill(run.pid(), SIGTERM);
  int status = run.wait(std::chrono::seconds(20));
  INFO(run.output());
  CHECK(seconds_since(start) < 3);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
  for (const char* rank : {"0", "1", "2"})
    CHECK_THAT(run.output(), Catch::Contains(std::string("[rank ") + rank + "] rank " + rank + " got TERM"));
  CHECK_THAT(run.output(), Catch::Contains("chorus-run: received SIGTERM; forwarding it to every rank"));
}

TEST_CASE("chorus-run refuses bad usage", "[launch][chorus-run]") {
  ChildProcess no_count({chorus_run(), "--", "true"}, {});
  const int refused = no_count.wait(std::chrono::seconds(10));
  INFO(no_count.output());
  CHECK(WIFEXITED(refused));
  CHECK(WEXITSTATUS(refused) != 0);
  ChildProcess missing(run_arguments({"-n", "2"}, {"/nonexistent/program"}), {});
  int status = missing.wait(std::chrono::seconds(10));
  CHECK(WEXITSTATUS(status) == 127);
  CHECK_THAT(missing.output(), Catch::Contains("[rank 0] cannot execute /nonexistent/program"));
}

TEST_CASE("chorus-run -n 4 chorus-bench --check and chorus-bench --ranks both verify every element",
          "[launch][chorus-run]") {
  std::string bench = chorus::test::binary_from_environment("CHORUS_BENCH");
  ChildProcess run(run_arguments({"-n", "4"}, {bench, "--op", "allreduce", "--check", "--max-bytes", "64K"}), {});
  int status = run.wait(std::chrono::seconds(60));
  INFO(run.output());
  CHECK(status == 0);
  CHECK_THAT(run.output(), Catch::Contains("[rank 0] # OK: 0 wrong elements in total"));

  ChildProcess forked({bench, "--ranks", "3", "--op", "allreduce", "--check", "--max-bytes", "4K"}, {});
  status = forked.wait(std::chrono::seconds(60));
  INFO(forked.output());
  CHECK(status == 0);
  CHECK_THAT(forked.output(), Catch::Contains("# OK: 0 wrong elements in total"));

  // In place, the ring lands its segments in scratch: every algorithm, checked.
  ChildProcess in_place({bench, "--ranks", "3", "--op", "allreduce", "--in-place", "--algo", "all", "--check",
                         "-b", "8", "-e", "1M", "-f", "32", "--iters", "3", "--rounds", "1"},
                        {});
  status = in_place.wait(std::chrono::seconds(120));
  INFO(in_place.output());
  CHECK(status == 0);
  CHECK_THAT(in_place.output(), Catch::Contains("float32 sum, checked, in place"));
  CHECK_THAT(in_place.output(), Catch::Contains("# OK: 0 wrong elements in total"));

  // --barrier times each iteration alone after a barrier, and says so.
  ChildProcess barrier({bench, "--ranks", "2", "--op", "allreduce", "--barrier", "--check", "-b", "8", "-e", "64K",
                        "-f", "64", "--iters", "3", "--rounds", "1"},
                       {});
  status = barrier.wait(std::chrono::seconds(60));
  INFO(barrier.output());
  CHECK(status == 0);
  CHECK_THAT(barrier.output(), Catch::Contains("float32 sum, checked, barrier before each iteration"));
  CHECK_THAT(barrier.output(), Catch::Contains("# OK: 0 wrong elements in total"));
}

TEST_CASE("chorus-bench --check of board_direct as processes: each reads its peers' buffers, bit-exact",
          "[launch][board]") {
  // Threads share one address space (test_board_direct.cc); here every
  // rank is a process, so each read crosses into another one's memory.
  const std::string bench = chorus::test::binary_from_environment("CHORUS_BENCH");
  for (const char* op : {"allgather", "alltoall"}) {
    CAPTURE(op);
    ChildProcess run({bench, "--ranks", "3", "--op", op, "--algo", "board_direct", "--check", "-b", "4K", "-e", "4M",
                      "-f", "16", "--iters", "3", "--rounds", "1"},
                     {});
    const int status = run.wait(std::chrono::seconds(60));
    INFO(run.output());
    // Yama's ptrace scope 1 or a seccomp filter forbids reading a sibling
    // process: the board then has no direct reads, and says why.
    if (run.output().find("cannot read each other's memory") != std::string::npos) {
      WARN("this machine forbids process_vm_readv between sibling processes; board_direct untested here");
      return;
    }
    CHECK(status == 0);
    CHECK_THAT(run.output(), Catch::Contains("algorithm board_direct"));
    CHECK_THAT(run.output(), Catch::Contains("# OK: 0 wrong elements in total"));
  }
}

TEST_CASE("chorus-run --fake-hosts: shared memory within a fake host, TCP across", "[launch][chorus-run]") {
  const std::string bench = chorus::test::binary_from_environment("CHORUS_BENCH");
  ChildProcess run(run_arguments({"-n", "4", "--fake-hosts", "2,2"},
                                 {bench, "--op", "allreduce", "--check", "-b", "8", "-e", "1M", "-f", "64"}),
                   {});
  const int status = run.wait(std::chrono::seconds(60));
  INFO(run.output());
  CHECK(status == 0);
  CHECK(run.output().find("4 ranks on 2 hosts (rank 0: shm to 1 peer, tcp to 2 peers)") != std::string::npos);
  CHECK(run.output().find("OK: 0 wrong elements") != std::string::npos);

  ChildProcess wrong(run_arguments({"-n", "4", "--fake-hosts", "3,3"}, {launch_rank()}), {});
  CHECK(wrong.wait(std::chrono::seconds(30)) != 0);
  CHECK(wrong.output().find("--fake-hosts 3,3 holds 6 ranks but --ranks is 4") != std::string::npos);
}
