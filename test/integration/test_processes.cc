// End-to-end tests with real processes: each rank is the rank program,
// started with the env contract a launcher uses, talking over real TCP
// sockets through the public API. Correctness over both stores, then the
// failures a job meets in the wild: a rank killed with SIGKILL, a rank frozen
// with SIGSTOP, ranks disagreeing on a collective, and strangers writing
// garbage to the ranks' listening ports.
#include <catch2/catch.hpp>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test/integration/hostile_peer.h"
#include "test/integration/rank_job.h"

using namespace chorus::integration;
using namespace std::chrono_literals;

namespace {

// Every timing this suite reports goes to stdout with this prefix, so a run
// of `meson test -v` shows the numbers the issue asks for.
template <class... Parts>
void report(const Parts&... parts) {
  std::cout << "[processes] ";
  (std::cout << ... << parts);
  std::cout << std::endl;
}

std::string cat_rank(int rank) { return "rank " + std::to_string(rank); }

// What docs/failures.md promises for a dead, stopped or mismatched rank: the
// error within the collective's timeout plus kNamedWithinMs, which is the
// liveness probe's own 1000 ms and 2000 ms for a slow or emulated machine
// (in the Soft-RoCE VM, under TCG, a stopped rank was named 5019 ms after
// the stop with a 3000 ms timeout: 1000 ms of slack was not enough).
constexpr int kNamedWithinMs = 3000;

bool names_rank(const std::string& text, int rank) {
  return std::regex_search(text, std::regex("rank " + std::to_string(rank) + "([^0-9]|$)"));
}

std::string field(const std::map<std::string, std::string>& fields, const std::string& key) {
  auto found = fields.find(key);
  return found == fields.end() ? "" : found->second;
}

int64_t field_number(const std::map<std::string, std::string>& fields, const std::string& key) {
  const std::string text = field(fields, key);
  return text.empty() ? -1 : std::stoll(text);
}

// What /dev/shm holds: a SIGKILLed rank must leave nothing there (the
// shared-memory transport's segments are memfds that never have a name).
std::set<std::string> dev_shm_entries() {
  std::set<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error))
    names.insert(entry.path().filename().string());
  return names;
}

bool any_rank_failed_to_connect(const RankJob& job) {
  for (int rank = 0; rank < job.size(); ++rank)
    if (job.exit_status(rank) == 3) return true;
  return false;
}

// Runs a job to its end and requires every rank to report ok. A TCP store
// port picked free can be taken before rank 0 binds it; that shows up as a
// failure to connect, and the job is retried on a fresh port.
void run_job_expecting_ok(const JobSpec& spec, std::chrono::milliseconds limit) {
  for (int attempt = 1;; ++attempt) {
    const int64_t started = driver_monotonic_ms();
    RankJob job(spec);
    const bool finished = job.wait_for_all_exits(limit);
    if (finished && any_rank_failed_to_connect(job) && spec.store == StoreKind::tcp && attempt < 3) {
      report("retrying after a failure to connect (store port taken?):\n", job.transcript());
      continue;
    }
    INFO(job.transcript());
    REQUIRE(finished);
    for (int rank = 0; rank < job.size(); ++rank) {
      auto result = job.result(rank);
      REQUIRE(result.has_value());
      CHECK(field(*result, "status") == "ok");
      CHECK(job.exit_status(rank) == 0);
    }
    report(spec.arguments[0], " N=", spec.size, " store=", spec.store == StoreKind::tcp ? "tcp" : "file", ": ",
           driver_monotonic_ms() - started, " ms");
    return;
  }
}

bool all_printed(RankJob& job, const std::string& prefix) {
  for (int rank = 0; rank < job.size(); ++rank)
    if (!job.printed(rank, prefix)) return false;
  return true;
}

// Stops the test with everything the ranks printed when `condition` is false.
void require_job(const RankJob& job, bool condition, const std::string& what) {
  if (!condition) FAIL(what << "\n" << job.transcript());
}

// Lets the ranks run on (reading their output) for a while.
void keep_running(RankJob& job, std::chrono::milliseconds how_long) {
  job.wait_until([] { return false; }, how_long);
}

}  // namespace

TEST_CASE("collectives give bit-exact results across real processes", "[processes]") {
  for (StoreKind store : {StoreKind::tcp, StoreKind::file}) {
    for (int size : {2, 3, 4, 5, 8}) {
      JobSpec spec;
      spec.size = size;
      spec.store = store;
      spec.arguments = {"correctness", "--timeout-ms", "60000"};
      // One allreduce above 64 MiB, at a size small enough to stay quick.
      if ((store == StoreKind::tcp && size == 3) || (store == StoreKind::file && size == 2))
        spec.arguments.push_back("--big");
      run_job_expecting_ok(spec, 120s);
    }
  }
}

TEST_CASE("a rank killed with SIGKILL makes every survivor fail naming it", "[processes]") {
  const int64_t timeout_ms = 5000;
  const int victim = 2;
  const std::set<std::string> dev_shm_before = dev_shm_entries();
  RankJob job({4, StoreKind::tcp, {"loop", "--timeout-ms", std::to_string(timeout_ms), "--max-seconds", "90"}});
  require_job(job, job.wait_until([&] { return all_printed(job, "READY"); }, 60s), "not every rank got READY");
  keep_running(job, 300ms);  // well inside the loop, mid-collective

  const int64_t killed_at = driver_monotonic_ms();
  job.signal(victim, SIGKILL);
  const bool survivors_done = job.wait_until(
      [&] {
        for (int rank = 0; rank < job.size(); ++rank)
          if (!job.exited(rank)) return false;
        return true;
      },
      std::chrono::milliseconds(timeout_ms + 15000));
  INFO(job.transcript());
  REQUIRE(survivors_done);
  CHECK(job.exit_status(victim) == -SIGKILL);

  for (int rank = 0; rank < job.size(); ++rank) {
    if (rank == victim) continue;
    auto result = job.result(rank);
    REQUIRE(result.has_value());
    const std::string status = field(*result, "status");
    const int64_t noticed_after = field_number(*result, "error_at_ms") - killed_at;
    report("SIGKILL of rank ", victim, ": rank ", rank, " raised ", status, " ", noticed_after,
           " ms after the kill (peer=", field(*result, "peer"), ", later calls: ", field(*result, "again"),
           "): ", field(*result, "what"));
    INFO("rank " << rank << ": " << field(*result, "what"));
    CHECK((status == "IoError" || status == "Aborted"));
    CHECK(names_rank(field(*result, "what"), victim));
    CHECK(noticed_after >= 0);
    CHECK(noticed_after <= timeout_ms + kNamedWithinMs);
    CHECK(field(*result, "again") != "none");
    CHECK(job.exit_status(rank) == 0);
  }
  std::set<std::string> left;
  for (const std::string& name : dev_shm_entries())
    if (!dev_shm_before.count(name)) left.insert(name);
  for (const std::string& name : left) report("SIGKILL: /dev/shm gained ", name);
  CHECK(left.empty());
}

// CHORUS_TEST_TRIALS repeats the trials below with a fresh victim and
// moment each time (default 1; the recorded runs in the issue notes use 20).
int trials() {
  const char* text = std::getenv("CHORUS_TEST_TRIALS");
  return text && *text ? std::max(1, std::atoi(text)) : 1;
}

TEST_CASE("a rank frozen with SIGSTOP is named by every survivor, and fails itself once resumed", "[processes]") {
  const int64_t timeout_ms = 2000;
  std::mt19937 random(std::random_device{}());
  for (int trial = 0; trial < trials(); ++trial) {
    RankJob job({4, StoreKind::tcp, {"loop", "--timeout-ms", std::to_string(timeout_ms), "--max-seconds", "90"}});
    require_job(job, job.wait_until([&] { return all_printed(job, "READY"); }, 60s), "not every rank got READY");
    const int frozen = static_cast<int>(random() % 4);
    keep_running(job, std::chrono::milliseconds(100 + random() % 400));

    const int64_t stopped_at = driver_monotonic_ms();
    job.signal(frozen, SIGSTOP);
    const bool survivors_done = job.wait_until(
        [&] {
          for (int rank = 0; rank < job.size(); ++rank)
            if (rank != frozen && !job.exited(rank)) return false;
          return true;
        },
        std::chrono::milliseconds(timeout_ms + 15000));
    INFO(job.transcript());
    REQUIRE(survivors_done);
    for (int rank = 0; rank < job.size(); ++rank) {
      if (rank == frozen) continue;
      auto result = job.result(rank);
      REQUIRE(result.has_value());
      const std::string status = field(*result, "status");
      const std::string what = field(*result, "what");
      const int64_t noticed_after = field_number(*result, "error_at_ms") - stopped_at;
      report("SIGSTOP trial ", trial, " of rank ", frozen, ": rank ", rank, " raised ", status, " ", noticed_after,
             " ms after the stop: ", what);
      INFO("trial " << trial << ", rank " << rank << ": " << what);
      CHECK((status == "TimeoutError" || status == "Aborted"));
      // Named as the one that does not answer, whichever neighbour this rank waited on.
      CHECK_THAT(what, Catch::Contains(cat_rank(frozen) + " does not answer a liveness probe"));
      CHECK(noticed_after >= 0);
      CHECK(noticed_after <= timeout_ms + kNamedWithinMs);
      CHECK(job.exit_status(rank) == 0);
    }

    // Resumed, the frozen rank finds its peers gone or its deadline passed.
    const int64_t resumed_at = driver_monotonic_ms();
    job.signal(frozen, SIGCONT);
    const bool frozen_done = job.wait_for_exit(frozen, std::chrono::milliseconds(timeout_ms + 8000));
    CHECK(frozen_done);
    if (frozen_done) {
      auto result = job.result(frozen);
      REQUIRE(result.has_value());
      report("SIGSTOP trial ", trial, ": rank ", frozen, " after SIGCONT raised ", field(*result, "status"), " ",
             driver_monotonic_ms() - resumed_at, " ms after resuming: ", field(*result, "what"));
      CHECK(field(*result, "status") != "ok");
      CHECK(job.exit_status(frozen) == 0);
    }
  }
}

// The survivors' checked allreduces of 1 MiB after the shrink, and the time
// the test gives them on top of noticing the failure and shrinking (whose
// own bound is checked apart). In the Soft-RoCE VM under load a 3-rank
// allreduce of 1 MiB took up to 250 ms (its links measured 8 MB/s): 100 of
// them outlasted a fixed 26 s wait with every rank still progressing.
constexpr int kAfterShrink = 30;
constexpr std::chrono::milliseconds kAfterShrinkBudget{60000};

TEST_CASE("the survivors of a SIGKILLed or SIGSTOPped rank shrink to a new job and carry on bit-exactly",
          "[processes][shrink]") {
  const int64_t timeout_ms = 3000;
  std::mt19937 random(std::random_device{}());
  for (int trial = 0; trial < trials(); ++trial) {
    for (int signal : {SIGKILL, SIGSTOP}) {
      const char* name = signal == SIGKILL ? "SIGKILL" : "SIGSTOP";
      // The file store outlives every rank (rank 0's embedded store would not).
      RankJob job({4, StoreKind::file,
                   {"shrink", "--timeout-ms", std::to_string(timeout_ms), "--max-seconds", "60", "--after",
                    std::to_string(kAfterShrink)}});
      require_job(job, job.wait_until([&] { return all_printed(job, "READY"); }, 60s), "not every rank got READY");
      const int victim = static_cast<int>(random() % 4);
      keep_running(job, std::chrono::milliseconds(random() % 500));
      const int64_t signalled_at = driver_monotonic_ms();
      job.signal(victim, signal);
      const bool survivors_done = job.wait_until(
          [&] {
            for (int rank = 0; rank < job.size(); ++rank)
              if (rank != victim && !job.exited(rank)) return false;
            return true;
          },
          std::chrono::milliseconds(2 * timeout_ms + 20000) + kAfterShrinkBudget);
      INFO(job.transcript());
      REQUIRE(survivors_done);
      std::set<int> new_ranks;
      for (int rank = 0; rank < job.size(); ++rank) {
        if (rank == victim) continue;
        auto result = job.result(rank);
        REQUIRE(result.has_value());
        INFO(name << " trial " << trial << " of rank " << victim << ": rank " << rank << ": " << field(*result, "what"));
        report("shrink after ", name, " of rank ", victim, ": rank ", rank, " ", field(*result, "status"),
               " (failed with ", field(*result, "failure"), " ", field_number(*result, "failed_at_ms") - signalled_at,
               " ms after the signal, shrank in ", field(*result, "shrink_ms"), " ms) -> rank ",
               field(*result, "new_rank"), " of ", field(*result, "new_size"), ", ", field(*result, "after"),
               " checked allreduces in ", field(*result, "after_ms"), " ms");
        CHECK(field(*result, "status") == "ok");
        // The error that ended the old job named the victim, in time.
        if (signal == SIGKILL) CHECK(names_rank(field(*result, "what"), victim));
        else CHECK_THAT(field(*result, "what"), Catch::Contains(cat_rank(victim) + " does not answer"));
        CHECK(field_number(*result, "failed_at_ms") - signalled_at <= timeout_ms + kNamedWithinMs);
        CHECK(field(*result, "new_size") == "3");
        CHECK(field(*result, "after") == std::to_string(kAfterShrink));
        // Renumbered in the old order: the old rank minus the dead ranks below it.
        CHECK(field_number(*result, "new_rank") == rank - (victim < rank ? 1 : 0));
        new_ranks.insert(static_cast<int>(field_number(*result, "new_rank")));
        CHECK(job.exit_status(rank) == 0);
      }
      CHECK(new_ranks.size() == 3);
      if (signal == SIGSTOP) {
        // Woken, the stopped rank gets an error, not a seat.
        job.signal(victim, SIGCONT);
        const bool done = job.wait_for_exit(victim, std::chrono::milliseconds(2 * timeout_ms + 10000));
        CHECK(done);
        if (done) {
          auto result = job.result(victim);
          REQUIRE(result.has_value());
          report("shrink: the stopped rank ", victim, " after SIGCONT: ", field(*result, "status"), ": ",
                 field(*result, "what"));
          CHECK(field(*result, "status") == "excluded");
          CHECK(job.exit_status(victim) == 0);
        }
      }
    }
  }
}

// Runs a job where ranks disagree about one collective; every rank must fail
// in time with its buffers' guard bytes and input intact (the rank program
// exits 0 only then).
// A rank listed in `may_finish_first` may complete the mismatched call (a
// broadcast root only sends) but must then fail on its next call.
void expect_every_rank_fails(const std::string& scenario, const std::string& variant,
                             const std::set<std::string>& accepted, std::set<int> may_finish_first = {}) {
  const int64_t timeout_ms = 5000;
  RankJob job({3, StoreKind::tcp, {scenario, "--variant", variant, "--timeout-ms", std::to_string(timeout_ms)}});
  const bool finished = job.wait_for_all_exits(std::chrono::milliseconds(timeout_ms + 20000));
  INFO(job.transcript());
  REQUIRE(finished);
  for (int rank = 0; rank < job.size(); ++rank) {
    auto result = job.result(rank);
    REQUIRE(result.has_value());
    const std::string status = field(*result, "status");
    const bool finished_first = field(*result, "first") == "ok";
    report(scenario, " ", variant, ": rank ", rank, " (count ", field(*result, "count"), ") raised ", status,
           finished_first ? " on its next call (the mismatched call itself returned)" : "", " after ",
           field(*result, "error_after_ms"), " ms: ", field(*result, "what"));
    INFO("rank " << rank);
    CHECK(accepted.count(status) == 1);
    if (finished_first) CHECK(may_finish_first.count(rank) == 1);
    CHECK(field(*result, "guards") == "ok");
    CHECK(field(*result, "input") == "ok");
    CHECK(field_number(*result, "error_after_ms") <= timeout_ms + kNamedWithinMs);
    CHECK(field(*result, "again") != "none");
    CHECK(job.exit_status(rank) == 0);
  }
}

TEST_CASE("ranks disagreeing on the count all fail without writing outside their buffers", "[processes]") {
  const std::set<std::string> accepted{"MismatchError", "InvalidArgument", "Aborted", "IoError"};
  for (const char* variant : {"larger", "smaller", "tiny"}) expect_every_rank_fails("mismatch_count", variant, accepted);
}

TEST_CASE("ranks calling different collectives all fail in time", "[processes]") {
  const std::set<std::string> accepted{"MismatchError", "InvalidArgument", "Aborted", "IoError", "TimeoutError"};
  expect_every_rank_fails("mismatch_collective", "broadcast", accepted, /*may_finish_first=*/{0});
  expect_every_rank_fails("mismatch_collective", "barrier", accepted);
}

namespace {

// Sockets a forgery left open; closed whatever the test's outcome.
struct OpenSockets {
  std::vector<int> fds;
  ~OpenSockets() {
    for (int fd : fds) ::close(fd);
  }
};

}  // namespace

TEST_CASE("hostile bytes on the ranks' listening ports do not disturb the job", "[processes]") {
  RankJob job({3, StoreKind::tcp,
               {"hostile", "--stop-file", "{tmp}/stop", "--timeout-ms", "10000", "--max-seconds", "90"}});
  require_job(job, job.wait_until([&] { return all_printed(job, "READY"); }, 60s), "not every rank got READY");

  std::vector<std::vector<ListeningEndpoint>> targets;
  for (int rank = 0; rank < job.size(); ++rank) {
    targets.push_back(listening_endpoints(job.pid(rank)));
    std::string ports;
    for (const auto& endpoint : targets.back()) ports += " " + endpoint.text;
    report("hostile: rank ", rank, " listens on", ports);
    INFO("rank " << rank);
    REQUIRE_FALSE(targets.back().empty());
  }

  const uint64_t seed = 20240611;
  std::mt19937_64 random(seed);
  OpenSockets left_open;
  int connections = 0;
  int refused = 0;
  const int64_t attack_until = driver_monotonic_ms() + 2500;
  for (int round = 0; driver_monotonic_ms() < attack_until || round < 2; ++round) {
    for (int kind = 0; kind < attack_kinds(); ++kind) {
      for (const auto& endpoints : targets) {
        for (const auto& endpoint : endpoints) {
          const AttackOutcome outcome = attack_once(endpoint, kind, job.size(), random);
          ++(outcome.connected ? connections : refused);
          if (outcome.open_fd >= 0) left_open.fds.push_back(outcome.open_fd);
        }
      }
      job.pump();
    }
    keep_running(job, 50ms);
  }
  report("hostile: ", connections, " hostile connections (seed ", seed, "), ", refused, " refused, ",
         left_open.fds.size(), " left open mid-handshake");
  // Listeners should accept nearly all; a test that never got through proves nothing.
  CHECK(connections > 10 * refused);

  std::ofstream(job.temp_dir() + "/stop").put('\n');
  const bool finished = job.wait_for_all_exits(60s);
  INFO(job.transcript());
  REQUIRE(finished);
  for (int rank = 0; rank < job.size(); ++rank) {
    auto result = job.result(rank);
    REQUIRE(result.has_value());
    INFO("rank " << rank << ": " << field(*result, "what"));
    CHECK(field(*result, "status") == "ok");
    CHECK(job.exit_status(rank) == 0);
    report("hostile: rank ", rank, " completed ", field(*result, "iterations"), " checked iterations");
  }
}
