// Context::statistics() and the Chrome trace (CHORUS_TRACE), with ranks as
// threads of this process: the counters against what the calls must have
// moved, and the trace file parsed back and checked event by event.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <thread>
#include <vector>

#include "base/trace.h"
#include "chorus/chorus.h"
#include "test/integration/rank_threads.h"
#include "test/integration/trace_files.h"

using namespace chorus;
using chorus::testing::require_all_ok;
using chorus::testing::run_ranks;

namespace {

std::filesystem::path fresh_directory(const std::string& name) {
  return chorus::testing::fresh_directory("telemetry", name);
}

using chorus::testing::read_trace;

std::vector<std::filesystem::path> files_in(const std::filesystem::path& directory) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) files.push_back(entry.path());
  return files;
}

// Rank 0 calls an allreduce that rank 1 never joins and times out; rank 1
// stays connected meanwhile (closing would fail rank 0 another way).
void time_out_alone(Context& context, std::atomic<bool>& done) {
  if (context.rank() != 0) {
    while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return;
  }
  std::vector<float> data(4, 1.0f);
  CollectiveOptions quick;
  quick.timeout = std::chrono::milliseconds(300);
  CHECK_THROWS_AS(allreduce(context, std::span(data), ReduceOp::sum, quick), TimeoutError);
}

}  // namespace

TEST_CASE("trace file names carry the rank", "[trace]") {
  CHECK(trace_path_for_rank("/tmp/run/trace.json", 3) == "/tmp/run/trace.rank3.json");
  CHECK(trace_path_for_rank("/tmp/run/trace-{rank}.json", 12) == "/tmp/run/trace-12.json");
  CHECK(trace_path_for_rank("trace", 0) == "trace.rank0");
  CHECK(trace_path_for_rank("/tmp/run.d/trace", 1) == "/tmp/run.d/trace.rank1");
  CHECK(trace_path_for_rank(".trace", 2) == ".trace.rank2");
  CHECK(json_string("a\"b\\c\n\x01") == "\"a\\\"b\\\\c\\n\\u0001\"");
}

TEST_CASE("statistics count calls, bytes and time", "[statistics]") {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 1000;
  std::vector<ContextStatistics> seen(kRanks), child_seen(kRanks);
  require_all_ok(run_ranks(kRanks, [&](Context& context) {
    const int rank = context.rank();
    CHECK(context.statistics().collectives == 0);
    std::vector<float> data(kCount, 1.0f);
    CollectiveOptions ring;
    ring.algorithm = "ring";
    for (int i = 0; i < 4; ++i) allreduce(context, std::span(data), ReduceOp::sum, ring);
    std::vector<float> more(kCount, 2.0f);
    Work pending = allreduce_async(context, std::span(more), ReduceOp::sum, ring);
    pending.wait();
    std::vector<int32_t> message(10, rank);
    if (rank == 0) send(context, std::span<const int32_t>(message), 1, 7);
    if (rank == 1) recv(context, std::span(message), 0, 7);
    barrier(context);
    seen[static_cast<size_t>(rank)] = context.statistics();
    // A split child counts its own calls from zero.
    std::shared_ptr<Context> child = context.split(rank % 2, rank);
    allreduce(*child, std::span(data), ReduceOp::sum);
    child_seen[static_cast<size_t>(rank)] = child->statistics();
  }));
  uint64_t sent = 0, received = 0;
  for (int rank = 0; rank < kRanks; ++rank) {
    const ContextStatistics& s = seen[static_cast<size_t>(rank)];
    INFO("rank " << rank);
    CHECK(s.collectives == 6);  // 5 allreduces and the barrier
    CHECK(s.failed_collectives == 0);
    CHECK(s.messages_sent == (rank == 0 ? 1u : 0u));
    CHECK(s.messages_received == (rank == 1 ? 1u : 0u));
    CHECK(s.time_in_collectives.count() > 0);
    CHECK(s.time_waiting.count() > 0);
    sent += s.bytes_sent;
    received += s.bytes_received;
    CHECK(child_seen[static_cast<size_t>(rank)].collectives == 1);
  }
  // Every byte sent is received; a ring allreduce moves 2 (P - 1) times the
  // buffer over all ranks together; the message 40 bytes; a barrier's tokens
  // (equal on both sides) whatever they are.
  CHECK(sent == received);
  const uint64_t ring_bytes = 5 * 2 * (kRanks - 1) * kCount * sizeof(float);
  CHECK(sent >= ring_bytes + 40);
  CHECK(sent <= ring_bytes + 40 + 1024);
}

TEST_CASE("a collective that fails counts as failed", "[statistics]") {
  std::atomic<uint64_t> failed{0}, finished{0};
  std::atomic<bool> done{false};
  run_ranks(2, [&](Context& context) {
    time_out_alone(context, done);
    if (context.rank() != 0) return;
    failed = context.statistics().failed_collectives;
    finished = context.statistics().collectives;
    done = true;
  });
  CHECK(failed == 1);
  CHECK(finished == 1);
}

TEST_CASE("the trace holds one event per collective and message, and the steps when asked", "[trace]") {
  const auto directory = fresh_directory("steps");
  const std::string path = (directory / "trace-{rank}.json").string();
  constexpr int kRanks = 3;
  require_all_ok(run_ranks(
      kRanks,
      [&](Context& context) {
        std::vector<float> data(1 << 12, 1.0f);
        CollectiveOptions ring;
        ring.algorithm = "ring";
        allreduce(context, std::span(data), ReduceOp::sum, ring);
        broadcast(context, std::span(data), 2);
        std::vector<int64_t> message(3);
        if (context.rank() == 1) send(context, std::span<const int64_t>(message), 2, 5);
        if (context.rank() == 2) recv(context, std::span(message), 1, 5);
        std::shared_ptr<Context> child = context.split(0, context.rank());
        barrier(*child);
      },
      std::chrono::milliseconds(20000),
      [&](int, ConnectOptions& options) {
        options.trace = path;
        options.trace_steps = true;
      }));
  // One process: the first Context to open CHORUS_TRACE names the file, and
  // every other Context of the process writes into it on a track of its own.
  const std::vector<std::filesystem::path> files = files_in(directory);
  REQUIRE(files.size() == 1);
  const nlohmann::json trace = read_trace(files[0]);
  REQUIRE(trace.is_array());
  std::map<int, std::string> tracks;           // tid -> name
  std::map<int, std::vector<nlohmann::json>> spans;  // tid -> collective and message spans
  int step_begins = 0, step_ends = 0;
  for (const nlohmann::json& event : trace) {
    const std::string phase = event.at("ph");
    if (phase == "M" && event.at("name") == "thread_name") tracks[event.at("tid")] = event.at("args").at("name");
    if (phase == "X") spans[event.at("tid")].push_back(event);
    if (phase == "b") {
      ++step_begins;
      CHECK(event.at("cat") == "step");
      CHECK(event.at("args").contains("bytes"));
    }
    if (phase == "e") ++step_ends;
  }
  CHECK(tracks.size() == 2 * kRanks);  // each rank's Context and its split child
  CHECK(step_begins > 0);
  CHECK(step_begins == step_ends);
  int allreduces = 0, broadcasts = 0, barriers = 0, sends = 0, recvs = 0;
  uint64_t allreduce_sent = 0, allreduce_received = 0;
  for (const auto& [tid, events] : spans) {
    INFO("track " << tracks[tid]);
    for (const nlohmann::json& event : events) {
      const std::string name = event.at("name");
      const nlohmann::json& args = event.at("args");
      CHECK(event.at("dur").get<double>() >= 0);
      CHECK(event.at("ts").get<double>() > 1.6e15);  // wall clock, microseconds since 1970
      CHECK_FALSE(args.contains("error"));
      if (name == "allreduce") {
        ++allreduces;
        CHECK(event.at("cat") == "collective");
        CHECK(args.at("algorithm") == "ring");
        CHECK(args.at("dtype") == "float32");
        CHECK(args.at("op") == "sum");
        CHECK(args.at("bytes") == (1 << 12) * 4);
        CHECK(args.at("count") == 1 << 12);
        CHECK(args.at("seq") == 0);
        CHECK(args.at("peers").size() == 2);
        CHECK(args.at("transport") == "shm");
        allreduce_sent += args.at("sent").get<uint64_t>();
        allreduce_received += args.at("received").get<uint64_t>();
      } else if (name == "broadcast") {
        ++broadcasts;
        CHECK(args.at("root") == 2);
        CHECK(args.at("seq") == 1);
      } else if (name == "barrier") {
        ++barriers;
        CHECK(tracks[tid].find("split") != std::string::npos);
      } else if (name == "send" || name == "recv") {
        (name == "send" ? sends : recvs)++;
        CHECK(event.at("cat") == "message");
        CHECK(args.at("peer") == (name == "send" ? 2 : 1));
        CHECK(args.at("tag") == 5);
        CHECK(args.at("bytes") == 24);
      }
    }
  }
  CHECK(allreduces == kRanks);
  // Ring chunks differ by an element between ranks; over the job, what is
  // sent is received: 2 (P - 1) times the buffer.
  CHECK(allreduce_sent == allreduce_received);
  CHECK(allreduce_sent == 2 * (kRanks - 1) * (1 << 12) * 4);
  CHECK(broadcasts == kRanks);
  CHECK(barriers == kRanks);
  CHECK(sends == 1);
  CHECK(recvs == 1);
}

TEST_CASE("a failed collective is traced with its error", "[trace]") {
  const auto directory = fresh_directory("failed");
  const std::string path = (directory / "trace.json").string();
  std::atomic<bool> done{false};
  run_ranks(
      2,
      [&](Context& context) {
        time_out_alone(context, done);
        done = true;
      },
      std::chrono::milliseconds(20000), [&](int, ConnectOptions& options) { options.trace = path; });
  const std::vector<std::filesystem::path> files = files_in(directory);
  REQUIRE(files.size() == 1);
  const nlohmann::json trace = read_trace(files[0]);
  int failed = 0;
  for (const nlohmann::json& event : trace) {
    if (event.at("ph") != "X") continue;
    CHECK(event.at("name") == "allreduce");
    const std::string error = event.at("args").at("error");
    CHECK(error.find("timed out") != std::string::npos);
    ++failed;
  }
  CHECK(failed == 1);
}

TEST_CASE("an unusable trace path fails connect naming it", "[trace]") {
  const auto outcomes = run_ranks(
      1, [](Context&) {}, std::chrono::milliseconds(5000),
      [](int, ConnectOptions& options) { options.trace = "/nonexistent-directory/chorus/trace.json"; });
  REQUIRE(outcomes[0].error);
  try {
    std::rethrow_exception(outcomes[0].error);
  } catch (const IoError& error) {
    CHECK(std::string(error.what()).find("/nonexistent-directory/chorus/trace.rank0.json") != std::string::npos);
  }
}
