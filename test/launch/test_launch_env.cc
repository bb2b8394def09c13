// detect_launch_env against hand-made environments: every launcher source,
// the order between them, job ids, and each way an environment can be half set.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "base/error.h"
#include "rendezvous/launch_env.h"

namespace {

// Values assigned below are std::strings, not literals: assigning a literal to
// a map entry trips a g++ 12 -Wrestrict false positive at -O3.
using Environment = std::map<std::string, std::string, std::less<>>;

chorus::LaunchEnv detect(const Environment& environment) {
  return chorus::detect_launch_env([&](std::string_view name) -> std::optional<std::string> {
    auto found = environment.find(name);
    if (found == environment.end()) return std::nullopt;
    return found->second;
  });
}

// The InvalidArgument message for an environment (and a failed check if none is thrown).
std::string error_for(const Environment& environment) {
  try {
    chorus::LaunchEnv launch = detect(environment);
    FAIL("expected InvalidArgument, got " << chorus::describe(launch));
  } catch (const chorus::InvalidArgument& error) {
    return error.what();
  }
  return {};
}

}  // namespace

TEST_CASE("CHORUS_* variables", "[launch_env]") {
  auto launch = detect({{"CHORUS_RANK", "2"}, {"CHORUS_SIZE", "4"}, {"CHORUS_STORE", "file:///shared/x"},
                        {"CHORUS_JOB_ID", "job7"}});
  CHECK(launch.source == "CHORUS_*");
  CHECK(launch.rank == 2);
  CHECK(launch.size == 4);
  CHECK(launch.store == "file:///shared/x");
  CHECK(launch.job_id == "job7");
  CHECK(chorus::describe(launch) == "CHORUS_*: rank 2 of 4, store file:///shared/x, job id job7");
}

TEST_CASE("torchrun variables: rank 0 hosts the store at MASTER_ADDR:MASTER_PORT", "[launch_env]") {
  Environment torchrun{{"RANK", "1"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "29500"},
                       {"LOCAL_RANK", "1"}};
  auto launch = detect(torchrun);
  CHECK(launch.source == "torchrun");
  CHECK(launch.rank == 1);
  CHECK(launch.size == 3);
  CHECK(launch.store == "tcp://10.1.2.3:29500");
  CHECK(launch.job_id.empty());

  torchrun["TORCHELASTIC_RUN_ID"] = "elastic-42";
  CHECK(detect(torchrun).job_id == "elastic-42");
  torchrun["CHORUS_JOB_ID"] = "mine";
  CHECK(detect(torchrun).job_id == "mine");
  torchrun["CHORUS_STORE"] = "redis://cache:6379";
  CHECK(detect(torchrun).store == "redis://cache:6379");
  torchrun.erase("CHORUS_STORE");
  torchrun["MASTER_ADDR"] = std::string("fd00::1");
  CHECK(detect(torchrun).store == "tcp://[fd00::1]:29500");
}

TEST_CASE("Open MPI, PMI and Slurm variables take the store from CHORUS_STORE or MASTER_ADDR", "[launch_env]") {
  auto ompi = detect({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"CHORUS_STORE", "tcp://h:1"},
                      {"PMIX_NAMESPACE", "prterun-host-1@1"}});
  CHECK(ompi.source == "Open MPI");
  CHECK(ompi.rank == 3);
  CHECK(ompi.size == 8);
  CHECK(ompi.store == "tcp://h:1");
  CHECK(ompi.job_id == "prterun-host-1@1");

  auto pmi = detect({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MASTER_ADDR", "node1"}, {"MASTER_PORT", "4000"}});
  CHECK(pmi.source == "PMI");
  CHECK(pmi.rank == 0);
  CHECK(pmi.size == 2);
  CHECK(pmi.store == "tcp://node1:4000");
  CHECK(pmi.job_id.empty());

  Environment slurm{{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"CHORUS_STORE", "file:///scratch/s"},
                    {"SLURM_JOB_ID", "991"}};
  auto launch = detect(slurm);
  CHECK(launch.source == "Slurm");
  CHECK(launch.rank == 5);
  CHECK(launch.size == 6);
  CHECK(launch.job_id == "991");
  slurm["SLURM_STEP_ID"] = std::string("2");
  CHECK(detect(slurm).job_id == "991.2");
}

TEST_CASE("the first source with a rank or size variable wins", "[launch_env]") {
  Environment everything{{"CHORUS_RANK", "0"}, {"CHORUS_SIZE", "1"}, {"CHORUS_STORE", "tcp://a:1"},
                         {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "b"}, {"MASTER_PORT", "2"},
                         {"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "3"},
                         {"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "5"}};
  const char* expected[] = {"CHORUS_*", "torchrun", "Open MPI", "PMI", "Slurm"};
  const char* rank_variables[] = {"CHORUS_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};
  const char* size_variables[] = {"CHORUS_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"};
  for (int source = 0; source < 5; ++source) {
    auto launch = detect(everything);
    CHECK(launch.source == expected[source]);
    CHECK(launch.rank == source);
    CHECK(launch.size == source + 1);
    everything.erase(rank_variables[source]);
    everything.erase(size_variables[source]);
  }
  // Empty values count as unset (a shell's `export RANK=`).
  CHECK(detect({{"CHORUS_RANK", ""}, {"CHORUS_SIZE", ""}, {"PMI_RANK", "1"}, {"PMI_SIZE", "2"},
                {"CHORUS_STORE", "tcp://x:9"}})
            .source == "PMI");
}

TEST_CASE("a half-set environment names the missing variable and the source", "[launch_env]") {
  auto message = error_for({{"CHORUS_RANK", "0"}, {"CHORUS_STORE", "tcp://a:1"}});
  CHECK_THAT(message, Catch::Contains("CHORUS_*") && Catch::Contains("CHORUS_SIZE is not"));
  message = error_for({{"CHORUS_SIZE", "2"}, {"CHORUS_STORE", "tcp://a:1"}});
  CHECK_THAT(message, Catch::Contains("CHORUS_RANK is not"));
  message = error_for({{"CHORUS_RANK", "0"}, {"CHORUS_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}});
  CHECK_THAT(message, Catch::Contains("CHORUS_STORE is not"));

  message = error_for({{"RANK", "0"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}});
  CHECK_THAT(message, Catch::Contains("torchrun") && Catch::Contains("WORLD_SIZE is not"));
  message = error_for({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}});
  CHECK_THAT(message, Catch::Contains("torchrun") && Catch::Contains("MASTER_ADDR is not"));
  message = error_for({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}});
  CHECK_THAT(message, Catch::Contains("MASTER_PORT is not"));

  message = error_for({{"OMPI_COMM_WORLD_SIZE", "4"}, {"CHORUS_STORE", "tcp://a:1"}});
  CHECK_THAT(message, Catch::Contains("Open MPI") && Catch::Contains("OMPI_COMM_WORLD_RANK is not"));
  message = error_for({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  CHECK_THAT(message, Catch::Contains("Open MPI") && Catch::Contains("CHORUS_STORE") &&
                          Catch::Contains("MASTER_ADDR and MASTER_PORT"));
  message = error_for({{"PMI_RANK", "1"}, {"CHORUS_STORE", "tcp://a:1"}});
  CHECK_THAT(message, Catch::Contains("PMI") && Catch::Contains("PMI_SIZE is not"));
  message = error_for({{"SLURM_NTASKS", "3"}, {"CHORUS_STORE", "tcp://a:1"}});
  CHECK_THAT(message, Catch::Contains("Slurm") && Catch::Contains("SLURM_PROCID is not"));
}

TEST_CASE("bad values name the variable", "[launch_env]") {
  auto message = error_for({{"CHORUS_RANK", "one"}, {"CHORUS_SIZE", "2"}, {"CHORUS_STORE", "tcp://a:1"}});
  CHECK_THAT(message, Catch::Contains("CHORUS_RANK='one' is not an integer"));
  message = error_for({{"RANK", "0"}, {"WORLD_SIZE", "2x"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}});
  CHECK_THAT(message, Catch::Contains("WORLD_SIZE='2x' is not an integer"));
  message = error_for({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "http"}});
  CHECK_THAT(message, Catch::Contains("MASTER_PORT='http' is not an integer"));
  message = error_for({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}});
  CHECK_THAT(message, Catch::Contains("MASTER_PORT=70000 is not a TCP port"));
  message = error_for({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}, {"CHORUS_STORE", "tcp://a:1"}});
  CHECK_THAT(message, Catch::Contains("Slurm") && Catch::Contains("SLURM_PROCID=4 is out of range for SLURM_NTASKS=4"));
  message = error_for({{"PMI_RANK", "-1"}, {"PMI_SIZE", "4"}, {"CHORUS_STORE", "tcp://a:1"}});
  CHECK_THAT(message, Catch::Contains("PMI_RANK=-1 is out of range"));
  message = error_for({{"CHORUS_RANK", "0"}, {"CHORUS_SIZE", "0"}, {"CHORUS_STORE", "tcp://a:1"}});
  CHECK_THAT(message, Catch::Contains("CHORUS_SIZE=0 must be at least 1"));
  message = error_for({{"CHORUS_RANK", "99999999999"}, {"CHORUS_SIZE", "2"}, {"CHORUS_STORE", "tcp://a:1"}});
  CHECK_THAT(message, Catch::Contains("CHORUS_RANK='99999999999' is not an integer"));
}

TEST_CASE("no launcher at all says what to set", "[launch_env]") {
  auto message = error_for({{"CHORUS_STORE", "tcp://a:1"}, {"MASTER_ADDR", "a"}});
  CHECK_THAT(message, Catch::Contains("no launcher environment found") && Catch::Contains("CHORUS_RANK"));
}
