// Which rank of a failed local job failed first, and why (issue 45). The
// first process to exit is usually not it: a rank that is stopped, stuck or
// killed fails nobody's wait but its peers', and those peers are what exit
// first, each having reported the lost peer. So the launcher weighs:
//
//   1. what it saw itself: a rank that died of a signal it did not send, or
//      that was stopped (SIGSTOP, a debugger), no later than the first exit
//      (or later, where the ranks' reports name it too);
//   2. what the ranks report: the peers a failing rank names as lost or
//      unresponsive (Mesh::suspects, left in the job's store at its first
//      failure; api/store_abort_record.h), a rank that reported nothing
//      itself, named by the most ranks;
//   3. the first rank to exit unsuccessfully, as before.
//
// A rank that exited non-zero after reporting a peer is never the answer
// while the peer it named is a candidate.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/job_secret.h"

namespace chorus::tools {

// How one rank of the job ended, as the launcher saw it. `pass` numbers the
// launcher's reaping passes: events of the same pass happened together.
struct RankEnding {
  bool ended = false;
  int status = 0;             // waitpid's status once ended
  int ended_pass = -1;
  bool killed_by_launcher = false;  // died of a signal the launcher had sent it
  int stop_signal = 0;        // the signal that stopped it and was never followed by SIGCONT, else 0
  int stopped_pass = -1;
};

// One failing rank's report: the peers it holds responsible, in the order
// the reports reached the store.
struct SuspectReport {
  int rank = -1;
  std::vector<int> suspects;
};

struct FirstFailure {
  int rank = -1;
  int exit_code = 0;
  std::string description;  // "rank 2 failed first: stopped by SIGSTOP (ranks 0, 1, 3 report it ...)"
};

// The rank that failed first. `first_exit`: the first rank that ended
// unsuccessfully (the launcher's trigger to stop the others).
FirstFailure choose_first_failure(const std::vector<RankEnding>& ranks, int first_exit,
                                  const std::vector<SuspectReport>& reports);

// The reports the job's ranks left in its store (generation 0: the ranks as
// launched), read within about `budget`; none when the store is gone or
// says nothing. `store_url` and `job_id` as the ranks got them.
std::vector<SuspectReport> read_suspect_reports(const std::string& store_url, const std::string& job_id,
                                                const JobSecret& secret, int ranks,
                                                std::chrono::milliseconds budget);

// "SIGKILL", "SIGSTOP", ..., or "signal 42".
std::string signal_text(int signal_number);
// The exit code a shell would report for a waitpid status: 128 + the signal for a killed process.
int exit_code_of(int status);

}  // namespace chorus::tools
