// Point-to-point send/recv on a healthy Context: ping-pong, a ring of async
// exchanges, a ring of blocking sends before receives (large messages too),
// tags received out of order, FIFO within one tag, messages interleaved
// with collectives, and polling an async receive.
#pragma once

#include <cstddef>
#include <string>

#include "chorus/context.h"

namespace chorus::collective_test {

// Returns "" when all went right, else the first failure; counts checks run.
std::string check_point_to_point(Context& context, size_t& checks);

}  // namespace chorus::collective_test
