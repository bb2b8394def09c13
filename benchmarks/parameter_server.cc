// A sharded parameter server on one-sided windows (chorus/window.h), checked
// bit-exactly and timed. Every rank is a worker and the server of one shard:
// its window holds its shard's weights and one gradient slot per worker.
// Each step, every worker puts its gradient for shard s into slot `rank` of
// rank s's window; after a barrier each server subtracts the sum of its
// slots from its weights; after another barrier every worker gets all the
// weights back. Gradients and weights are small integers in float32, so the
// result is exact whatever the order: every rank checks every weight
// against the closed form after every step.
//
//   chorus-run -n 3 -- chorus-parameter-server [--params N] [--steps T]
// prints "parameter_server OK ..." with the time per step on rank 0.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/log.h"
#include "chorus/chorus.h"
#include "tools/flag_checks.h"

namespace {

// What worker `rank` pushes for weight `index` at `step`.
float gradient(int rank, size_t step, size_t index) {
  return static_cast<float>((rank + 1) * static_cast<int>(step + 1) + static_cast<int>(index % 7));
}

float initial_weight(size_t index) { return static_cast<float>(1000000 + index % 1000); }

// The weight after steps 0..step, summed over every worker.
float expected_weight(size_t index, size_t step, int workers) {
  double value = initial_weight(index);
  for (size_t s = 0; s <= step; ++s)
    for (int rank = 0; rank < workers; ++rank) value -= gradient(rank, s, index);
  return static_cast<float>(value);
}

// The memory one rank holds: every weight and gradient of the job (8 bytes
// a parameter) and its window, its shard plus a slot per worker.
size_t bytes_per_rank(size_t params, size_t ranks) {
  const size_t shard = (params + ranks - 1) / ranks;
  const size_t window = chorus::tools::saturating_multiply(chorus::tools::saturating_multiply(shard, 1 + ranks), 4);
  const size_t vectors = chorus::tools::saturating_multiply(params, 8);
  return vectors > std::numeric_limits<size_t>::max() - window ? std::numeric_limits<size_t>::max() : vectors + window;
}

int run(size_t params, size_t steps);

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chorus-parameter-server: a sharded parameter server on one-sided windows, checked bit-exactly"};
  size_t params = 1 << 20;
  size_t steps = 5;
  app.add_option("--params", params, "Weights in all, split into one shard per rank")
      ->capture_default_str()
      ->check(chorus::tools::DecimalDigits())
      ->check(CLI::Range(size_t{1}, size_t{1} << 32));
  app.add_option("--steps", steps, "Push/pull steps")
      ->capture_default_str()
      ->check(chorus::tools::DecimalDigits())
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.set_version_flag("--version", chorus::version());
  CLI11_PARSE(app, argc, argv);
  // Before connecting, what every rank holds however many there are: the
  // window is at least a shard and one slot, i.e. 4 more bytes a parameter
  // than a job of one rank's 8 (checked exactly once the size is known).
  std::string problem = chorus::tools::environment_problem();
  if (problem.empty())
    problem = chorus::tools::memory_shortfall(chorus::cat("--params ", params), bytes_per_rank(params, 1) - 4 * params,
                                              chorus::tools::local_ranks_from_environment());
  if (!problem.empty()) {
    std::fprintf(stderr, "chorus-parameter-server: %s\n", problem.c_str());
    return 2;
  }
  try {
    return run(params, steps);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "chorus-parameter-server: %s\n", error.what());
    return 1;
  }
}

namespace {

int run(size_t params, size_t steps) {
  auto context = chorus::connect_from_env();
  const int rank = context->rank();
  const int size = context->size();
  const std::string memory = chorus::tools::memory_shortfall(
      chorus::cat("--params ", params, " over ", size, " ranks"), bytes_per_rank(params, static_cast<size_t>(size)),
      context->local_size());
  if (!memory.empty()) throw chorus::InvalidArgument(memory);
  const size_t shard = (params + static_cast<size_t>(size) - 1) / static_cast<size_t>(size);
  auto shard_begin = [&](int owner) { return std::min(params, shard * static_cast<size_t>(owner)); };
  auto shard_length = [&](int owner) { return std::min(params, shard_begin(owner) + shard) - shard_begin(owner); };

  // This rank's window: its shard's weights, then one gradient slot per worker.
  const size_t mine = shard_length(rank);
  std::vector<float> window(mine * (1 + static_cast<size_t>(size)));
  for (size_t i = 0; i < mine; ++i) window[i] = initial_weight(shard_begin(rank) + i);
  chorus::Window shared(*context, window.data(), window.size() * sizeof(float));

  std::vector<float> gradients(params), weights(params);
  size_t wrong = 0;
  // A put past the end of another rank's window is refused here, before anything moves.
  const int neighbour = (rank + 1) % size;
  try {
    shared.put(neighbour, shared.bytes(neighbour) - 2, gradients.data(), sizeof(float));
    std::fprintf(stderr, "rank %d: a put past the end of rank %d's window was accepted\n", rank, neighbour);
    ++wrong;
  } catch (const chorus::InvalidArgument& error) {
    if (!std::strstr(error.what(), "does not fit")) {
      std::fprintf(stderr, "rank %d: unexpected error text: %s\n", rank, error.what());
      ++wrong;
    }
  }
  double push_seconds = 0, pull_seconds = 0;
  for (size_t step = 0; step < steps; ++step) {
    for (size_t i = 0; i < params; ++i) gradients[i] = gradient(rank, step, i);
    auto started = std::chrono::steady_clock::now();
    for (int owner = 0; owner < size; ++owner) {
      const size_t slot = shard_length(owner) * (1 + static_cast<size_t>(rank));
      shared.put(owner, slot * sizeof(float), gradients.data() + shard_begin(owner), shard_length(owner) * sizeof(float));
    }
    shared.flush_all();
    chorus::barrier(*context);
    push_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    for (size_t i = 0; i < mine; ++i)
      for (int worker = 0; worker < size; ++worker) window[i] -= window[mine * (1 + static_cast<size_t>(worker)) + i];
    chorus::barrier(*context);
    started = std::chrono::steady_clock::now();
    for (int owner = 0; owner < size; ++owner)
      shared.get(owner, 0, weights.data() + shard_begin(owner), shard_length(owner) * sizeof(float));
    shared.flush_all();
    pull_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    for (size_t i = 0; i < params; ++i)
      if (weights[i] != expected_weight(i, step, size)) ++wrong;
    // Nobody puts the next step's gradients before every worker has read these weights.
    chorus::barrier(*context);
  }
  int native = 0;
  for (int peer = 0; peer < size; ++peer) native += peer != rank && shared.native(peer);
  if (wrong) {
    std::fprintf(stderr, "rank %d: %zu wrong weights\n", rank, wrong);
    return 1;
  }
  std::printf("parameter_server OK rank=%d ranks=%d params=%zu steps=%zu native_peers=%d push_ms=%.3f pull_ms=%.3f\n",
              rank, size, params, steps, native, 1e3 * push_seconds / static_cast<double>(steps),
              1e3 * pull_seconds / static_cast<double>(steps));
  return 0;
}

}  // namespace
