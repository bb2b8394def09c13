// Every tool's flags (issues 29 and 45): each bad value (zero, negative,
// NaN, infinite, overflowing, unparsable, contradictory, too large for this
// host, a malformed CHORUS_* setting) is refused within a second, with a
// non-zero exit and a message naming the flag or variable; and a set of
// good values, suffixes and spellings included, still runs, so the checks
// cannot pass by refusing everything.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <string>
#include <sys/wait.h>
#include <vector>

#include "test/launch/child_process.h"

using chorus::test::ChildProcess;
using Clock = std::chrono::steady_clock;

namespace {

struct Case {
  const char* tool;  // the variable naming the tool's binary (meson's env)
  std::vector<std::string> arguments;
  std::string message;                  // what the output must contain
  std::vector<std::string> environment = {};
};

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string shown(const std::vector<std::string>& argv, const std::vector<std::string>& environment) {
  std::string text;
  for (const std::string& variable : environment) text += variable + " ";
  for (const std::string& argument : argv) text += argument + " ";
  return text;
}

std::vector<std::string> command(const Case& test_case) {
  std::vector<std::string> argv = {chorus::test::binary_from_environment(test_case.tool)};
  // chorus-bench forks its own ranks: the checks must come before it does.
  if (std::string(test_case.tool) == "CHORUS_BENCH") argv.insert(argv.end(), {"--ranks", "2"});
  argv.insert(argv.end(), test_case.arguments.begin(), test_case.arguments.end());
  return argv;
}

const std::vector<Case>& bad_cases() {
  static const std::vector<Case> cases = {
      // chorus-bench (benchmarks/chorus_bench.cc)
      {"CHORUS_BENCH", {"--min-bytes", "0"}, "--min-bytes: '0' is less than 1 byte"},
      {"CHORUS_BENCH", {"--min-bytes", "-5"}, "--min-bytes: '-5' is negative"},
      {"CHORUS_BENCH", {"--min-bytes", "nan"}, "--min-bytes: 'nan' is not a size"},
      {"CHORUS_BENCH", {"-b", "1M", "-e", "1K"}, "--min-bytes 1048576 is larger than --max-bytes 1024"},
      {"CHORUS_BENCH", {"--max-bytes", "1T"}, "--max-bytes 1 TiB of allreduce needs 2 TiB per rank (4 TiB for the 2 "
                                              "ranks on this host), this host has"},
      {"CHORUS_BENCH", {"--max-bytes", "99999999999999999999999"}, "--max-bytes: '99999999999999999999999' is more "
                                                                   "bytes than this machine can address"},
      {"CHORUS_BENCH", {"--max-bytes", "20000000000G"}, "--max-bytes: '20000000000G' is more bytes"},
      {"CHORUS_BENCH", {"--max-bytes", "1.5K"}, "--max-bytes: '1.5K' is not a size"},
      {"CHORUS_BENCH", {"--max-bytes", "0x10"}, "--max-bytes: '0x10' is not a size"},
      {"CHORUS_BENCH", {"--max-bytes", ""}, "--max-bytes: '' is not a size"},
      {"CHORUS_BENCH", {"--max-bytes", "inf"}, "--max-bytes: 'inf' is not a size"},
      {"CHORUS_BENCH", {"--step-factor", "nan"}, "--step-factor: 'nan' is not a finite number"},
      {"CHORUS_BENCH", {"--step-factor", "inf"}, "--step-factor: 'inf' is not a finite number"},
      {"CHORUS_BENCH", {"--step-factor", "1"}, "--step-factor: 1 is out of range"},
      {"CHORUS_BENCH", {"--step-factor", "-2"}, "--step-factor: -2 is out of range"},
      {"CHORUS_BENCH", {"--step-factor", "1e400"}, "--step-factor: '1e400' is not a finite number"},
      {"CHORUS_BENCH", {"--time-budget-ms", "0"}, "--time-budget-ms: 0 is out of range"},
      {"CHORUS_BENCH", {"--time-budget-ms", "nan"}, "--time-budget-ms: 'nan' is not a finite number"},
      {"CHORUS_BENCH", {"--time-budget-ms", "-inf"}, "--time-budget-ms: '-inf' is not a finite number"},
      {"CHORUS_BENCH", {"--iters", "-5"}, "--iters: Value -5 not in range"},
      {"CHORUS_BENCH", {"--iters", "nan"}, "--iters"},
      {"CHORUS_BENCH", {"--iters", "99999999999"}, "--iters"},
      {"CHORUS_BENCH", {"--warmup", "-1"}, "--warmup: Value -1 not in range"},
      {"CHORUS_BENCH", {"--rounds", "0"}, "--rounds: Value 0 not in range"},
      {"CHORUS_BENCH", {"--rounds", "1001"}, "--rounds: Value 1001 not in range"},
      {"CHORUS_BENCH", {"--timeout-ms", "0"}, "--timeout-ms: Value 0 not in range"},
      {"CHORUS_BENCH", {"--timeout-ms", "-1"}, "--timeout-ms: Value -1 not in range"},
      {"CHORUS_BENCH", {"--streams", "0"}, "--streams: Value 0 not in range"},
      {"CHORUS_BENCH", {"--streams", "17"}, "--streams: Value 17 not in range"},
      {"CHORUS_BENCH", {"--root", "-1"}, "--root -1 is not a rank"},
      {"CHORUS_BENCH", {"--op", "broadcast", "--root", "2"}, "--root 2 is out of range for 2 ranks"},
      {"CHORUS_BENCH", {"--op", "broadcast", "--in-place"}, "--in-place is for --op allreduce, not broadcast"},
      {"CHORUS_BENCH", {"--ranks", "-2"}, "--ranks: Value -2 not in range"},
      {"CHORUS_BENCH", {"--ranks", "5000"}, "--ranks: Value 5000 not in range"},
      {"CHORUS_BENCH", {"--ranks", "nan"}, "--ranks"},
      {"CHORUS_BENCH", {"--op", "allsum"}, "--op: allsum not in"},
      {"CHORUS_BENCH", {"--dtype", "float7"}, "--dtype"},
      {"CHORUS_BENCH", {"--redop", "median"}, "--redop"},
      {"CHORUS_BENCH", {"--algo", "nonesuch"}, "--algo nonesuch is not a allreduce algorithm"},
      {"CHORUS_BENCH", {"--device", "gpu"}, "--device gpu is not host, cuda or cuda:N"},
      {"CHORUS_BENCH", {"--device", "cuda:x"}, "--device cuda:x is not host, cuda or cuda:N"},
      {"CHORUS_BENCH", {"--transport", "carrier"}, "--transport carrier is not a transport of this build"},
      {"CHORUS_BENCH", {"--transport", "tcp,tcp"}, "--transport names tcp twice"},
      {"CHORUS_BENCH", {"--trace-steps"}, "--trace-steps adds the steps to a trace"},
      {"CHORUS_BENCH", {"--json", "/nonexistent/dir/rows.json"}, "--json /nonexistent/dir/rows.json: there is no "
                                                                "directory"},
      {"CHORUS_BENCH", {"--json", "/tmp"}, "--json /tmp is a directory"},
      {"CHORUS_BENCH", {"--fake-hosts", "2,x"}, "expected ranks per host"},
      {"CHORUS_BENCH", {"--fake-hosts", "1,2"}, "--fake-hosts holds 3 ranks but --ranks is 2"},
      {"CHORUS_BENCH", {}, "CHORUS_LOG='loud' is not a log level: it must be error, warn, info, debug or trace",
       {"CHORUS_LOG=loud"}},
      {"CHORUS_BENCH", {}, "CHORUS_TIMEOUT='-3' is not a number of seconds", {"CHORUS_TIMEOUT=-3"}},
      // chorus-run (tools/chorus_run.cc)
      {"CHORUS_RUN", {"-n", "0", "--", "true"}, "--ranks: Value 0 not in range"},
      {"CHORUS_RUN", {"-n", "5000", "--", "true"}, "--ranks: Value 5000 not in range"},
      {"CHORUS_RUN", {"-n", "nan", "--", "true"}, "--ranks"},
      {"CHORUS_RUN", {"-n", "2", "--grace", "-1", "--", "true"}, "--grace: -1 is out of range"},
      {"CHORUS_RUN", {"-n", "2", "--grace", "nan", "--", "true"}, "--grace: 'nan' is not a finite number"},
      {"CHORUS_RUN", {"-n", "2", "--timeout", "inf", "--", "true"}, "--grace: 'inf' is not a finite number"},
      {"CHORUS_RUN", {"-n", "2", "--store", "nfs", "--", "true"}, "--store: 'nfs' is not tcp, embedded, file or a URL"},
      {"CHORUS_RUN", {"-n", "2", "--store", "tcp://host", "--", "true"}, "--store: store URL 'tcp://host' has no port"},
      {"CHORUS_RUN", {"-n", "2", "--store", "redis://h:99999", "--", "true"}, "--store: store URL 'redis://h:99999'"},
      {"CHORUS_RUN", {"-n", "2", "--fake-hosts", "0", "--", "true"}, "--fake-hosts"},
      {"CHORUS_RUN", {"-n", "3", "--fake-hosts", "2,2", "--", "true"}, "--fake-hosts 2,2 holds 4 ranks but --ranks is 3"},
      {"CHORUS_RUN", {"-n", "2"}, "program is required"},
      {"CHORUS_RUN", {"-n", "2", "--", "true"}, "chorus-run: CHORUS_LOG='loud' is not a log level", {"CHORUS_LOG=loud"}},
      {"CHORUS_RUN", {"-n", "2", "--", "true"}, "chorus-run: CHORUS_TIMEOUT='x' is not a number of seconds",
       {"CHORUS_TIMEOUT=x"}},
      // chorus-soak (tools/chorus_soak.cc): no launcher here, so only a check before connect answers in time
      {"CHORUS_SOAK", {"--count", "0"}, "--count: Value 0 not in range"},
      {"CHORUS_SOAK", {"--count", "-1"}, "--count: '-1' is not a whole number"},
      {"CHORUS_SOAK", {"--seed", "-1"}, "--seed: '-1' is not a whole number"},
      {"CHORUS_SOAK", {"--report-every", "-1"}, "--report-every: '-1' is not a whole number"},
      {"CHORUS_SOAK", {"--inject-wrong", "-1"}, "--inject-wrong: '-1' is not a whole number"},
      {"CHORUS_SOAK", {"--count", "5", "--inject-wrong", "5"}, "--inject-wrong 5 is not below --count 5"},
      {"CHORUS_SOAK", {"--seconds", "-1"}, "--seconds: -1 is out of range"},
      {"CHORUS_SOAK", {"--seconds", "nan"}, "--seconds: 'nan' is not a finite number"},
      {"CHORUS_SOAK", {"--seconds", "inf"}, "--seconds: 'inf' is not a finite number"},
      {"CHORUS_SOAK", {"--max-bytes", "4"}, "--max-bytes: '4' is less than 8 bytes"},
      {"CHORUS_SOAK", {"--max-bytes", "-5"}, "--max-bytes: '-5' is negative"},
      {"CHORUS_SOAK", {"--max-bytes", "1.5K"}, "--max-bytes: '1.5K' is not a size"},
      {"CHORUS_SOAK", {"--max-bytes", "1T"}, "--max-bytes 1 TiB needs 2 TiB per rank, this host has"},
      {"CHORUS_SOAK", {"--timeout", "0"}, "--timeout: 0 is out of range"},
      {"CHORUS_SOAK", {"--timeout", "nan"}, "--timeout: 'nan' is not a finite number"},
      {"CHORUS_SOAK", {"--batch", "0"}, "--batch: Value 0 not in range"},
      {"CHORUS_SOAK", {"--batch", "17"}, "--batch: Value 17 not in range"},
      {"CHORUS_SOAK", {"--split-chance", "2"}, "--split-chance: 2 is out of range"},
      {"CHORUS_SOAK", {"--split-chance", "nan"}, "--split-chance: 'nan' is not a finite number"},
      {"CHORUS_SOAK", {"--collectives", "allsum"}, "--collectives: unknown collective 'allsum'"},
      {"CHORUS_SOAK", {}, "CHORUS_LOG='loud' is not a log level", {"CHORUS_LOG=loud"}},
      // chorus-store (tools/chorus-store.cc)
      {"CHORUS_STORE_PROGRAM", {"--port", "0"}, "--host is required"},
      {"CHORUS_STORE_PROGRAM", {"--host", "127.0.0.1", "--port", "70000"}, "--port"},
      {"CHORUS_STORE_PROGRAM", {"--host", "127.0.0.1", "--port", "-1"}, "--port"},
      {"CHORUS_STORE_PROGRAM", {"--host", "127.0.0.1", "--port", "nan"}, "--port"},
      {"CHORUS_STORE_PROGRAM", {"--host", "192.0.2.1", "--port", "0"}, "--host 192.0.2.1 --port 0: "},
      {"CHORUS_STORE_PROGRAM", {"--host", "127.0.0.1"}, "CHORUS_LOG='loud' is not a log level", {"CHORUS_LOG=loud"}},
      // chorus-project (tools/chorus_project.cc)
      {"CHORUS_PROJECT", {"--hosts", "0"}, "--hosts: Value 0 not in range"},
      {"CHORUS_PROJECT", {"--hosts", "-1"}, "--hosts: Value -1 not in range"},
      {"CHORUS_PROJECT", {"--hosts", "nan"}, "--hosts"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--ranks-per-host", "0"}, "--ranks-per-host: Value 0 not in range"},
      {"CHORUS_PROJECT", {"--hosts", "65536", "--ranks-per-host", "65536"}, "--hosts 65536 x --ranks-per-host 65536 "
                                                                            "is 4294967296 ranks, more than a job"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--gamma-gbps", "0"}, "--gamma-gbps must be a positive number"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--gamma-gbps", "nan"}, "--gamma-gbps must be a positive number"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--step-us", "nan"}, "--step-us must be a non-negative number"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--step-us", "-1"}, "--step-us must be a non-negative number"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--oversubscription", "nan"}, "--oversubscription: 'nan' is not a finite"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--oversubscription", "0.5"}, "--oversubscription: 0.5 is out of range"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--step-budget", "0"}, "--step-budget: Value 0 not in range"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--step-budget", "-1"}, "--step-budget: '-1' is not a whole number"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--op", "allsum"}, "--op: unknown collective 'allsum'"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--method", "guess"}, "--method: expected automatic"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--algo", "nonesuch"}, "--algo: no allreduce algorithm 'nonesuch'"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--sizes", "0"}, "--sizes: a size must be at least 1 byte"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--sizes", "8,-1"}, "--sizes: '-1' is negative"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--sizes", "999999999999G"}, "--sizes: '999999999999G' is more bytes"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--sizes", "1.5K"}, "--sizes: '1.5K' is not a size"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--local", "alpha_us=nan"}, "--local alpha_us=nan: link model: alpha_us"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--remote", "gbps=0"}, "--remote gbps=0: link model: gbps"},
      {"CHORUS_PROJECT", {"--hosts", "2"}, "CHORUS_LOG='loud' is not a log level", {"CHORUS_LOG=loud"}},
      // chorus-connect-bench (benchmarks/connect_bench.cc)
      {"CHORUS_CONNECT_BENCH", {"--ranks", "0"}, "--ranks: Value 0 not in range"},
      {"CHORUS_CONNECT_BENCH", {"--ranks", "2,1025"}, "--ranks: Value 1025 not in range"},
      {"CHORUS_CONNECT_BENCH", {"--repeats", "0"}, "--repeats: Value 0 not in range"},
      {"CHORUS_CONNECT_BENCH", {"--connections", "sometimes"}, "--connections: 'sometimes' is not full"},
      {"CHORUS_CONNECT_BENCH", {"--stores", "tcp,nfs"}, "--stores: 'nfs' is not tcp, embedded, file or a URL"},
      {"CHORUS_CONNECT_BENCH", {"--stores", "tcp://host"}, "--stores: store URL 'tcp://host' has no port"},
      {"CHORUS_CONNECT_BENCH", {"--stores", ","}, "--stores names no store"},
      {"CHORUS_CONNECT_BENCH", {}, "CHORUS_LOG='loud' is not a log level", {"CHORUS_LOG=loud"}},
      // chorus-reduce-bench (benchmarks/reduce_bench.cc)
      {"CHORUS_REDUCE_BENCH", {"--sizes", "0"}, "--sizes: '0' is less than 1 byte"},
      {"CHORUS_REDUCE_BENCH", {"--sizes", "-1"}, "--sizes: '-1' is negative"},
      {"CHORUS_REDUCE_BENCH", {"--sizes", "lots"}, "--sizes: 'lots' is not a size"},
      {"CHORUS_REDUCE_BENCH", {"--sizes", "5G"}, "--sizes: Value 5368709120 not in range"},
      {"CHORUS_REDUCE_BENCH", {"--dtypes", "float7"}, "unknown element type 'float7'"},
      {"CHORUS_REDUCE_BENCH", {"--rounds", "0"}, "--rounds: Value 0 not in range"},
      {"CHORUS_REDUCE_BENCH", {}, "CHORUS_LOG='loud' is not a log level", {"CHORUS_LOG=loud"}},
      // chorus-parameter-server (benchmarks/parameter_server.cc)
      {"CHORUS_PARAMETER_SERVER", {"--params", "0"}, "--params: Value 0 not in range"},
      {"CHORUS_PARAMETER_SERVER", {"--params", "-1"}, "--params: '-1' is not a whole number"},
      {"CHORUS_PARAMETER_SERVER", {"--steps", "0"}, "--steps: Value 0 not in range"},
      {"CHORUS_PARAMETER_SERVER", {"--steps", "nan"}, "--steps: 'nan' is not a whole number"},
      {"CHORUS_PARAMETER_SERVER", {}, "CHORUS_LOG='loud' is not a log level", {"CHORUS_LOG=loud"}},
      // chorus-trace-merge (tools/chorus_trace_merge.py)
      {"CHORUS_TRACE_MERGE", {"/nonexistent/trace.json", "-o", "/tmp/chorus-merged.json"}, "cannot read the trace "
                                                                                          "/nonexistent/trace.json"},
      {"CHORUS_TRACE_MERGE", {"/nonexistent/trace.json", "-o", "/nonexistent/dir/out.json"}, "-o/--output "
                                                                                            "/nonexistent/dir/out.json"},
      {"CHORUS_TRACE_MERGE", {"/nonexistent/trace.json"}, "-o/--output"},
  };
  return cases;
}

}  // namespace

TEST_CASE("every tool refuses each bad flag value at once, naming the flag", "[launch][tools]") {
  for (const Case& bad : bad_cases()) {
    const std::vector<std::string> argv = command(bad);
    const auto start = Clock::now();
    ChildProcess run(argv, bad.environment);
    const int status = run.wait(std::chrono::seconds(10));
    const double elapsed = seconds_since(start);
    INFO(shown(argv, bad.environment) << "took " << elapsed << " s and said: " << run.output());
    CHECK(elapsed < 1);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) != 0);
    CHECK_THAT(run.output(), Catch::Contains(bad.message));
    // Refused, not run: no rank printed a row or a result.
    CHECK_THAT(run.output(), !Catch::Contains("# OK"));
    CHECK_THAT(run.output(), !Catch::Contains("[rank "));
  }
}

// The other half: what the checks must not refuse. Each runs to a clean exit.
TEST_CASE("every tool still takes good values, suffixes and spellings", "[launch][tools]") {
  chorus::test::TemporaryDirectory directory;
  const std::vector<Case> cases = {
      {"CHORUS_BENCH", {"-b", "1k", "-e", "4KiB", "-f", "1.5", "--time-budget-ms", "1", "--rounds", "1", "--warmup", "0"},
       "# chorus-bench: allreduce"},
      {"CHORUS_BENCH", {"-b", "8", "-e", "8", "--iters", "1", "--check", "--op", "broadcast", "--root", "1"}, "# OK"},
      {"CHORUS_BENCH", {"-b", "64", "-e", "1kb", "--iters", "2", "--algo", "ring", "--json", directory.path() + "/rows.json"},
       "# chorus-bench: allreduce"},
      {"CHORUS_RUN", {"-n", "2", "--grace", "0.5", "--store", "file", "--", "true"}, "", {"CHORUS_LOG=DEBUG"}},
      {"CHORUS_RUN", {"-n", "2", "--fake-hosts", "1,1", "--", "true"}, "", {"CHORUS_TIMEOUT=2.5"}},
      {"CHORUS_RUN", {"-n", "2", "--", chorus::test::binary_from_environment("CHORUS_SOAK"), "--count", "20",
                      "--max-bytes", "4K", "--seconds", "20", "--split-chance", "0", "--seed", "7", "--timeout", "10"},
       "chorus-soak"},
      {"CHORUS_RUN", {"-n", "2", "--", chorus::test::binary_from_environment("CHORUS_PARAMETER_SERVER"), "--params",
                      "1000", "--steps", "1"},
       "parameter_server OK"},
      {"CHORUS_PROJECT", {"--hosts", "2", "--ranks-per-host", "2", "--sizes", "8,1K,1m", "--oversubscription", "1",
                          "--local", "alpha_us=2,gbps=20", "--step-budget", "100000"},
       "auto chooses"},
      {"CHORUS_REDUCE_BENCH", {"--sizes", "1K", "--dtypes", "float32", "--rounds", "1"}, "float32"},
      {"CHORUS_CONNECT_BENCH", {"--stores", "tcp", "--ranks", "2", "--repeats", "1"}, "| tcp | full | 2 |"},
  };
  for (const Case& good : cases) {
    const std::vector<std::string> argv = command(good);
    ChildProcess process(argv, good.environment);
    const int status = process.wait(std::chrono::seconds(60));
    INFO(shown(argv, good.environment) << "said: " << process.output());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK_THAT(process.output(), Catch::Contains(good.message));
  }
  // A store serves until stopped: it must get as far as listening.
  ChildProcess store({chorus::test::binary_from_environment("CHORUS_STORE_PROGRAM"), "--host", "127.0.0.1", "--port",
                      "0"},
                     {"CHORUS_SECRET=0123456789abcdef0123"});
  CHECK(store.wait_for_output("chorus-store listening on 127.0.0.1:", 1, std::chrono::seconds(10)));
  ::kill(store.pid(), SIGTERM);
  CHECK(store.wait(std::chrono::seconds(10)) == 0);
}
