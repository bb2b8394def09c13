// One rank of a real-socket collectives job (started by test_collectives
// through test/integration's RankJob). Scenarios (argv[1]):
//   matrix  every (collective, algorithm) through the public API, then
//           point-to-point, then the error cases on fresh Contexts
//   errors  only the error cases
// and prints one line the driver parses:
//   RESULT rank=2 status=ok cases=812 what=...
// Exit code 0 when everything behaved, 1 otherwise, 3 when joining failed.
#include <chorus/chorus.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "base/log.h"
#include "test/collectives/collective_matrix.h"
#include "test/collectives/point_to_point_checks.h"
#include "test/collectives/rank_errors.h"

namespace {

using namespace chorus;
using namespace chorus::collective_test;

// CHORUS_TEST_HOSTS="blocks:H" or "interleaved:H" fakes H hosts (through
// CHORUS_HOST_ID, before connecting): rank r of N on host r*H/N, or on r%H.
// Ranks on one fake host talk over shared memory, the others over TCP.
void fake_host_from_environment() {
  const char* spec = std::getenv("CHORUS_TEST_HOSTS");
  const char* rank_text = std::getenv("CHORUS_RANK");
  const char* size_text = std::getenv("CHORUS_SIZE");
  if (!spec || !rank_text || !size_text) return;
  const std::string text(spec);
  const size_t colon = text.find(':');
  const int hosts = std::stoi(text.substr(colon + 1));
  const int rank = std::stoi(rank_text), size = std::stoi(size_text);
  const int host = text.rfind("interleaved", 0) == 0 ? rank % hosts : rank * hosts / size;
  ::setenv("CHORUS_HOST_ID", ("fake-host-" + std::to_string(host)).c_str(), 1);
}

int report(int rank, bool ok, size_t cases, const std::string& what) {
  std::printf("RESULT rank=%d status=%s cases=%zu what=%s\n", rank, ok ? "ok" : "fail", cases, what.c_str());
  std::fflush(stdout);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: collective_rank matrix|errors\n");
    return 2;
  }
  const std::string scenario = argv[1];
  std::shared_ptr<Context> context;
  try {
    fake_host_from_environment();
    ConnectOptions options;
    options.timeout = std::chrono::milliseconds(30000);
    context = connect_from_env(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "collective_rank: joining failed: %s\n", error.what());
    return 3;
  }
  const int rank = context->rank();
  size_t cases = 0;
  std::string notes;
  try {
    if (scenario == "matrix") {
      MatrixOutcome outcome = run_matrix(*context);
      cases += outcome.cases_run;
      if (!outcome.failure.empty()) return report(rank, false, cases, outcome.failure);
      for (const std::string& skipped : outcome.skipped) notes += skipped + "; ";
      std::string failure = check_point_to_point(*context, cases);
      if (!failure.empty()) return report(rank, false, cases, failure);
      // The Context is still healthy after all of that.
      barrier(*context);
    }
    std::string failure = check_errors(*context, cases);
    if (!failure.empty()) return report(rank, false, cases, failure);
  } catch (const std::exception& error) {
    return report(rank, false, cases, cat("unexpected error: ", error.what()));
  }
  return report(rank, true, cases, notes.empty() ? "all supported" : notes);
}
