#include "tools/first_failure.h"

#include <sys/wait.h>

#include <algorithm>
#include <climits>
#include <csignal>
#include <limits>

#include "api/store_abort_record.h"
#include "base/config.h"
#include "base/log.h"
#include "rendezvous/store_url.h"

namespace chorus::tools {
namespace {

using Clock = std::chrono::steady_clock;

// "rank 3", "ranks 0, 1, 3": a long list is cut, a job of thousands would
// otherwise fill the last line with every survivor.
std::string rank_list(const std::vector<int>& ranks) {
  constexpr size_t kShown = 8;
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < std::min(ranks.size(), kShown); ++i) text += cat(i == 0 ? "" : ", ", ranks[i]);
  if (ranks.size() > kShown) text += cat(" and ", ranks.size() - kShown, " more");
  return text;
}

std::string how_it_ended(const RankEnding& ending) {
  if (!ending.ended) return "was still running";
  if (WIFSIGNALED(ending.status))
    return cat("was killed by ", signal_text(WTERMSIG(ending.status)),
               ending.killed_by_launcher ? " when the launcher stopped the job" : "");
  return cat("exited with status ", WEXITSTATUS(ending.status));
}

// The pass in which the launcher saw rank's own trouble: a stop, or a death
// by a signal it did not send. INT_MAX when it saw none.
int evidence_pass(const RankEnding& ending) {
  int pass = INT_MAX;
  if (ending.stop_signal != 0) pass = ending.stopped_pass;
  if (ending.ended && WIFSIGNALED(ending.status) && !ending.killed_by_launcher) pass = std::min(pass, ending.ended_pass);
  return pass;
}

}  // namespace

int exit_code_of(int status) { return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status); }

std::string signal_text(int signal_number) {
  switch (signal_number) {
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGABRT: return "SIGABRT";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGPIPE: return "SIGPIPE";
    case SIGSTOP: return "SIGSTOP";
    case SIGTSTP: return "SIGTSTP";
    case SIGTTIN: return "SIGTTIN";
    case SIGTTOU: return "SIGTTOU";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGALRM: return "SIGALRM";
    case SIGXCPU: return "SIGXCPU";
    default: return cat("signal ", signal_number);
  }
}

FirstFailure choose_first_failure(const std::vector<RankEnding>& ranks, int first_exit,
                                  const std::vector<SuspectReport>& reports) {
  const auto count = ranks.size();
  std::vector<bool> reported(count, false);
  for (const SuspectReport& report : reports)
    if (report.rank >= 0 && static_cast<size_t>(report.rank) < count) reported[static_cast<size_t>(report.rank)] = true;
  // A rank that reported was alive enough to notice a failure: another
  // rank's accusation of it (it stopped answering once it had aborted) is
  // discounted.
  std::vector<std::vector<int>> accusers(count);
  std::vector<size_t> first_accused(count, std::numeric_limits<size_t>::max());
  for (size_t order = 0; order < reports.size(); ++order) {
    const SuspectReport& report = reports[order];
    for (int suspect : report.suspects) {
      if (suspect < 0 || static_cast<size_t>(suspect) >= count || suspect == report.rank) continue;
      const auto index = static_cast<size_t>(suspect);
      if (reported[index]) continue;
      std::vector<int>& named_by = accusers[index];
      if (std::find(named_by.begin(), named_by.end(), report.rank) != named_by.end()) continue;
      named_by.push_back(report.rank);
      first_accused[index] = std::min(first_accused[index], order);
    }
  }
  for (std::vector<int>& named_by : accusers) std::sort(named_by.begin(), named_by.end());
  const RankEnding& first = ranks[static_cast<size_t>(first_exit)];
  auto reported_by = [&](size_t rank) {
    return accusers[rank].empty()
               ? std::string()
               : cat(" (", rank_list(accusers[rank]), accusers[rank].size() == 1 ? " reports" : " report",
                     " it lost or unresponsive)");
  };

  FirstFailure answer;
  // 1. What the launcher saw itself, no later than the first exit, or
  // later where the reports name that rank too: a killed process becomes a
  // zombie only once its memory is torn down, after its sockets closed, so
  // the peers that saw them close may exit before it is reaped. Other later
  // signals and stops may be the job's end, not its cause.
  int earliest = INT_MAX;
  for (size_t rank = 0; rank < count; ++rank) {
    const int pass = evidence_pass(ranks[rank]);
    if (pass == INT_MAX || (pass > first.ended_pass && accusers[rank].empty()) || pass >= earliest) continue;
    earliest = pass;
    answer.rank = static_cast<int>(rank);
  }
  if (answer.rank >= 0) {
    const auto rank = static_cast<size_t>(answer.rank);
    const RankEnding& ending = ranks[rank];
    const bool stopped = ending.stop_signal != 0 && ending.stopped_pass == earliest;
    answer.exit_code = stopped ? exit_code_of(first.status) : exit_code_of(ending.status);
    answer.description = cat("rank ", rank, " failed first: ",
                             stopped ? cat("stopped by ", signal_text(ending.stop_signal))
                                     : cat("killed by ", signal_text(WTERMSIG(ending.status))),
                             reported_by(rank));
    return answer;
  }
  // 2. The rank the most failing ranks name (the earliest named on a tie).
  for (size_t rank = 0; rank < count; ++rank) {
    if (accusers[rank].empty()) continue;
    if (answer.rank >= 0) {
      const auto best = static_cast<size_t>(answer.rank);
      if (accusers[rank].size() < accusers[best].size()) continue;
      if (accusers[rank].size() == accusers[best].size() && first_accused[rank] >= first_accused[best]) continue;
    }
    answer.rank = static_cast<int>(rank);
  }
  if (answer.rank >= 0) {
    const auto rank = static_cast<size_t>(answer.rank);
    const RankEnding& ending = ranks[rank];
    const bool own_end = ending.ended && !ending.killed_by_launcher;
    answer.exit_code = own_end ? exit_code_of(ending.status) : exit_code_of(first.status);
    std::string ended = how_it_ended(ending);
    if (ending.stop_signal != 0) ended = cat("was stopped by ", signal_text(ending.stop_signal), " and ", ended);
    answer.description =
        cat("rank ", rank, " failed first: ", rank_list(accusers[rank]),
            accusers[rank].size() == 1 ? " reports" : " report", " it lost or unresponsive; it ", ended);
    return answer;
  }
  // 3. Nothing better known: the first to exit.
  answer.rank = first_exit;
  answer.exit_code = exit_code_of(first.status);
  answer.description = cat("rank ", first_exit, " failed first: it ", how_it_ended(first));
  return answer;
}

std::vector<SuspectReport> read_suspect_reports(const std::string& store_url, const std::string& job_id,
                                                const JobSecret& secret, int ranks,
                                                std::chrono::milliseconds budget) {
  std::vector<SuspectReport> reports;
  const Clock::time_point deadline = Clock::now() + budget;
  try {
    // Rank -1: a client only, never the host of a tcp:// store.
    const OpenedStore opened = open_store(store_url, -1, job_id, budget, secret, tls_from_environment());
    const int64_t posted = opened.store->add(detail::suspect_count_key(0), 0);
    for (int64_t index = 1; index <= std::min<int64_t>(posted, ranks); ++index) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      const std::optional<std::pair<int, std::vector<int>>> report =
          detail::decode_suspect_report(opened.store->get(detail::suspect_report_key(0, index), left), ranks);
      if (report) reports.push_back({report->first, report->second});
    }
  } catch (const std::exception& error) {
    // A store that went with the job (or was never reachable) says nothing.
    CHORUS_LOG(debug, -1, "no suspect reports from the job's store: ", error.what());
  }
  return reports;
}

}  // namespace chorus::tools
