// Cutting `count` elements into one chunk per member, each starting on an
// alignment boundary: the shape of the two-shot allreduces that read their
// peers' memory directly (the board's pieces, the mapped allreduce), where
// member m reduces chunk m and the others copy it. Aligned starts keep two
// members from writing one cache line, and let kernels move whole packs.
#pragma once

#include <algorithm>
#include <cstddef>

namespace chorus::algorithms {

struct ElementRange {
  size_t first = 0;  // element
  size_t count = 0;
};

// Member `member`'s chunk of `members`: equal chunks rounded up to whole
// `alignment_bytes`, so the last ones may be shorter or empty.
inline ElementRange aligned_chunk(int member, int members, size_t count, size_t element_bytes,
                                  size_t alignment_bytes) {
  const size_t align = std::max<size_t>(1, alignment_bytes / element_bytes);
  const auto ranks = static_cast<size_t>(members);
  const size_t per_member = ((count + ranks - 1) / ranks + align - 1) / align * align;
  const size_t first = std::min(count, per_member * static_cast<size_t>(member));
  return {first, std::min(count, first + per_member) - first};
}

}  // namespace chorus::algorithms
