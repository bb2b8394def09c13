// Which launcher started this process, and what it told us: rank, size,
// store URL and job id, read from the environment. A pure function of an
// environment lookup, so every launcher's variables can be tested without
// starting processes. api/launch_config.h is its one caller in the
// library (for connect_from_env and chorus.torch's rendezvous).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "base/config.h"

namespace chorus {

struct LaunchEnv {
  int rank = 0;
  int size = 0;
  std::string store;   // URL: tcp://host:port, file:///dir, redis://host:port[/db]
  std::string job_id;  // empty when no launcher variable gives one
  std::string source;  // "CHORUS_*", "torchrun", "Open MPI", "PMI" or "Slurm"
};

// Looks at, in order: CHORUS_RANK/CHORUS_SIZE/CHORUS_STORE; torchrun's
// RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT; Open MPI's OMPI_COMM_WORLD_RANK/_SIZE;
// PMI_RANK/PMI_SIZE; Slurm's SLURM_PROCID/SLURM_NTASKS. The first source with
// any of its rank/size variables set is used; the others are ignored.
// Outside CHORUS_*, the store is CHORUS_STORE if set, else rank 0's embedded
// TcpStore at tcp://MASTER_ADDR:MASTER_PORT. CHORUS_JOB_ID, when set, is the
// job id; else TORCHELASTIC_RUN_ID (torchrun), PMIX_NAMESPACE (Open MPI) or
// SLURM_JOB_ID[.SLURM_STEP_ID] (Slurm).
// Throws InvalidArgument naming the source and the missing or bad variable
// when no source is set or one is half-set (rank without size, no store,
// a non-integer, rank outside [0, size)).
LaunchEnv detect_launch_env(const EnvLookup& lookup);

// "torchrun: rank 2 of 4, store tcp://10.0.0.1:29500, job id abc" for logs.
std::string describe(const LaunchEnv& launch);

}  // namespace chorus
