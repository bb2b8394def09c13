// Starts N ranks of a program on this host under the env contract
// (CHORUS_RANK, CHORUS_SIZE, CHORUS_STORE, CHORUS_JOB_ID; CHORUS_LOCAL_RANK,
// CHORUS_LOCAL_SIZE and torchrun's LOCAL_RANK, LOCAL_WORLD_SIZE; TCP on
// loopback unless CHORUS_SOCKET_IFNAME says otherwise) and supervises them:
// SIGINT/SIGTERM/SIGHUP sent to the launcher are forwarded to every rank, and
// if one rank fails the others get a grace period, then SIGTERM, then SIGKILL;
// the result names the rank that failed first (tools/first_failure.h).
// Shared by chorus-bench --ranks N and the chorus-run launcher.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace chorus::tools {

struct LaunchOptions {
  int ranks = 1;
  // argv[0] is executed (PATH lookup) once per rank.
  std::vector<std::string> argv;
  // Where the ranks rendezvous:
  //   "tcp"       the launcher serves a TcpStore on 127.0.0.1 (no rank must outlive the others)
  //   "embedded"  rank 0 hosts the TcpStore on a free port, as under torchrun or mpirun
  //   "file"      a fresh directory under $TMPDIR, removed when the job ends
  //   any URL     (redis://host:port, tcp://host:port of a chorus-store, file:///dir) passed on as is
  std::string store = "tcp";
  // After the first failure (or a forwarded signal), how long the other ranks
  // get to exit before SIGTERM, and as long again before SIGKILL. Ranks that
  // learn of a failure fail themselves within milliseconds (chorus spreads
  // it), so a second is plenty for them to report it.
  std::chrono::milliseconds grace{1000};
  // Capture each rank's stdout/stderr through pipes and prefix every line
  // with "[rank N] ". Otherwise the ranks write to the launcher's own stdout/stderr.
  bool prefix_output = false;
  // Names the launcher in its own messages ("chorus-run: rank 2 exited ...").
  std::string launcher_name = "chorus launcher";
  // Fake hosts: ranks per host ({2, 2}), numbered host by host. Each rank
  // gets CHORUS_HOST_ID naming its host, so shared memory serves the ranks
  // of a fake host and TCP the others, as on several machines. Empty: one host.
  std::vector<int> fake_hosts;
};

struct LaunchResult {
  int exit_code = 0;        // 0 when every rank exited 0; else the status of the rank that
                            // failed first (128 + signal when it was killed), the first
                            // exit's where the launcher had to kill that rank itself
                            // (stopped, stuck), or 128 + the signal that interrupted the launcher
  int first_failed_rank = -1;  // as tools/first_failure.h decides it, -1 if none
  int interrupted_by_signal = 0;  // SIGINT/SIGTERM/SIGHUP received (and forwarded), else 0
  std::string description;  // "rank 2 failed first: killed by SIGKILL", empty on success
};

// Ranks get stdin from /dev/null and each runs in its own process group, so a
// terminal's Ctrl-C reaches the launcher once and is forwarded once (and a
// rank's own children are stopped with it).
LaunchResult launch_local(const LaunchOptions& options);

// "2,2" -> {2, 2}; nullopt unless a comma-separated list of positive counts.
std::optional<std::vector<int>> parse_fake_hosts(const std::string& text);

// The launcher-served TcpStore, output not prefixed: what chorus-bench --ranks uses.
LaunchResult launch_local(int ranks, const std::vector<std::string>& argv, const std::vector<int>& fake_hosts = {});

}  // namespace chorus::tools
