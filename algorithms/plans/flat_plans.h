// The table of flat Plans: every Plan that runs over one level of links,
// by collective and name. Plans made of Plans (composition/) choose their
// phases from it; the whole table (selection/registry.h) adds those.
// Adding a flat Plan means its file under plans/<collective>/ and one
// entry in flat_plans.cc.
#pragma once

#include <span>
#include <string_view>

#include "algorithms/model/algorithm.h"

namespace chorus::algorithms {

std::span<const Algorithm> flat_plans();
// Null when no flat Plan of that name exists for the collective.
const Algorithm* find_flat_plan(Collective collective, std::string_view name);
// The cheapest flat Plan that supports the call under `model`; null: none.
const Algorithm* cheapest_flat_plan(const Call& call, const CostModel& model);

}  // namespace chorus::algorithms
