#include "tools/flag_checks.h"

#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus::tools {
namespace {

constexpr size_t kNoSize = std::numeric_limits<size_t>::max();

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

// The power of 1024 a suffix stands for, or -1 for one we do not know.
int suffix_shift(std::string suffix) {
  for (char& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (suffix.empty() || suffix == "b") return 0;
  static constexpr std::string_view kUnits = "kmgtpe";
  const size_t unit = kUnits.find(suffix[0]);
  if (unit == std::string_view::npos) return -1;
  const std::string_view rest = std::string_view(suffix).substr(1);
  if (!rest.empty() && rest != "b" && rest != "ib") return -1;
  return 10 * static_cast<int>(unit + 1);
}

std::string shortest(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

}  // namespace

std::optional<size_t> parse_byte_size(std::string_view text, std::string& why) {
  const std::string_view original = text;
  text = trim(text);
  const std::string example = "digits with an optional K, M, G or T suffix (powers of 1024), e.g. 4096, 64K or 1M";
  if (!text.empty() && text.front() == '-') {
    why = cat("'", original, "' is negative: a size is a number of bytes, ", example);
    return std::nullopt;
  }
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const int shift = suffix_shift(std::string(trim(text.substr(digits))));
  if (digits == 0 || shift < 0) {
    why = cat("'", original, "' is not a size: ", example);
    return std::nullopt;
  }
  size_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + digits, value);
  // from_chars refuses a number past SIZE_MAX rather than wrapping it.
  if (error != std::errc() || end != text.data() + digits || value > (kNoSize >> shift)) {
    why = cat("'", original, "' is more bytes than this machine can address");
    return std::nullopt;
  }
  return value << shift;
}

CLI::Validator ByteSize(size_t min) {
  return CLI::Validator(
      [min](std::string& value) -> std::string {
        std::string why;
        const std::optional<size_t> bytes = parse_byte_size(value, why);
        if (!bytes) return why;
        if (*bytes < min) return cat("'", value, "' is less than ", describe_bytes(min), ", the least this flag takes");
        value = std::to_string(*bytes);
        return std::string();
      },
      "SIZE", "ByteSize");
}

CLI::Validator FiniteRange(double min, double max) {
  const std::string range = cat("[", shortest(min), ", ", shortest(max), "]");
  return CLI::Validator(
      [min, max, range](std::string& value) -> std::string {
        const std::string text(trim(value));
        char* end = nullptr;
        const double number = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(number))
          return cat("'", value, "' is not a finite number (expected one in ", range, ")");
        if (number < min || number > max) return cat(value, " is out of range: expected a number in ", range);
        return std::string();
      },
      "NUMBER in " + range, "FiniteRange");
}

CLI::Validator DecimalDigits() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const std::string_view text = trim(value);
        bool digits = !text.empty();
        for (char c : text) digits = digits && std::isdigit(static_cast<unsigned char>(c));
        if (digits) return std::string();
        return cat("'", value, "' is not a whole number of 0 or more in decimal digits");
      },
      "", "DecimalDigits");
}

size_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return saturating_multiply(static_cast<size_t>(pages), static_cast<size_t>(page_size));
}

int local_ranks_from_environment() {
  const EnvLookup lookup = process_environment();
  for (const char* name : {"CHORUS_LOCAL_SIZE", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}) {
    const std::optional<std::string> text = lookup(name);
    if (!text) continue;
    int ranks = 0;
    const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), ranks);
    if (error == std::errc() && end == text->data() + text->size() && ranks > 0) return ranks;
  }
  return 1;
}

size_t saturating_multiply(size_t a, size_t b) {
  size_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? kNoSize : product;
}

std::string describe_bytes(size_t bytes) {
  if (bytes == kNoSize) return "more than 16 EiB";
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return cat(bytes, bytes == 1 ? " byte" : " bytes");
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, value >= 100 || value == std::floor(value) ? "%.0f %s" : "%.1f %s", value,
                kUnits[unit]);
  return text;
}

std::string memory_shortfall(const std::string& what, size_t bytes_per_rank, int ranks_on_host) {
  const size_t host = physical_memory_bytes();
  const size_t ranks = static_cast<size_t>(std::max(ranks_on_host, 1));
  const size_t total = saturating_multiply(bytes_per_rank, ranks);
  // A host that does not say its memory is not second-guessed.
  if (host == 0 || total <= host) return std::string();
  std::string message = cat(what, " needs ", describe_bytes(bytes_per_rank), ranks_on_host > 0 ? " per rank" : "");
  if (ranks > 1) message += cat(" (", describe_bytes(total), " for the ", ranks, " ranks on this host)");
  return cat(message, ", this host has ", describe_bytes(host));
}

std::string environment_problem() {
  try {
    (void)Config::from_environment();
  } catch (const std::exception& error) {
    return error.what();
  }
  return std::string();
}

std::string log_setting_problem() {
  try {
    check_log_setting();
  } catch (const std::exception& error) {
    return error.what();
  }
  return std::string();
}

}  // namespace chorus::tools
