// The conformance suite covers every transport of the registry: Meson runs
// it once per transport it lists (test/transport/meson.build) and passes
// that list here.
#include <cstdlib>
#include <sstream>

#include "test/transport/conformance.h"

namespace chorus::transport::testing {
namespace {

TEST_CASE("transport registry: every transport has a conformance run", "[registry]") {
  const char* covered = std::getenv("CHORUS_TEST_COVERED_TRANSPORTS");
  if (!covered) {
    WARN("CHORUS_TEST_COVERED_TRANSPORTS is unset: nothing to compare (Meson sets it)");
    return;
  }
  std::vector<std::string> names;
  std::stringstream list(covered);
  for (std::string name; std::getline(list, name, ',');) names.push_back(name);
  for (const TransportEntry& entry : all_transports()) {
    INFO("transport " << entry.name << " is in the registry; add a run for it to test/transport/meson.build");
    CHECK(std::find(names.begin(), names.end(), entry.name) != names.end());
  }
  for (const std::string& name : names) {
    INFO("test/transport/meson.build runs " << name << ", which this build does not have");
    CHECK(find_transport(name));
  }
}

}  // namespace
}  // namespace chorus::transport::testing
