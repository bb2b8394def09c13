// What a recorded benchmark run must carry to be compared later: the chorus
// version, when it ran, on which hosts, and with which settings and CHORUS_*
// variables. A collective call (it gathers every rank's host name).
#pragma once

#include <nlohmann/json.hpp>

#include "chorus/chorus.h"

namespace chorus::bench {

// {"version", "time" (UTC), "host_names" (by rank), "environment" (the
// CHORUS_* variables set, secrets left out), "settings": `settings`}.
nlohmann::json run_metadata(Context& context, nlohmann::json settings);

}  // namespace chorus::bench
