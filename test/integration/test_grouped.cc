// Grouped collectives (chorus/collectives_grouped.h): many buffers as one
// collective, bit-exact against the plain call's result per member, blocking
// and async, in and out of place, with empty members; ranks whose groups
// split one total differently fail with MismatchError on every rank and no
// member's output written; bad groups are rejected on the calling rank.
// Ranks are threads over a HashStore, on whichever transport the
// environment picks (meson runs it over shm and tcp).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/log.h"
#include "test/integration/rank_threads.h"

using namespace chorus;
using chorus::testing::require_all_ok;
using chorus::testing::run_ranks;

namespace {

enum class Grouped { allreduce, allgather, reduce_scatter };

// Catch2's assertions belong to the test's own thread: a rank thread throws
// instead, and require_all_ok rethrows the first rank's failure.
void expect(bool holds, const std::string& what) {
  if (!holds) throw std::runtime_error(what);
}

const char* name_of(Grouped kind) {
  switch (kind) {
    case Grouped::allreduce: return "grouped_allreduce";
    case Grouped::allgather: return "grouped_allgather";
    case Grouped::reduce_scatter: return "grouped_reduce_scatter";
  }
  return "?";
}

constexpr Grouped kEveryGrouped[] = {Grouped::allreduce, Grouped::allgather, Grouped::reduce_scatter};

// Small integers, exact in every type, distinct per rank, member and element.
template <class T>
T mark(int rank, size_t member, size_t index) {
  return static_cast<T>((rank + 1) * static_cast<int>(index % 7 + member + 1));
}

size_t input_blocks(Grouped kind, int size) { return kind == Grouped::reduce_scatter ? static_cast<size_t>(size) : 1; }
size_t output_blocks(Grouped kind, int size) { return kind == Grouped::allgather ? static_cast<size_t>(size) : 1; }

// One member's buffers: `whole` holds the large side (or both sides of an
// out-of-place allreduce, input first), laid out as the member's call wants.
template <class T>
struct MemberBuffers {
  std::vector<T> input;
  std::vector<T> output;
  GroupMember member;
};

template <class T>
MemberBuffers<T> member_buffers(Grouped kind, Context& context, size_t index, size_t count, bool in_place) {
  const int rank = context.rank();
  MemberBuffers<T> buffers;
  buffers.input.resize(count * input_blocks(kind, context.size()));
  for (size_t i = 0; i < buffers.input.size(); ++i) buffers.input[i] = mark<T>(rank, index, i);
  buffers.output.assign(count * output_blocks(kind, context.size()), static_cast<T>(99));
  buffers.member = {buffers.input.data(), buffers.output.data(), count};
  if (!in_place) return buffers;
  const size_t own = static_cast<size_t>(rank) * count;
  switch (kind) {
    case Grouped::allreduce: buffers.member.output = buffers.input.data(); break;
    case Grouped::allgather:
      for (size_t i = 0; i < count; ++i) buffers.output[own + i] = buffers.input[i];
      buffers.member.input = buffers.output.data() + own;
      break;
    case Grouped::reduce_scatter: buffers.member.output = buffers.input.data() + own; break;
  }
  return buffers;
}

// What member `index` of `count` elements must hold on `rank` afterwards.
template <class T>
std::vector<T> expected(Grouped kind, int size, int rank, size_t index, size_t count) {
  std::vector<T> result;
  switch (kind) {
    case Grouped::allreduce:
    case Grouped::reduce_scatter: {
      const size_t first = kind == Grouped::allreduce ? 0 : static_cast<size_t>(rank) * count;
      for (size_t i = 0; i < count; ++i) {
        int64_t sum = 0;
        for (int r = 0; r < size; ++r) sum += static_cast<int64_t>(mark<T>(r, index, first + i));
        result.push_back(static_cast<T>(sum));
      }
      break;
    }
    case Grouped::allgather:
      for (int r = 0; r < size; ++r)
        for (size_t i = 0; i < count; ++i) result.push_back(mark<T>(r, index, i));
      break;
  }
  return result;
}

// Where a member's result lands.
template <class T>
std::vector<T> result_of(Grouped kind, Context& context, const MemberBuffers<T>& buffers, size_t count) {
  const auto* output = static_cast<const T*>(buffers.member.output);
  const size_t elements = count * output_blocks(kind, context.size());
  return std::vector<T>(output, output + elements);
}

Work run_grouped(Grouped kind, Context& context, std::span<const GroupMember> members, DataType type, bool async) {
  switch (kind) {
    case Grouped::allreduce:
      if (async) return grouped_allreduce_async(context, members, type, ReduceOp::sum);
      grouped_allreduce(context, members, type, ReduceOp::sum);
      break;
    case Grouped::allgather:
      if (async) return grouped_allgather_async(context, members, type);
      grouped_allgather(context, members, type);
      break;
    case Grouped::reduce_scatter:
      if (async) return grouped_reduce_scatter_async(context, members, type, ReduceOp::sum);
      grouped_reduce_scatter(context, members, type, ReduceOp::sum);
      break;
  }
  return Work();
}

// Runs one group of `counts` and checks every member bit-exactly.
template <class T>
void check_group(Grouped kind, Context& context, const std::vector<size_t>& counts, bool in_place, bool async) {
  std::vector<MemberBuffers<T>> buffers;
  buffers.reserve(counts.size());
  std::vector<GroupMember> members;
  for (size_t i = 0; i < counts.size(); ++i) {
    buffers.push_back(member_buffers<T>(kind, context, i, counts[i], in_place));
    members.push_back(buffers.back().member);
  }
  Work work = run_grouped(kind, context, members, data_type_of<T>(), async);
  if (async) work.wait();
  for (size_t i = 0; i < counts.size(); ++i)
    expect(result_of(kind, context, buffers[i], counts[i]) ==
               expected<T>(kind, context.size(), context.rank(), i, counts[i]),
           cat(name_of(kind), " of ", to_string(data_type_of<T>()), ": rank ", context.rank(), " member ", i, " of ",
               counts.size(), in_place ? " in place" : "", async ? " async" : "", " is wrong"));
}

template <class T>
void check_every_group(Context& context) {
  const std::vector<std::vector<size_t>> groups = {
      {3, 0, 17, 1, 1000}, {0, 5}, {64}, {0}, {}, {2, 2, 2},
  };
  for (Grouped kind : kEveryGrouped)
    for (const auto& counts : groups)
      for (bool in_place : {false, true})
        for (bool async : {false, true}) check_group<T>(kind, context, counts, in_place, async);
}

}  // namespace

TEST_CASE("grouped collectives give each member the plain call's result, bit-exact", "[grouped]") {
  for (int size : {1, 2, 3}) {
    CAPTURE(size);
    require_all_ok(run_ranks(size, [](Context& context) {
      check_every_group<float>(context);
      check_every_group<int32_t>(context);
      check_every_group<double>(context);
      check_every_group<uint8_t>(context);
      check_every_group<int64_t>(context);
      // Numbering stayed in step: a plain call after all of them.
      std::vector<int> one{1};
      allreduce(context, std::span(one), ReduceOp::sum);
      expect(one[0] == context.size(), "a plain allreduce after the groups went wrong");
    }));
  }
}

TEST_CASE("a grouped allreduce of max, and async groups queued back to back", "[grouped]") {
  require_all_ok(run_ranks(3, [](Context& context) {
    const int rank = context.rank();
    std::vector<float> a(10, static_cast<float>(rank)), b(3, static_cast<float>(-rank));
    const GroupMember members[] = {{a.data(), a.data(), a.size()}, {b.data(), b.data(), b.size()}};
    grouped_allreduce(context, members, DataType::float32, ReduceOp::max);
    expect(a == std::vector<float>(10, 2.0f) && b == std::vector<float>(3, 0.0f), "max is wrong");

    std::vector<std::vector<int32_t>> data(8, std::vector<int32_t>(5, rank + 1));
    std::vector<Work> works;
    for (size_t i = 0; i + 1 < data.size(); i += 2) {
      const GroupMember pair[] = {{data[i].data(), data[i].data(), 5}, {data[i + 1].data(), data[i + 1].data(), 5}};
      works.push_back(grouped_allreduce_async(context, pair, DataType::int32, ReduceOp::sum));
    }
    for (Work& work : works) work.wait();
    for (const auto& member : data) expect(member == std::vector<int32_t>(5, 6), "a queued group is wrong");
  }));
}

TEST_CASE("the typed grouped overloads check their spans and run", "[grouped]") {
  require_all_ok(run_ranks(2, [](Context& context) {
    const int rank = context.rank();
    std::vector<double> x(4, rank + 1.0), y(2, rank + 10.0);
    const std::span<double> in_place[] = {x, y};
    grouped_allreduce(context, std::span<const std::span<double>>(in_place), ReduceOp::sum);
    expect(x == std::vector<double>(4, 3.0) && y == std::vector<double>(2, 21.0), "typed in-place allreduce");

    const std::vector<int> mine{rank, rank}, other{rank + 5};
    std::vector<int> gathered_mine(4), gathered_other(2);
    const std::span<const int> inputs[] = {mine, other};
    const std::span<int> outputs[] = {gathered_mine, gathered_other};
    grouped_allgather(context, std::span<const std::span<const int>>(inputs),
                      std::span<const std::span<int>>(outputs));
    expect(gathered_mine == std::vector<int>{0, 0, 1, 1} && gathered_other == std::vector<int>{5, 6},
           "typed allgather");

    const std::vector<int> blocks{1, 2, 3, 4};
    std::vector<int> reduced(2);
    const std::span<const int> scatter_inputs[] = {blocks};
    const std::span<int> scatter_outputs[] = {reduced};
    grouped_reduce_scatter(context, std::span<const std::span<const int>>(scatter_inputs),
                           std::span<const std::span<int>>(scatter_outputs), ReduceOp::sum);
    expect(reduced == (rank == 0 ? std::vector<int>{2, 4} : std::vector<int>{6, 8}), "typed reduce_scatter");
  }));
}

TEST_CASE("a typed grouped call whose spans do not fit is rejected on the calling rank", "[grouped]") {
  std::vector<std::string> texts(2);
  require_all_ok(run_ranks(2, [&](Context& context) {
    const std::vector<int> blocks{1, 2, 3, 4};
    std::vector<int> wrong(3);
    const std::span<const int> inputs[] = {blocks};
    const std::span<int> outputs[] = {wrong};
    try {
      grouped_reduce_scatter(context, std::span<const std::span<const int>>(inputs),
                             std::span<const std::span<int>>(outputs), ReduceOp::sum);
      texts[static_cast<size_t>(context.rank())] = "accepted";
    } catch (const InvalidArgument& error) {
      texts[static_cast<size_t>(context.rank())] = error.what();
    }
  }));
  for (int rank = 0; rank < 2; ++rank) {
    INFO(texts[static_cast<size_t>(rank)]);
    CHECK(texts[static_cast<size_t>(rank)] ==
          cat("rank ", rank, ": grouped_reduce_scatter expected member 0's input of 2 blocks of 3 elements, but got ",
              "4 elements"));
  }
}

namespace {

// Every member of every rank's group, filled with 7 (in place), must still
// be 7 after the mismatched call failed.
struct MismatchOutcome {
  std::string error_class = "none";
  std::string text;
  bool outputs_untouched = true;
};

std::vector<MismatchOutcome> run_mismatch(Grouped kind, int size, const std::vector<size_t>& first_rank_counts,
                                          const std::vector<size_t>& other_counts) {
  std::vector<MismatchOutcome> outcomes(static_cast<size_t>(size));
  auto results = run_ranks(size, [&](Context& context) {
    MismatchOutcome& outcome = outcomes[static_cast<size_t>(context.rank())];
    const std::vector<size_t>& counts = context.rank() == 0 ? first_rank_counts : other_counts;
    std::vector<std::vector<float>> inputs, outputs;
    std::vector<GroupMember> members;
    for (size_t count : counts) {
      inputs.emplace_back(count * input_blocks(kind, size), 1.0f);
      outputs.emplace_back(count * output_blocks(kind, size), 7.0f);
    }
    for (size_t i = 0; i < counts.size(); ++i) members.push_back({inputs[i].data(), outputs[i].data(), counts[i]});
    try {
      run_grouped(kind, context, members, DataType::float32, false);
    } catch (const MismatchError& error) {
      outcome.error_class = "MismatchError";
      outcome.text = error.what();
    } catch (const std::exception& error) {
      outcome.error_class = "other";
      outcome.text = error.what();
    }
    for (const auto& output : outputs)
      for (float value : output) outcome.outputs_untouched = outcome.outputs_untouched && value == 7.0f;
  }, std::chrono::milliseconds(20000));
  require_all_ok(results);
  return outcomes;
}

}  // namespace

TEST_CASE("ranks whose groups split one total differently all fail with MismatchError, outputs untouched",
          "[grouped]") {
  struct Disagreement {
    std::vector<size_t> first, others;
  };
  const Disagreement disagreements[] = {
      {{3, 5}, {5, 3}},     // same members, same total, another split
      {{2, 3, 3}, {3, 5}},  // more members, same total
      {{8, 0}, {8}},        // an empty member more
  };
  for (int size : {2, 3}) {
    for (Grouped kind : kEveryGrouped) {
      for (const Disagreement& disagreement : disagreements) {
        CAPTURE(size, name_of(kind), disagreement.first, disagreement.others);
        const auto started = std::chrono::steady_clock::now();
        const std::vector<MismatchOutcome> outcomes = run_mismatch(kind, size, disagreement.first, disagreement.others);
        CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
        for (size_t rank = 0; rank < outcomes.size(); ++rank) {
          const MismatchOutcome& outcome = outcomes[rank];
          INFO("rank " << rank << ": " << outcome.error_class << ": " << outcome.text);
          CHECK(outcome.error_class == "MismatchError");
          CHECK(outcome.text.find("grouped") != std::string::npos);
          // A group of one runs on its own buffers (the plain call's
          // layout); every packed group is untouched.
          const auto& counts = rank == 0 ? disagreement.first : disagreement.others;
          if (counts.size() > 1) CHECK(outcome.outputs_untouched);
        }
      }
    }
  }
}

TEST_CASE("a grouped call and a plain one of the same total do not match", "[grouped]") {
  std::vector<std::string> classes(2);
  require_all_ok(run_ranks(2, [&](Context& context) {
    std::vector<float> data(8, 1.0f);
    try {
      if (context.rank() == 0) {
        allreduce(context, std::span(data), ReduceOp::sum);
      } else {
        const GroupMember members[] = {{data.data(), data.data(), 4}, {data.data() + 4, data.data() + 4, 4}};
        grouped_allreduce(context, members, DataType::float32, ReduceOp::sum);
      }
    } catch (const MismatchError&) {
      classes[static_cast<size_t>(context.rank())] = "MismatchError";
    }
  }));
  CHECK(classes == std::vector<std::string>{"MismatchError", "MismatchError"});
}

TEST_CASE("bad groups are rejected on the calling rank, naming it and the member", "[grouped]") {
  struct BadGroup {
    const char* what;
    const char* words;
    std::function<void(Context&)> call;
  };
  const std::vector<BadGroup> cases = {
      {"a null input with elements", "member 1 got a null input buffer for 4 elements",
       [](Context& context) {
         std::vector<float> a(4), b(4);
         const GroupMember members[] = {{a.data(), a.data(), 4}, {nullptr, b.data(), 4}};
         grouped_allreduce(context, members, DataType::float32, ReduceOp::sum);
       }},
      {"two members writing the same bytes", "members 0 and 1 have overlapping outputs",
       [](Context& context) {
         std::vector<float> a(4), b(8);
         const GroupMember members[] = {{a.data(), b.data(), 4}, {a.data(), b.data() + 2, 4}};
         grouped_allreduce(context, members, DataType::float32, ReduceOp::sum);
       }},
      {"a member's input and output overlapping out of the in-place layout", "member 0 input and output",
       [](Context& context) {
         std::vector<float> a(2 * static_cast<size_t>(context.size()) + 1);
         const GroupMember members[] = {{a.data() + 1, a.data(), 2}, {nullptr, nullptr, 0}};
         grouped_allgather(context, members, DataType::float32);
       }},
      {"a bitwise op on floats", "grouped_reduce_scatter",
       [](Context& context) {
         std::vector<float> a(2 * static_cast<size_t>(context.size())), b(2);
         const GroupMember members[] = {{a.data(), b.data(), 2}, {a.data(), b.data(), 0}};
         grouped_reduce_scatter(context, members, DataType::float32, ReduceOp::bxor);
       }},
  };
  for (const BadGroup& bad : cases) {
    CAPTURE(bad.what);
    std::vector<std::string> texts(2);
    require_all_ok(run_ranks(2, [&](Context& context) {
      try {
        bad.call(context);
        texts[static_cast<size_t>(context.rank())] = "accepted";
      } catch (const InvalidArgument& error) {
        texts[static_cast<size_t>(context.rank())] = error.what();
      }
    }));
    for (int rank = 0; rank < 2; ++rank) {
      const std::string& text = texts[static_cast<size_t>(rank)];
      INFO(text);
      CHECK(text.find(cat("rank ", rank, ": ")) != std::string::npos);
      CHECK(text.find(bad.words) != std::string::npos);
    }
  }
}

TEST_CASE("a rank rejecting its group tells the others at once", "[grouped]") {
  std::vector<std::string> texts(3);
  const auto started = std::chrono::steady_clock::now();
  require_all_ok(run_ranks(3, [&](Context& context) {
    std::vector<float> a(4, 1.0f), b(4, 1.0f);
    const GroupMember good[] = {{a.data(), a.data(), 4}, {b.data(), b.data(), 4}};
    const GroupMember bad[] = {{a.data(), a.data(), 4}, {nullptr, b.data(), 4}};
    try {
      grouped_allreduce(context, context.rank() == 1 ? bad : good, DataType::float32, ReduceOp::sum);
      texts[static_cast<size_t>(context.rank())] = "accepted";
    } catch (const Error& error) {
      texts[static_cast<size_t>(context.rank())] = error.what();
    }
  }));
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  for (const std::string& text : texts) {
    INFO(text);
    CHECK(text.find("rank 1: grouped_allreduce member 1 got a null input") != std::string::npos);
  }
}
