#include "algorithms/model/segment_size.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace chorus::algorithms {

size_t pipeline_segment_bytes(size_t bytes, size_t element_bytes, int fill_stages, const CostModel& model) {
  size_t segment = max_pipeline_segment_bytes;
  if (fill_stages > 0 && model.beta_seconds_per_byte > 0) {
    // Compared squared, in plain IEEE multiplications: every rank with the
    // same model must get the same answer, and log2 is not exactly rounded
    // in every libm.
    const double best_squared = static_cast<double>(bytes) * model.alpha_seconds /
                                (static_cast<double>(fill_stages) * model.beta_seconds_per_byte);
    segment = min_pipeline_segment_bytes;
    while (segment < max_pipeline_segment_bytes &&
           best_squared >= 4.0 * static_cast<double>(segment) * static_cast<double>(segment))
      segment *= 2;
  }
  const size_t element = std::max<size_t>(1, element_bytes);
  segment = std::max<size_t>(1, segment / element) * element;
  // Slots are 32 bits (check_message_count); a huge buffer takes larger
  // segments rather than failing.
  const size_t most_messages = std::numeric_limits<uint32_t>::max();
  if (bytes / segment >= most_messages) {
    const size_t elements = (bytes / element + most_messages - 1) / most_messages;
    segment = std::max(segment, elements * element);
  }
  return segment;
}

}  // namespace chorus::algorithms
