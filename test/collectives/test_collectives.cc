// Real-socket collectives: for each job size, one job of real rank
// processes (collective_rank) runs every (collective, algorithm) through the
// public API, bit-exactly, then point-to-point and the error cases. One job
// per size keeps the whole matrix in one connection.
#include <catch2/catch.hpp>

#include <chrono>
#include <iostream>
#include <string>

#include "test/integration/rank_job.h"

using namespace chorus::integration;
using namespace std::chrono_literals;

namespace {

std::string field(const std::map<std::string, std::string>& fields, const std::string& key) {
  auto found = fields.find(key);
  return found == fields.end() ? "" : found->second;
}

void run_job(int size, const std::string& scenario) {
  const int64_t started = driver_monotonic_ms();
  // The file store: the error cases build fresh Contexts through it.
  RankJob job({size, StoreKind::file, {scenario}});
  const bool finished = job.wait_for_all_exits(120s);
  INFO(job.transcript());
  REQUIRE(finished);
  std::string cases;
  for (int rank = 0; rank < size; ++rank) {
    auto result = job.result(rank);
    REQUIRE(result.has_value());
    CHECK(field(*result, "status") == "ok");
    CHECK(job.exit_status(rank) == 0);
    cases = field(*result, "cases");
  }
  auto first = job.result(0);
  std::cout << "[collectives] " << scenario << " N=" << size << ": " << cases << " cases in "
            << driver_monotonic_ms() - started << " ms; " << (first ? field(*first, "what") : "") << std::endl;
}

}  // namespace

TEST_CASE("every collective and algorithm, bit-exact, on real processes", "[collectives]") {
  for (int size : {2, 3, 4, 5, 8}) {
    DYNAMIC_SECTION(size << " processes") { run_job(size, "matrix"); }
  }
}

TEST_CASE("selection and argument errors on 6 processes", "[collectives]") { run_job(6, "errors"); }
