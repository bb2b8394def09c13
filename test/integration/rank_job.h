// A job of real rank processes for the integration tests: forks and execs the
// rank program once per rank with the env contract (CHORUS_RANK, CHORUS_SIZE,
// CHORUS_STORE, CHORUS_JOB_ID), collects each rank's output line by line with
// the time it arrived, and reaps the ranks. Whatever happens in a test, the
// destructor kills and reaps every rank still running and removes the job's
// temporary directory.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace chorus::integration {

enum class StoreKind { tcp, file };

struct JobSpec {
  int size = 2;
  StoreKind store = StoreKind::tcp;
  std::vector<std::string> arguments;  // after the program name: scenario, flags
};

// One line a rank printed on stdout and when the driver read it.
struct OutputLine {
  std::string text;
  int64_t received_ms;  // CLOCK_MONOTONIC
};

class RankJob {
 public:
  // Starts every rank. The temporary directory (file store, stop files) is
  // created first so tests can refer to it in arguments via {tmp}.
  explicit RankJob(const JobSpec& spec);
  ~RankJob();
  RankJob(const RankJob&) = delete;
  RankJob& operator=(const RankJob&) = delete;

  int size() const { return static_cast<int>(ranks_.size()); }
  pid_t pid(int rank) const { return ranks_.at(static_cast<size_t>(rank)).pid; }
  const std::string& temp_dir() const { return temp_dir_; }
  const std::string& store_url() const { return store_url_; }

  // Reads output and reaps exited ranks until done() or the limit passes.
  bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit);
  bool wait_for_exit(int rank, std::chrono::milliseconds limit);
  bool wait_for_all_exits(std::chrono::milliseconds limit);
  // Reads what is available without blocking (call while busy elsewhere so
  // ranks never block on a full pipe).
  void pump();

  bool exited(int rank) const;
  // Exit code, or -signal when the rank was killed by a signal.
  int exit_status(int rank) const;
  bool printed(int rank, const std::string& prefix) const;
  // The RESULT line as key=value fields ("what" holds the rest of the line).
  std::optional<std::map<std::string, std::string>> result(int rank) const;
  std::optional<int64_t> result_received_ms(int rank) const;

  void signal(int rank, int signal_number);
  // Everything every rank printed, for failure messages.
  std::string transcript() const;

 private:
  struct Rank {
    pid_t pid = -1;
    int stdout_fd = -1;
    int stderr_fd = -1;
    std::string stdout_partial;
    std::string stderr_text;
    std::vector<OutputLine> lines;
    bool exited = false;
    int status = 0;
  };

  void start(int rank, const JobSpec& spec);
  void read_available(Rank& rank);
  void reap();
  // Kills and reaps every rank still running, closes pipes, removes temp_dir_.
  void clean_up();

  std::string temp_dir_;
  std::string store_url_;
  std::string job_id_;
  std::vector<Rank> ranks_;
};

// The rank program next to the test executable (or CHORUS_RANK_PROGRAM).
std::string rank_program_path();
// A port that was free a moment ago on 127.0.0.1.
uint16_t pick_free_port();
// Parses "RESULT k=v k=v what=rest of line".
std::map<std::string, std::string> parse_result_line(const std::string& line);
int64_t driver_monotonic_ms();

}  // namespace chorus::integration
