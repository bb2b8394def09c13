// Every (collective, algorithm) the registry knows, run on one real Context
// through the public API: several counts and types, every root at small
// sizes, in-place forms, v variants with zero counts, async and typed forms.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "chorus/context.h"

namespace chorus::collective_test {

struct MatrixOutcome {
  size_t cases_run = 0;
  // "allgather/recursive_doubling: 12 cases not supported on 3 ranks"
  std::vector<std::string> skipped;
  // Empty when everything was bit-exact; else the first failure.
  std::string failure;
};

MatrixOutcome run_matrix(Context& context);

}  // namespace chorus::collective_test
