// What a rank tells its peers when it aborts: the class of the error, the
// rank it blamed and its text, so every peer fails with the same error class
// and a message that says who aborted and why ("rank 3: peer rank 1 aborted:
// rank 1: broadcast root 7 is out of range ..."). Every transport carries it
// its own way (tcp: an abort frame; shm: a record on the side channel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

namespace chorus::transport {

// The text is diagnostic only; anything longer is not a peer of ours.
inline constexpr uint64_t kMaxAbortTextBytes = 64 * 1024;

struct AbortReport {
  uint64_t error_class = 0;
  uint64_t blamed_rank = ~uint64_t{0};
  std::string text;  // at most kMaxAbortTextBytes
};

AbortReport report_abort(std::exception_ptr error);

// The error a rank adopts when peer_rank's report arrives, of the class it
// carried: "rank <me>: peer rank <peer> aborted: <the peer's own words>", or
// for a report relayed through other ranks "rank <me>: peer rank <origin>
// aborted (relayed by rank <peer>): <the origin's own words>": the rank that
// aborted is named once, as the peer, however many ranks it crossed.
std::exception_ptr adopt_abort(uint64_t error_class, uint64_t blamed_rank, std::string_view text, int my_rank,
                               int peer_rank);

}  // namespace chorus::transport
