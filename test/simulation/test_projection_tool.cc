// chorus-project as a user runs it: its table, and clear errors for bad
// arguments. The tool's path comes from CHORUS_PROJECT (test/algorithms/meson.build).
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/wait.h>

namespace {

struct Result {
  int status = -1;
  std::string output;  // stdout and stderr
};

Result run_tool(const std::string& arguments) {
  const char* tool = std::getenv("CHORUS_PROJECT");
  REQUIRE(tool != nullptr);
  Result result;
  FILE* pipe = popen((std::string(tool) + " " + arguments + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, got);
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace

TEST_CASE("chorus-project prints every algorithm and auto's choice", "[tool]") {
  const Result result = run_tool("--hosts 4 --ranks-per-host 2 --remote alpha_us=5,gbps=1 --op allreduce --sizes 8,1M");
  INFO(result.output);
  CHECK(result.status == 0);
  for (const char* name : {"ring", "recursive_doubling", "halving_doubling", "hierarchical", "hierarchical_leader"})
    CHECK(result.output.find(name) != std::string::npos);
  CHECK(result.output.find("8 ranks (4 hosts x 2 ranks") != std::string::npos);
  CHECK(result.output.find("simulated") != std::string::npos);
  CHECK(result.output.find("1048576  auto chooses") != std::string::npos);
  CHECK(result.output.find("best") != std::string::npos);
}

TEST_CASE("chorus-project rejects bad arguments with a clear message", "[tool]") {
  struct Case {
    const char* arguments;
    const char* message;
  };
  const Case cases[] = {
      {"--hosts 0", "--hosts: Value 0 not in range 1"},
      {"--hosts 4 --op allreduc", "unknown collective 'allreduc'"},
      {"--hosts 4 --sizes 8,1X", "--sizes: '1X' is not a size"},
      {"--hosts 4 --sizes 0", "at least 1 byte"},
      {"--hosts 4 --remote gbps=fast", "gbps must be a positive number"},
      {"--hosts 4 --local speed=1", "unknown key 'speed'"},
      {"--hosts 4 --oversubscription 0.5", "--oversubscription: 0.5 is out of range"},
      {"--hosts 4 --algo ring,nope", "no allreduce algorithm 'nope'"},
      {"--hosts 4 --method guess", "--method: expected"},
      {"--hosts 70000 --ranks-per-host 70000", "more than a job can hold"},
  };
  for (const Case& test : cases) {
    const Result result = run_tool(test.arguments);
    INFO(test.arguments << "\n" << result.output);
    // 2 for the tool's own checks, CLI11's code (105) for a range it checks.
    CHECK((result.status == 2 || result.status == 105));
    CHECK(result.output.find(test.message) != std::string::npos);
  }
  CHECK(run_tool("").status != 0);  // --hosts is required
}
