// Reading back the Chrome traces the ranks of a test wrote (CHORUS_TRACE,
// ConnectOptions::trace): a fresh directory for them, one file parsed, and
// how many calls each algorithm ran over every file.
#pragma once

#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace chorus::testing {

// An empty directory for this process's test `name`, under "chorus-<suite>-<pid>".
inline std::filesystem::path fresh_directory(const std::string& suite, const std::string& name) {
  auto directory = std::filesystem::temp_directory_path() / ("chorus-" + suite + "-" + std::to_string(::getpid())) / name;
  std::filesystem::remove_all(directory);
  std::filesystem::create_directories(directory);
  return directory;
}

// The trace as a viewer reads it: the array format allows the closing
// bracket to be missing (the process still holds the file open).
inline nlohmann::json read_trace(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::string json = text.str();
  while (!json.empty() && std::isspace(static_cast<unsigned char>(json.back()))) json.pop_back();
  if (json.empty() || json.back() != ']') json += "\n]";
  return nlohmann::json::parse(json);
}

// How many calls each algorithm ran over every rank's trace file in
// `directory`, keyed "collective/algorithm" ("allreduce/board" -> 12), or
// with `with_bytes` "collective/bytes/algorithm".
inline std::map<std::string, int> algorithms_traced(const std::filesystem::path& directory, bool with_bytes = false) {
  std::map<std::string, int> counts;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    for (const nlohmann::json& event : read_trace(entry.path())) {
      if (event.at("ph") != "X" || event.at("cat") != "collective") continue;
      const std::string bytes = with_bytes ? std::to_string(event.at("args").at("bytes").get<size_t>()) + "/" : "";
      ++counts[event.at("name").get<std::string>() + "/" + bytes + event.at("args").at("algorithm").get<std::string>()];
    }
  }
  return counts;
}

}  // namespace chorus::testing
