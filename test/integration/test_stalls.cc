// Stalls, with ranks as threads of this process: a collective that one rank
// is late to warns at half its timeout naming that rank (and what it last
// did), and the error of one it never calls names it too, not the
// neighbour the others happened to wait on.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "test/integration/rank_threads.h"

using namespace chorus;
using chorus::testing::require_all_ok;
using chorus::testing::run_ranks;

namespace {

// Everything written to stderr (chorus's log) while `body` runs.
std::string stderr_during(const std::function<void()>& body) {
  char path[] = "/tmp/chorus-stalls-XXXXXX";
  const int file = ::mkstemp(path);
  REQUIRE(file >= 0);
  std::fflush(stderr);
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(file, STDERR_FILENO);
  try {
    body();
  } catch (...) {
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
    ::close(file);
    ::unlink(path);
    throw;
  }
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(path);
  return text.str();
}

size_t count(const std::string& text, const std::string& part) {
  size_t found = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++found;
  return found;
}

}  // namespace

TEST_CASE("a rank late to a collective is named in a warning at half the timeout", "[stall]") {
  const std::string log = stderr_during([] {
    require_all_ok(run_ranks(3, [](Context& context) {
      std::vector<float> data(1000, 1.0f);
      allreduce(context, std::span(data), ReduceOp::sum);  // #0, everyone
      CollectiveOptions two_seconds;
      two_seconds.timeout = std::chrono::milliseconds(2000);
      if (context.rank() == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      std::fill(data.begin(), data.end(), 1.0f);
      allreduce(context, std::span(data), ReduceOp::sum, two_seconds);  // #1: rank 2 comes late, in time
      for (float value : data) REQUIRE(value == 3.0f);
    }));
  });
  INFO(log);
  // Ranks 0 and 1 each warn once, after about a second without progress.
  CHECK(count(log, "allreduce #1 (count 1000 float32 sum) has not moved for ") == 2);
  CHECK(count(log, "rank 2 has not called allreduce #1 (rank 2 finished #0 and has called nothing since)") == 2);
  CHECK(count(log, "WARN] rank 2:") == 0);
}

// The warning repeats while the stall lasts, each time the quiet doubles
// (CHORUS_STALL_WARNING_S sets the first quiet; 0 silences it).
TEST_CASE("a stall warns again each time its quiet doubles, and CHORUS_STALL_WARNING_S=0 silences it", "[stall]") {
  struct Setting {
    const char* seconds;
    int late_ms;
    int timeout_ms;
    size_t warnings_per_waiting_rank;
  };
  // 0.4 s: warnings at 0.4, 0.8, 1.6 and 3.2 s of quiet; the next (6.4 s) is
  // after the late rank comes (4.5 s), so exactly four.
  for (const Setting setting : {Setting{"0.4", 4500, 8000, 4}, Setting{"0", 1500, 3000, 0}}) {
    ::setenv("CHORUS_STALL_WARNING_S", setting.seconds, 1);
    const std::string log = stderr_during([&] {
      require_all_ok(run_ranks(3, [&](Context& context) {
        std::vector<float> data(1000, 1.0f);
        allreduce(context, std::span(data), ReduceOp::sum);  // #0, everyone
        CollectiveOptions timeout;
        timeout.timeout = std::chrono::milliseconds(setting.timeout_ms);
        if (context.rank() == 2) std::this_thread::sleep_for(std::chrono::milliseconds(setting.late_ms));
        std::fill(data.begin(), data.end(), 1.0f);
        allreduce(context, std::span(data), ReduceOp::sum, timeout);  // #1: rank 2 comes late, in time
        for (float value : data) REQUIRE(value == 3.0f);
      }));
    });
    ::unsetenv("CHORUS_STALL_WARNING_S");
    INFO("CHORUS_STALL_WARNING_S=" << setting.seconds << ": " << log);
    CHECK(count(log, "allreduce #1 (count 1000 float32 sum) has not moved for ") ==
          2 * setting.warnings_per_waiting_rank);
    CHECK(count(log, "WARN] rank 2:") == 0);
  }
}

TEST_CASE("a collective a rank never calls fails naming that rank on every other rank", "[stall]") {
  std::atomic<int> finished{0};
  std::vector<std::string> errors(4);
  stderr_during([&] {
    run_ranks(4, [&](Context& context) {
      std::vector<float> data(1000, 1.0f);
      allreduce(context, std::span(data), ReduceOp::sum);  // #0
      barrier(context);                                     // #1
      if (context.rank() == 3) {
        // Never calls #2; stays connected (its transport answers probes) until the others gave up.
        while (finished.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return;
      }
      CollectiveOptions quick;
      quick.timeout = std::chrono::milliseconds(1500);
      try {
        allreduce(context, std::span(data), ReduceOp::sum, quick);  // #2
      } catch (const Error& error) {
        errors[static_cast<size_t>(context.rank())] = error.what();
      }
      ++finished;
    });
  });
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank << ": " << errors[static_cast<size_t>(rank)]);
    // The first to time out says it itself; the others may adopt its abort.
    CHECK_THAT(errors[static_cast<size_t>(rank)],
               Catch::Contains("rank 3 has not called allreduce #2 (rank 3 finished #1 and has called nothing since)"));
  }
}
