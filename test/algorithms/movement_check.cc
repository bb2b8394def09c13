// Buffers, expected results and simulation for the data-movement tests.
#include "test/algorithms/movement_check.h"

#include <catch2/catch.hpp>

#include <cstring>

#include "base/log.h"
#include "test/algorithms/job_buffers.h"

namespace chorus::algorithms::testing {

namespace {

constexpr std::byte garbage{0xee};

// Element offsets of each block for a block layout.
std::vector<size_t> element_offsets(const std::vector<size_t>& counts) {
  std::vector<size_t> offsets(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i) offsets[i + 1] = offsets[i] + counts[i];
  return offsets;
}

std::vector<size_t> counts_or_fixed(const std::vector<size_t>& counts, const Call& call) {
  return counts.empty() ? std::vector<size_t>(static_cast<size_t>(call.size), call.count) : counts;
}

// A buffer of `elements` holding value(i), in the call's type.
template <class Value>
std::vector<std::byte> filled(const Call& call, size_t elements, Value value) {
  std::vector<std::byte> bytes(elements * call.element_bytes(), garbage);
  for (size_t i = 0; i < elements; ++i) store_value(call.type, bytes.data(), i, value(i));
  return bytes;
}

// A buffer of `elements` that is garbage except [first, first + length),
// which holds value(i - first).
template <class Value>
std::vector<std::byte> garbage_with(const Call& call, size_t elements, size_t first, size_t length, Value value) {
  std::vector<std::byte> bytes(elements * call.element_bytes(), garbage);
  for (size_t i = 0; i < length; ++i) store_value(call.type, bytes.data(), first + i, value(i));
  return bytes;
}

struct Layout {
  std::vector<std::byte> input, output, expected;  // expected: output after the call
};

Layout layout_for(const Call& call) {
  const int rank = call.rank, root = call.root;
  const size_t element = call.element_bytes();
  const std::vector<size_t> counts = counts_or_fixed(call.counts, call);
  const std::vector<size_t> offsets = element_offsets(counts);
  const size_t total = offsets.back();
  // Rank r's block of a gather/allgather is movement_value(r, i); a
  // scatter's root holds movement_value(root, i) over the whole buffer.
  auto own = [&](int r) { return [r](size_t i) { return movement_value(r, i); }; };
  Layout layout;
  switch (call.collective) {
    case Collective::broadcast:
      layout.output = rank == root ? filled(call, call.count, own(root)) : filled(call, call.count, own(-1));
      layout.expected = filled(call, call.count, own(root));
      break;
    case Collective::allgather: {
      layout.expected = std::vector<std::byte>(total * element);
      for (int r = 0; r < call.size; ++r)
        for (size_t i = 0; i < counts[r]; ++i)
          store_value(call.type, layout.expected.data(), offsets[r] + i, movement_value(r, i));
      if (call.in_place) {
        layout.output = garbage_with(call, total, offsets[rank], counts[rank], own(rank));
      } else {
        layout.input = filled(call, counts[rank], own(rank));
        layout.output = std::vector<std::byte>(total * element, garbage);
      }
      break;
    }
    case Collective::gather: {
      std::vector<std::byte> everything(total * element);
      for (int r = 0; r < call.size; ++r)
        for (size_t i = 0; i < counts[r]; ++i)
          store_value(call.type, everything.data(), offsets[r] + i, movement_value(r, i));
      if (rank == root) {
        layout.expected = everything;
        if (call.in_place) {
          layout.output = garbage_with(call, total, offsets[rank], counts[rank], own(rank));
        } else {
          layout.input = filled(call, counts[rank], own(rank));
          layout.output = std::vector<std::byte>(total * element, garbage);
        }
      } else if (call.in_place) {  // the one buffer holds this rank's block; it must stay intact
        layout.output = filled(call, counts[rank], own(rank));
        layout.expected = layout.output;
      } else {
        layout.input = filled(call, counts[rank], own(rank));
      }
      break;
    }
    case Collective::scatter: {
      auto from_root = [&](size_t i) { return movement_value(root, i); };
      layout.expected = filled(call, counts[rank], [&](size_t i) { return from_root(offsets[rank] + i); });
      if (rank == root && call.in_place) {
        layout.output = filled(call, total, from_root);
        layout.expected = layout.output;  // root's block is already where it belongs
      } else {
        if (rank == root) layout.input = filled(call, total, from_root);
        layout.output = std::vector<std::byte>(counts[rank] * element, garbage);
      }
      break;
    }
    case Collective::alltoall: {
      // Block p of rank r's input: movement_value(r * 1000 + p, i).
      const std::vector<size_t> sends = counts_or_fixed(call.send_counts, call);
      const std::vector<size_t> receives = counts_or_fixed(call.recv_counts, call);
      const std::vector<size_t> send_offsets = element_offsets(sends), receive_offsets = element_offsets(receives);
      layout.input = std::vector<std::byte>(send_offsets.back() * element);
      for (int p = 0; p < call.size; ++p)
        for (size_t i = 0; i < sends[p]; ++i)
          store_value(call.type, layout.input.data(), send_offsets[p] + i, movement_value(rank * 7 + p, i));
      layout.output = std::vector<std::byte>(receive_offsets.back() * element, garbage);
      layout.expected = std::vector<std::byte>(receive_offsets.back() * element);
      for (int p = 0; p < call.size; ++p)
        for (size_t i = 0; i < receives[p]; ++i)
          store_value(call.type, layout.expected.data(), receive_offsets[p] + i, movement_value(p * 7 + rank, i));
      break;
    }
    default: FAIL("movement_check does not know " << to_string(call.collective));
  }
  return layout;
}

// The alltoallv counts rank r passes, derived from a job-wide matrix stored
// in call.send_counts row-major (size x size): r sends matrix[r][p] to p.
Call rank_call(const Call& call, int rank, const std::vector<size_t>& matrix) {
  Call mine = call;
  mine.rank = rank;
  if (!matrix.empty()) {
    const auto size = static_cast<size_t>(call.size);
    mine.send_counts.assign(matrix.begin() + rank * size, matrix.begin() + (rank + 1) * size);
    mine.recv_counts.resize(size);
    for (size_t p = 0; p < size; ++p) mine.recv_counts[p] = matrix[p * size + rank];
  }
  return mine;
}

}  // namespace

const PlanTuning tiny_movement_segments{64, 4};

int64_t movement_value(int rank, size_t index) {
  return static_cast<int64_t>((static_cast<size_t>(rank + 3) * 37 + index * 11) % 101) - 50;
}

std::vector<size_t> block_bytes(const Call& call) {
  std::vector<size_t> bytes = counts_or_fixed(call.counts, call);
  for (size_t& b : bytes) b *= call.element_bytes();
  return bytes;
}

std::vector<size_t> random_counts(std::mt19937& random, int size, size_t max_count) {
  std::vector<size_t> counts(static_cast<size_t>(size));
  std::uniform_int_distribution<size_t> amount(1, std::max<size_t>(1, max_count));
  for (size_t& count : counts) count = random() % 3 == 0 ? 0 : amount(random);
  return counts;
}

std::vector<size_t> awkward_counts(int size) {
  return {0, 1, 2, static_cast<size_t>(size - 1), static_cast<size_t>(size + 1), 1009};
}

std::string describe(const Call& call, const Algorithm& algorithm) {
  std::string text = cat(to_string(call.collective), " ", algorithm.name, " of ", to_string(call.type), " on ",
                         call.size, " ranks, root ", call.root, ", ", call.in_place ? "in place" : "out of place");
  if (!call.counts.empty() || !call.send_counts.empty()) {
    text += ", counts";
    for (size_t c : call.counts.empty() ? call.send_counts : call.counts) text += cat(" ", c);
  } else {
    text += cat(", count ", call.count);
  }
  return text;
}

MovementRun run_and_check(const Algorithm& algorithm, const Call& call, const PlanTuning& tuning) {
  INFO(describe(call, algorithm));
  // For alltoallv the test passes the whole size x size matrix in send_counts.
  const std::vector<size_t> matrix =
      call.collective == Collective::alltoall && !call.send_counts.empty() ? call.send_counts : std::vector<size_t>{};
  MovementRun run;
  std::vector<Layout> layouts;
  std::vector<Call> calls;
  for (int rank = 0; rank < call.size; ++rank) {
    calls.push_back(rank_call(call, rank, matrix));
    REQUIRE(algorithm.supports(calls.back()));
    run.plans.push_back(algorithm.build(calls.back(), tuning));
    layouts.push_back(layout_for(calls.back()));
  }
  std::vector<RankBuffers> views(static_cast<size_t>(call.size));
  for (int rank = 0; rank < call.size; ++rank) {
    views[rank].input = layouts[rank].input.empty() ? nullptr : layouts[rank].input.data();
    views[rank].output = layouts[rank].output.empty() ? nullptr : layouts[rank].output.data();
  }
  run.report = simulate(run.plans, views, calls);
  for (int rank = 0; rank < call.size; ++rank) {
    INFO("rank " << rank);
    const Layout& layout = layouts[rank];
    REQUIRE(layout.output.size() == layout.expected.size());
    if (layout.output != layout.expected) {
      size_t first = 0;
      while (layout.output[first] == layout.expected[first]) ++first;
      FAIL("first wrong byte at offset " << first << " of " << layout.output.size());
    }
  }
  for (Layout& layout : layouts) {
    run.inputs.push_back(std::move(layout.input));
    run.outputs.push_back(std::move(layout.output));
  }
  return run;
}

}  // namespace chorus::algorithms::testing
