#include "benchmarks/run_metadata.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

extern char** environ;

namespace chorus::bench {
namespace {

std::string utc_now() {
  const time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

nlohmann::json chorus_environment() {
  nlohmann::json variables = nlohmann::json::object();
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const size_t equals = text.find('=');
    if (text.rfind("CHORUS_", 0) != 0 || equals == std::string::npos) continue;
    const std::string name = text.substr(0, equals);
    // A secret written into a results file would travel with it.
    variables[name] = name.find("SECRET") != std::string::npos ? "(set, not recorded)" : text.substr(equals + 1);
  }
  return variables;
}

}  // namespace

nlohmann::json run_metadata(Context& context, nlohmann::json settings) {
  constexpr size_t kNameBytes = 256;
  std::array<char, kNameBytes> mine{};
  if (::gethostname(mine.data(), kNameBytes - 1) != 0) std::strcpy(mine.data(), "unknown");
  std::vector<uint8_t> everyone(kNameBytes * static_cast<size_t>(context.size()));
  allgather(context, mine.data(), everyone.data(), kNameBytes, DataType::uint8);
  nlohmann::json host_names = nlohmann::json::array();
  for (int rank = 0; rank < context.size(); ++rank) {
    const char* name = reinterpret_cast<const char*>(everyone.data() + kNameBytes * static_cast<size_t>(rank));
    host_names.push_back(std::string(name, strnlen(name, kNameBytes)));
  }
  return {{"version", version()},
          {"time", utc_now()},
          {"host_names", host_names},
          {"environment", chorus_environment()},
          {"settings", std::move(settings)}};
}

}  // namespace chorus::bench
