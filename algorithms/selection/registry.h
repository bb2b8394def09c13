// Every Plan the library knows, by collective and name: the flat ones
// (plans/flat_plans.h) and those made of Plans (composition/). Adding a
// Plan means defining its functions (model/algorithm_functions.h) and one
// entry in its table; the candidate registry (candidate.h), CHORUS_ALGO
// and the tests find it through this one.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "algorithms/model/algorithm.h"
#include "base/deadline.h"

namespace chorus::algorithms {

std::span<const Algorithm> all_algorithms();
// Null when no algorithm of that name exists for the collective.
const Algorithm* find_algorithm(Collective collective, std::string_view name);
// "ring, ..." : the names valid for a collective, for error messages.
std::string algorithm_names(Collective collective);

}  // namespace chorus::algorithms
