// Several TCP streams per pair of ranks on real processes: striped
// collectives bit-exact with 2 and 3 streams, and a job whose ranks disagree
// on the stream count failing on every rank at connect, naming both counts,
// well before the connect timeout. Plus the piece arithmetic both sides of a
// striped message must agree on.
#include <catch2/catch.hpp>

#include <chrono>
#include <iostream>
#include <string>

#include "algorithms/execution/striping.h"
#include "test/integration/rank_job.h"

using namespace chorus::integration;
using namespace std::chrono_literals;

namespace {

std::string field(const std::map<std::string, std::string>& fields, const std::string& key) {
  auto found = fields.find(key);
  return found == fields.end() ? "" : found->second;
}

// Runs the job; returns rank 0's RESULT fields after checking every rank's.
std::map<std::string, std::string> run_job(int size, const std::vector<std::string>& arguments) {
  const int64_t started = driver_monotonic_ms();
  RankJob job({size, StoreKind::file, arguments});
  const bool finished = job.wait_for_all_exits(60s);
  INFO(job.transcript());
  REQUIRE(finished);
  for (int rank = 0; rank < size; ++rank) {
    auto result = job.result(rank);
    REQUIRE(result.has_value());
    INFO("rank " << rank << ": " << field(*result, "what"));
    CHECK(field(*result, "status") == "ok");
    CHECK(job.exit_status(rank) == 0);
  }
  auto first = *job.result(0);
  std::cout << "[streams] " << arguments[0] << (arguments.size() > 1 ? " " + arguments[1] : "") << " N=" << size
            << ": " << field(first, "cases") << " cases in " << driver_monotonic_ms() - started << " ms; "
            << field(first, "what") << std::endl;
  return first;
}

}  // namespace

TEST_CASE("striped collectives are bit-exact with 2 and 3 streams", "[collectives][streams]") {
  SECTION("2 streams, 3 processes") { run_job(3, {"stripe", "2"}); }
  SECTION("3 streams, 4 processes") { run_job(4, {"stripe", "3"}); }
}

TEST_CASE("ranks with different stream counts all fail at connect, naming both counts", "[collectives][streams]") {
  auto result = run_job(3, {"mismatch"});
  // Each rank checked its own message; rank 0 must also have failed at once,
  // not after the 30 s connect timeout.
  CHECK(std::stoll(field(result, "ms")) < 10000);
}

TEST_CASE("stripes cover a message exactly, identically for any caller", "[streams]") {
  using chorus::algorithms::kStripeMinBytes;
  using chorus::algorithms::stripe;
  using chorus::algorithms::stripe_count;
  CHECK(stripe_count(kStripeMinBytes - 1, 4) == 1);
  CHECK(stripe_count(kStripeMinBytes, 4) == 4);
  CHECK(stripe_count(size_t{1} << 40, 1) == 1);
  for (size_t bytes : {kStripeMinBytes, kStripeMinBytes + 1, size_t{3} << 20, (size_t{3} << 30) + 7}) {
    for (size_t count : {size_t{2}, size_t{3}, size_t{16}}) {
      size_t next = 0;
      for (size_t index = 0; index < count; ++index) {
        auto piece = stripe(bytes, count, index);
        CHECK(piece.offset == next);
        CHECK(piece.length > 0);
        next = piece.offset + piece.length;
      }
      CHECK(next == bytes);
    }
  }
}
