// Pieces every Store implementation shares, so the stores agree on what a
// timeout means, how add() counters are stored and how errors read.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/deadline.h"

namespace chorus::store_detail {

// A caller's timeout as a Deadline. Negative counts as zero ("look once"), and
// absurdly long timeouts become Deadline::never() instead of overflowing the clock.
Deadline deadline_after(std::chrono::milliseconds timeout);

// "'a'" or "'a', 'b'" (at most `limit` keys, then "and N more").
std::string quote_keys(const std::vector<std::string>& keys, size_t limit = 16);

// TimeoutError "<store>: timed out after 100 ms waiting for key 'a'".
[[noreturn]] void throw_key_timeout(std::string_view store, const std::vector<std::string>& missing,
                                    std::chrono::milliseconds timeout);

// add() keeps counters as decimal text ("-12"), so get() of a counter returns
// something a human and every store implementation read the same way.
std::optional<int64_t> parse_counter(std::span<const std::byte> value);
std::vector<std::byte> format_counter(int64_t value);

// current + delta, or InvalidArgument if the stored value is not a counter or
// the sum overflows. `current` is nullptr when the key is absent.
int64_t add_to_counter(std::string_view store, const std::string& key,
                       const std::vector<std::byte>* current, int64_t delta);

}  // namespace chorus::store_detail
