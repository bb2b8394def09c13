#include "base/link_model.h"

#include <string>

#include "base/error.h"
#include "base/log.h"

namespace chorus {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// From 1e-12 to 1e12: scaled to seconds (alpha_us * 1e-6, 1 / (gbps * 1e9)),
// any of those stays positive and finite, where a denormal would become 0
// or infinity.
double positive_number(std::string_view key, std::string_view value) {
  const std::string text(value);
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(number >= 1e-12) || number > 1e12)
    throw InvalidArgument(cat("link model: ", key, " must be a positive number (1e-12 to 1e12), got '", value, "'"));
  return number;
}

}  // namespace

LinkModel parse_link_model(std::string_view text, LinkModel base) {
  LinkModel model = base;
  while (!trim(text).empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t equals = item.find('=');
    if (equals == std::string_view::npos)
      throw InvalidArgument(cat("link model: expected key=value (alpha_us=25,gbps=2), got '", item, "'"));
    const std::string_view key = trim(item.substr(0, equals));
    const std::string_view value = trim(item.substr(equals + 1));
    if (key == "alpha_us") model.alpha_seconds = positive_number(key, value) * 1e-6;
    else if (key == "gbps") model.beta_seconds_per_byte = 1.0 / (positive_number(key, value) * 1e9);
    else throw InvalidArgument(cat("link model: unknown key '", key, "' (valid: alpha_us, gbps)"));
  }
  return model;
}

LinkModel apply_link_model_override(std::string_view text, LinkLevel level, LinkModel base) {
  LinkModel model = base;
  while (!trim(text).empty()) {
    const size_t semicolon = text.find(';');
    std::string_view part = trim(text.substr(0, semicolon));
    text = semicolon == std::string_view::npos ? std::string_view() : text.substr(semicolon + 1);
    bool applies = true;
    const size_t colon = part.find(':');
    if (colon != std::string_view::npos) {
      const std::string_view name = trim(part.substr(0, colon));
      if (name != "local" && name != "remote")
        throw InvalidArgument(cat("link model: unknown level '", name, "' (valid: local, remote)"));
      applies = name == (level == LinkLevel::local ? "local" : "remote");
      part = part.substr(colon + 1);
    }
    // The other level's part is parsed too, so a typo in it fails here.
    const LinkModel parsed = parse_link_model(part, model);
    if (applies) model = parsed;
  }
  return model;
}

}  // namespace chorus
