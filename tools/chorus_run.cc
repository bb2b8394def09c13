// chorus-run: start N ranks of a program on this host, the way mpirun or
// torchrun would, with the chorus env contract (CHORUS_RANK, CHORUS_SIZE,
// CHORUS_STORE, CHORUS_JOB_ID, and each rank's CHORUS_LOCAL_RANK/SIZE,
// LOCAL_RANK/LOCAL_WORLD_SIZE):
//
//   chorus-run -n 4 -- chorus-bench --op allreduce --check
//
// Every output line is prefixed "[rank N] "; SIGINT/SIGTERM/SIGHUP are
// forwarded to the ranks; when a rank fails the others are stopped and
// chorus-run's last line names the rank that failed first and why
// ("rank 2 failed first: stopped by SIGSTOP (ranks 0, 1, 3 report it lost or
// unresponsive)"): a rank stopped or killed, or named by the others, not
// merely the first survivor to exit (tools/first_failure.h).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tools/flag_checks.h"
#include "tools/launch_store.h"
#include "tools/local_launcher.h"
#include "base/version.h"


int main(int argc, char** argv) {
  CLI::App app{"chorus-run: start N local ranks of a program with the chorus environment (CHORUS_RANK, "
               "CHORUS_SIZE, CHORUS_STORE, CHORUS_JOB_ID) and supervise them"};
  app.set_version_flag("--version", std::string("chorus-run ") + chorus::version());
  chorus::tools::LaunchOptions options;
  options.launcher_name = "chorus-run";
  options.prefix_output = true;
  double grace_seconds = std::chrono::duration<double>(options.grace).count();
  app.add_option("-n,--ranks", options.ranks, "Number of ranks to start on this host")
      ->required()
      ->check(CLI::Range(1, 4096));
  app.add_option("--store", options.store,
                 "Rendezvous store: tcp (served by chorus-run), embedded (rank 0 hosts it), file (a temporary "
                 "directory), or a URL: redis://host:port[/db], tcp://host:port of a chorus-store, file:///dir")
      ->capture_default_str()
      ->check(chorus::tools::launch_store_problem);
  app.add_option("--grace,--timeout", grace_seconds,
                 "Seconds the other ranks get to exit after a rank fails or a signal is forwarded, before SIGTERM "
                 "(and as long again before SIGKILL)")
      ->capture_default_str()
      ->check(chorus::tools::FiniteRange(0.0, 86400.0));
  std::string fake_hosts_text;
  app.add_option("--fake-hosts", fake_hosts_text,
                 "Pretend the ranks run on several hosts of these sizes, e.g. 2,2: each rank gets CHORUS_HOST_ID "
                 "of its host, so shared memory serves a host's ranks and TCP the others")
      ->check([](const std::string& text) {
        return chorus::tools::parse_fake_hosts(text) ? std::string() : "expected ranks per host, e.g. 2,2";
      });
  app.add_option("program", options.argv, "The program and its arguments (after --)")->required();
  app.footer("Multi-host launches (--hosts a,b) are not supported yet: on several hosts use mpirun, srun or "
             "torchrun, which chorus detects (see the README).");
  CLI11_PARSE(app, argc, argv);
  if (!fake_hosts_text.empty()) options.fake_hosts = *chorus::tools::parse_fake_hosts(fake_hosts_text);
  long long held = 0;
  for (int host : options.fake_hosts) held += host;
  if (!options.fake_hosts.empty() && held != options.ranks) {
    std::fprintf(stderr, "chorus-run: --fake-hosts %s holds %lld ranks but --ranks is %d\n", fake_hosts_text.c_str(),
                 held, options.ranks);
    return 2;
  }
  // What every rank would refuse at connect, refused once before any starts.
  if (const std::string problem = chorus::tools::environment_problem(); !problem.empty()) {
    std::fprintf(stderr, "chorus-run: %s\n", problem.c_str());
    return 2;
  }
  options.grace = std::chrono::milliseconds(static_cast<long long>(grace_seconds * 1000));

  chorus::tools::LaunchResult result = chorus::tools::launch_local(options);
  if (result.exit_code != 0) {
    std::fprintf(stderr, "chorus-run: %s\n", result.description.c_str());
  }
  return result.exit_code;
}
