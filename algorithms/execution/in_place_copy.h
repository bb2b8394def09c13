// The in-place reduce-scatter as a wrapper candidate (candidate.h).
// Reduce-scatter Plans read this rank's input block until their last step,
// so none reduces into it in place: the call runs out of place into a
// block-sized buffer (1/size of the data) and the block is copied into
// place. Costs the copy on top of the inner candidate.
#pragma once

#include "algorithms/execution/candidate.h"

namespace chorus::algorithms {

inline constexpr std::string_view kInPlaceCopy = "in_place_copy";

const Candidate& in_place_copy_candidate();

}  // namespace chorus::algorithms
