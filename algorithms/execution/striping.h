// Striping: a send or receive of at least kStripeMinBytes is cut into one
// contiguous piece per stream (Context::streams), piece i posted on stream i
// with the step's own tag, like NCCL's channels. Both sides derive the
// pieces from the step's length alone, so they agree without telling each
// other; smaller messages stay whole on stream 0, where a split would only
// add per-message cost. docs/streams.md has the measurement behind the numbers.
#pragma once

#include <cstddef>

namespace chorus::algorithms {

// Ring allreduce's 512 KiB segments are still striped. From 256 KiB, 4
// streams also cut the 256 KiB blocks of a 1 MiB allreduce into 64 KiB
// pieces, which on the shaped 1 Gbit/s network took 1.6x as long as one stream.
inline constexpr size_t kStripeMinBytes = 512 * 1024;

// How many pieces a message of `bytes` is cut into.
inline size_t stripe_count(size_t bytes, int streams) {
  return streams > 1 && bytes >= kStripeMinBytes ? static_cast<size_t>(streams) : 1;
}

struct Stripe {
  size_t offset = 0;
  size_t length = 0;
};

// Piece `index` of `count`: page-aligned offsets (relative to the message),
// the last piece takes the remainder.
inline Stripe stripe(size_t bytes, size_t count, size_t index) {
  constexpr size_t kAlign = 4096;
  const size_t piece = count > 1 ? bytes / count / kAlign * kAlign : bytes;
  const size_t offset = index * piece;
  return {offset, index + 1 == count ? bytes - offset : piece};
}

}  // namespace chorus::algorithms
