// Shared helpers of the Store implementations (see store_common.h).
#include "rendezvous/store_common.h"

#include <charconv>

#include "base/error.h"
#include "base/log.h"

namespace chorus::store_detail {

Deadline deadline_after(std::chrono::milliseconds timeout) {
  // Ten years is "forever" for a rendezvous and still far from overflowing the clock.
  constexpr auto kForever = std::chrono::hours(24 * 365 * 10);
  if (timeout >= kForever) return Deadline::never();
  if (timeout < std::chrono::milliseconds(0)) timeout = std::chrono::milliseconds(0);
  return Deadline::after(timeout);
}

std::string quote_keys(const std::vector<std::string>& keys, size_t limit) {
  std::string text;
  for (size_t i = 0; i < keys.size() && i < limit; ++i) {
    if (i > 0) text += ", ";
    text += "'" + keys[i] + "'";
  }
  if (keys.size() > limit) text += cat(" and ", keys.size() - limit, " more");
  return text;
}

void throw_key_timeout(std::string_view store, const std::vector<std::string>& missing,
                       std::chrono::milliseconds timeout) {
  throw TimeoutError(cat(store, ": timed out after ", timeout.count(), " ms waiting for ",
                         missing.size() == 1 ? "key " : "keys ", quote_keys(missing)));
}

std::optional<int64_t> parse_counter(std::span<const std::byte> value) {
  std::string_view text(reinterpret_cast<const char*>(value.data()), value.size());
  int64_t parsed = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return parsed;
}

std::vector<std::byte> format_counter(int64_t value) {
  std::string text = std::to_string(value);
  std::vector<std::byte> bytes(text.size());
  for (size_t i = 0; i < text.size(); ++i) bytes[i] = static_cast<std::byte>(text[i]);
  return bytes;
}

int64_t add_to_counter(std::string_view store, const std::string& key,
                       const std::vector<std::byte>* current, int64_t delta) {
  int64_t base = 0;
  if (current != nullptr) {
    auto parsed = parse_counter(*current);
    if (!parsed) {
      throw InvalidArgument(cat(store, ": add to key '", key, "' whose value (", current->size(),
                                " bytes) is not a decimal integer written by add()"));
    }
    base = *parsed;
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(base, delta, &sum)) {
    throw InvalidArgument(cat(store, ": add of ", delta, " to key '", key, "' (currently ", base,
                              ") overflows int64"));
  }
  return sum;
}

}  // namespace chorus::store_detail
