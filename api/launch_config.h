// Everything connect_from_env reads from the environment before it connects,
// read once: which launcher started this process and what it told us
// (rendezvous/launch_env.h), and the configuration snapshot (base/config.h).
// chorus.torch's rendezvous opens the launcher's store with the same
// snapshot instead of reading the variables a second way.
// Internal (not installed).
#pragma once

#include <string_view>

#include "base/config.h"
#include "chorus/connect.h"
#include "rendezvous/launch_env.h"

namespace chorus::detail {

struct LaunchConfig {
  LaunchEnv launch;
  Config config;
};

// Detects the launcher, logs "<purpose>: <describe(launch)>", then takes the
// snapshot with the options' overrides. Throws InvalidArgument naming the
// launcher's variable, or the rank and the malformed CHORUS_* variable.
LaunchConfig read_launch_config(const ConnectOptions& options, std::string_view purpose);

}  // namespace chorus::detail
