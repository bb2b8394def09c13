// Every launcher environment, for real: three processes get only the
// variables that launcher would set, connect through connect_from_env() and
// allreduce (launch_rank checks the result bit-exactly). Half-set
// environments must fail fast with an InvalidArgument naming the variable.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <sys/wait.h>
#include <vector>

#include "rendezvous/tcp_store.h"
#include "test/launch/child_process.h"

using chorus::test::ChildProcess;

namespace {

constexpr int kRanks = 3;
constexpr auto kJobTimeout = std::chrono::seconds(20);

std::string launch_rank() { return chorus::test::binary_from_environment("CHORUS_LAUNCH_RANK"); }

// Starts kRanks launch_rank processes, rank r with variables(r), and checks
// that each connected through `source` and computed the right sum.
void run_job(const std::string& source, const std::string& job_id,
             const std::function<std::vector<std::string>(int rank)>& variables) {
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int rank = 0; rank < kRanks; ++rank) {
    std::vector<std::string> environment = variables(rank);
    environment.push_back("CHORUS_LOG=info");
    ranks.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{launch_rank()}, environment));
  }
  for (int rank = 0; rank < kRanks; ++rank) {
    ChildProcess& process = *ranks[static_cast<size_t>(rank)];
    int status = process.wait(kJobTimeout);
    INFO("rank " << rank << " output:\n" << process.output());
    CHECK(status == 0);
    CHECK_THAT(process.output(), Catch::Contains(std::to_string(rank) + " of 3 via " + source + " (job id '" + job_id +
                                                 "'): allreduce ok"));
    // connect_from_env logs at info which launcher it found.
    CHECK_THAT(process.output(), Catch::Contains("launch environment: " + source + ": rank " + std::to_string(rank)));
  }
}

std::string tcp_store(int port) { return "tcp://127.0.0.1:" + std::to_string(port); }

}  // namespace

TEST_CASE("CHORUS_* with rank 0 hosting the TcpStore", "[launch][env]") {
  int port = chorus::test::free_port();
  run_job("CHORUS_*", "chorus-vars", [&](int rank) {
    return std::vector<std::string>{"CHORUS_RANK=" + std::to_string(rank), "CHORUS_SIZE=3",
                                    "CHORUS_STORE=" + tcp_store(port), "CHORUS_JOB_ID=chorus-vars"};
  });
}

TEST_CASE("torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT", "[launch][env]") {
  int port = chorus::test::free_port();
  run_job("torchrun", "elastic-7", [&](int rank) {
    return std::vector<std::string>{"RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank),
                                    "WORLD_SIZE=3", "LOCAL_WORLD_SIZE=3", "MASTER_ADDR=127.0.0.1",
                                    "MASTER_PORT=" + std::to_string(port), "TORCHELASTIC_RUN_ID=elastic-7"};
  });
}

TEST_CASE("Open MPI's OMPI_COMM_WORLD_* with CHORUS_STORE=file://", "[launch][env]") {
  chorus::test::TemporaryDirectory directory;
  // The file store needs a job id; Open MPI's PMIx namespace is one.
  run_job("Open MPI", "prterun-test-1@1", [&](int rank) {
    return std::vector<std::string>{"OMPI_COMM_WORLD_RANK=" + std::to_string(rank), "OMPI_COMM_WORLD_SIZE=3",
                                    "OMPI_COMM_WORLD_LOCAL_RANK=" + std::to_string(rank),
                                    "PMIX_NAMESPACE=prterun-test-1@1", "CHORUS_STORE=file://" + directory.path()};
  });
}

TEST_CASE("PMI_RANK/PMI_SIZE with MASTER_ADDR/MASTER_PORT", "[launch][env]") {
  int port = chorus::test::free_port();
  run_job("PMI", "", [&](int rank) {
    return std::vector<std::string>{"PMI_RANK=" + std::to_string(rank), "PMI_SIZE=3", "MASTER_ADDR=127.0.0.1",
                                    "MASTER_PORT=" + std::to_string(port)};
  });
}

TEST_CASE("Slurm's SLURM_PROCID/SLURM_NTASKS with CHORUS_STORE, job id from SLURM_JOB_ID.SLURM_STEP_ID",
          "[launch][env]") {
  chorus::test::TemporaryDirectory directory;
  run_job("Slurm", "4242.0", [&](int rank) {
    return std::vector<std::string>{"SLURM_PROCID=" + std::to_string(rank), "SLURM_NTASKS=3", "SLURM_JOB_ID=4242",
                                    "SLURM_STEP_ID=0", "SLURM_LOCALID=" + std::to_string(rank),
                                    "CHORUS_STORE=file://" + directory.path()};
  });
}

TEST_CASE("a half-set environment fails at once with InvalidArgument naming the variable", "[launch][env]") {
  struct Case {
    std::vector<std::string> environment;
    std::vector<std::string> message_contains;
  };
  // A secret file every user may read (issue 45).
  const std::string open_secret = "/tmp/chorus-env-test-open-secret";
  std::ofstream(open_secret) << "0123456789abcdef0123456789abcdef\n";
  REQUIRE(::chmod(open_secret.c_str(), 0644) == 0);
  std::vector<Case> cases{
      {{"RANK=0", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=1"}, {"torchrun", "WORLD_SIZE is not"}},
      {{"CHORUS_RANK=0", "CHORUS_SIZE=1", "CHORUS_STORE=file:///tmp/chorus-env-test", "CHORUS_SECRET_FILE=" + open_secret},
       {"may be read or written by other users (mode 0644)", "chmod 600"}},
      {{"CHORUS_RANK=0", "CHORUS_SIZE=2"}, {"CHORUS_*", "CHORUS_STORE is not"}},
      {{"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2"}, {"Open MPI", "CHORUS_STORE", "MASTER_ADDR"}},
      {{"SLURM_PROCID=2", "SLURM_NTASKS=2", "CHORUS_STORE=tcp://127.0.0.1:1"}, {"Slurm", "SLURM_PROCID=2 is out of range"}},
      {{"PMI_RANK=x", "PMI_SIZE=2", "CHORUS_STORE=tcp://127.0.0.1:1"}, {"PMI", "PMI_RANK='x' is not an integer"}},
      {{}, {"no launcher environment found"}},
      {{"CHORUS_RANK=0", "CHORUS_SIZE=1", "CHORUS_STORE=file:///tmp/chorus-env-test", "CHORUS_CUDA_IPC_MESSAGES=yes"},
       {"CHORUS_CUDA_IPC_MESSAGES='yes' must be 0 or 1"}},
      {{"CHORUS_RANK=0", "CHORUS_SIZE=1", "CHORUS_STORE=file:///tmp/chorus-env-test", "CHORUS_LOG=loud"},
       {"rank 0: CHORUS_LOG='loud' is not a log level: it must be error, warn, info, debug or trace"}},
      {{"CHORUS_RANK=0", "CHORUS_SIZE=1", "CHORUS_STORE=file:///tmp/chorus-env-test", "CHORUS_REQUIRE_SECRET=1"},
       {"rank 0: CHORUS_REQUIRE_SECRET=1 but this rank has no job secret"}},
      {{"CHORUS_RANK=0", "CHORUS_SIZE=1", "CHORUS_STORE=file:///tmp/chorus-env-test", "CHORUS_SECRET=abc"},
       {"CHORUS_SECRET is 3 bytes long", "at least 16"}},
  };
  for (const Case& test_case : cases) {
    ChildProcess process({launch_rank()}, test_case.environment);
    int status = process.wait(std::chrono::seconds(10));
    INFO("output:\n" << process.output());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK_THAT(process.output(), Catch::StartsWith("InvalidArgument: "));
    for (const auto& piece : test_case.message_contains) CHECK_THAT(process.output(), Catch::Contains(piece));
  }
}
