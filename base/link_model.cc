#include "base/link_model.h"

#include <cstdlib>
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

double positive_number(std::string_view key, std::string_view value) {
  const std::string text(value);
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(number > 0) || number > 1e12)
    throw InvalidArgument(cat("link model: ", key, " must be a positive number, got '", value, "'"));
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

LinkModel link_model_from_environment(LinkModel base) {
  const char* text = std::getenv("CHORUS_LINK_MODEL");
  if (text == nullptr || *text == '\0') return base;
  try {
    return parse_link_model(text, base);
  } catch (const InvalidArgument& error) {
    throw InvalidArgument(cat("CHORUS_LINK_MODEL='", text, "': ", error.what()));
  }
}

}  // namespace chorus
