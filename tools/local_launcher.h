// Starts N ranks of a program on this host under the env contract
// (CHORUS_RANK, CHORUS_SIZE, CHORUS_STORE, CHORUS_JOB_ID) with a TcpStore
// served by the launcher itself, and supervises them: if one rank fails, the
// others are stopped and the failure names the first rank that failed.
// Shared by chorus-bench --ranks N and the chorus-run launcher.
#pragma once

#include <string>
#include <vector>

namespace chorus::tools {

struct LaunchResult {
  int exit_code = 0;       // 0 when every rank exited 0
  int first_failed_rank = -1;
  std::string description;  // "rank 2 was killed by signal 9", empty on success
};

// argv[0] is executed (PATH lookup) once per rank with the env contract set.
LaunchResult launch_local(int ranks, const std::vector<std::string>& argv);

}  // namespace chorus::tools
