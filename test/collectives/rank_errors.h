// The error cases of the collectives job, each on a fresh Context (an error
// finishes the Context it happens on): unknown and unsupported algorithm
// names, a point-to-point size mismatch, sending to oneself and bad counts.
#pragma once

#include <cstddef>
#include <string>

#include "chorus/context.h"

namespace chorus::collective_test {

// `main` is the job's Context (only its rank and size are used). Returns ""
// when every case failed the way it must, else what went wrong.
std::string check_errors(Context& main, size_t& checks);

}  // namespace chorus::collective_test
