// Test helpers for the algorithm layer on real sockets: one Communicator per
// rank over a full TCP mesh on loopback (without the public API above it),
// a thread per rank, and the checks the public API makes before a call.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/execution/communicator.h"
#include "algorithms/model/call.h"
#include "base/deadline.h"
#include "base/link_model.h"

namespace chorus::algorithms::testing {

using Context = Communicator;

// `size` Communicators, their Pairs connected; `link_model` is what the
// transport reports for its links (else TCP's own).
std::vector<std::unique_ptr<Context>> make_contexts(int size, std::chrono::milliseconds = std::chrono::seconds(20),
                                                   std::optional<LinkModel> link_model = std::nullopt);

// Runs body(context) for every rank on its own thread; returns each rank's error.
std::vector<std::exception_ptr> on_every_rank(std::vector<std::unique_ptr<Context>>& contexts,
                                              const std::function<void(Context&)>& body);

void require_no_errors(const std::vector<std::exception_ptr>& errors);

Call make_call(Context& context, Collective collective, size_t count, DataType type, ReduceOp op, int root,
               bool in_place);

// 20 s from now.
Deadline soon();

// What the public API does for its calls: checked once, then run.
void run_checked(Context& context, const Call& call, const void* input, void* output, const std::string& algorithm,
                 uint32_t sequence, Deadline deadline);

}  // namespace chorus::algorithms::testing
