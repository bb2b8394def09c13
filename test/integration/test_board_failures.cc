// The board (algorithms/shared_memory/board.h) when ranks disagree or fail,
// with ranks as threads of this process: another call, another root, another
// algorithm, a late rank, a rank that never comes or dies. Every case fails
// every rank with an error naming the peer, well within the timeout, or (for
// a late rank) shows that nobody waits longer than the ring's depth needs.
// Bit-exact results on the board are test_board.cc's.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "test/integration/rank_threads.h"

using namespace chorus;
using namespace std::chrono_literals;
using chorus::testing::require_all_ok;
using chorus::testing::run_ranks;
using chorus::testing::Verdicts;
using chorus::testing::verdicts_of;

TEST_CASE("ranks that call different board collectives fail with MismatchError naming the peer", "[board]") {
  const auto started = std::chrono::steady_clock::now();
  const Verdicts verdicts = verdicts_of(run_ranks(
      3,
      [&](Context& context) {
        barrier(context);  // the board is set up
        std::vector<float> data(context.rank() == 1 ? 3 : 2, 1.0f);
        allreduce(context, std::span(data), ReduceOp::sum);
      },
      20s));
  CHECK(std::chrono::steady_clock::now() - started < 10s);
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank << ": " << verdicts.texts[static_cast<size_t>(rank)]);
    CHECK(verdicts.classes[static_cast<size_t>(rank)] == "MismatchError");
  }
  // Who saw it first hand names the peer and both calls.
  bool first_hand = false;
  for (const std::string& text : verdicts.texts)
    first_hand = first_hand || (text.find("allreduce of 3 float32 sum") != std::string::npos &&
                                text.find("allreduce of 2 float32 sum") != std::string::npos &&
                                text.find("peer rank") != std::string::npos);
  CHECK(first_hand);
}

TEST_CASE("ranks whose large allreduces differ in count fail in the first piece with MismatchError", "[board]") {
  const auto started = std::chrono::steady_clock::now();
  const Verdicts verdicts = verdicts_of(run_ranks(
      3,
      [&](Context& context) {
        barrier(context);
        std::vector<float> data(context.rank() == 1 ? 300001 : 300000, 1.0f);
        allreduce(context, std::span(data), ReduceOp::sum);
      },
      20s));
  CHECK(std::chrono::steady_clock::now() - started < 10s);
  bool first_hand = false;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string& text = verdicts.texts[static_cast<size_t>(rank)];
    INFO("rank " << rank << ": " << text);
    CHECK(verdicts.classes[static_cast<size_t>(rank)] == "MismatchError");
    first_hand = first_hand || (text.find("allreduce of 300001 float32 sum") != std::string::npos &&
                                text.find("allreduce of 300000 float32 sum") != std::string::npos);
  }
  CHECK(first_hand);
}

// The root of a small broadcast does not wait for its root check
// (board_ring.cc): a root that only its left neighbour contradicts learns
// it in that call or its next, as on messages (deferred_root_checks.h).
// A small broadcast (on the ring) where each rank names root_of(rank), then
// a barrier; every rank must fail with MismatchError in one of the two.
Verdicts small_broadcast_disagreeing(int size, int (*root_of)(int rank, int size)) {
  std::vector<int> failed_in(static_cast<size_t>(size), 0);
  const Verdicts verdicts = verdicts_of(run_ranks(
      size,
      [&](Context& context) {
        barrier(context);
        failed_in[static_cast<size_t>(context.rank())] = 1;
        std::vector<int32_t> data(4, context.rank());
        broadcast(context, std::span(data), root_of(context.rank(), size));
        failed_in[static_cast<size_t>(context.rank())] = 2;
        barrier(context);
        failed_in[static_cast<size_t>(context.rank())] = 0;
      },
      20s));
  for (int rank = 0; rank < size; ++rank) {
    INFO("rank " << rank << ": " << verdicts.texts[static_cast<size_t>(rank)]);
    CHECK(verdicts.classes[static_cast<size_t>(rank)] == "MismatchError");
    CHECK(failed_in[static_cast<size_t>(rank)] >= 1);
  }
  return verdicts;
}

TEST_CASE("on the board, a rank naming another root fails every rank, in that call or the next", "[board]") {
  for (int size : {2, 3, 4}) {
    CAPTURE(size);
    const Verdicts verdicts =
        small_broadcast_disagreeing(size, [](int rank, int ranks) { return rank == ranks - 1 ? 1 % ranks : 0; });
    // Rank 0 learns it first hand, or from the last rank, which sees the
    // member it waits on (its root, 1, or a neighbour) name root 0.
    const std::string first_hand =
        "broadcast #1: peer rank " + std::to_string(size - 1) + " names root 1 but this rank names root 0";
    const std::string from_the_last = "rank " + std::to_string(size - 1) + ": broadcast #1: peer rank ";
    const std::string their_words = " names root 0 but this rank names root 1";
    // Or the barrier's slots, which carry each member's last root
    // (algorithms/execution/late_root_checks.h), may show it first.
    const std::string in_the_barrier = " names root 1 in the last rooted call before it but this rank names root 0";
    const std::string& text = verdicts.texts[0];
    const size_t relayed = text.find(from_the_last);
    const std::string in_their_barrier = " names root 0 in the last rooted call before it but this rank names root 1";
    CHECK((text.find(first_hand) != std::string::npos || text.find(in_the_barrier) != std::string::npos ||
           (relayed != std::string::npos && text.find(in_their_barrier, relayed) != std::string::npos) ||
           (relayed != std::string::npos && text.find(their_words, relayed) != std::string::npos)));
  }
}

TEST_CASE("every rank naming itself root of a small broadcast on the board fails every rank, that call or the next",
          "[board]") {
  for (int size : {2, 3, 4}) {
    CAPTURE(size);
    const Verdicts verdicts = small_broadcast_disagreeing(size, [](int rank, int) { return rank; });
    for (const std::string& text : verdicts.texts) CHECK(text.find(" names root ") != std::string::npos);
  }
}

TEST_CASE("small broadcasts back to back, every rank naming itself root, fail every rank within the ring's check "
          "batch",
          "[board]") {
  // Nothing but ring calls: no later call of another kind settles the
  // roots' deferred checks, so each root settles them itself once
  // Board::kRingCheckBatch (16) have gathered, those whose entries arrived.
  // A rank that ran ahead of a late neighbour waits for that entry once the
  // ring's run-ahead (62 calls) is spent, in call 64 at the latest. At 2
  // ranks the second to reach call 17 finds its neighbour's first entry
  // there and fails in it (at 3 a rank may still be in the barrier when the
  // abort comes, and its right neighbour waits until call 64 to hear of
  // it). A rank's data stays its own throughout.
  constexpr int kCalls = 100;
  constexpr int kFirstHandBy = 16 + 1;
  constexpr int kEveryRankBy = 64;
  // Named: `auto` may take messages at 3 ranks, where nothing checks a root
  // in these calls (each rank only sends).
  CollectiveOptions board;
  board.algorithm = "board";
  for (int size : {2, 3}) {
    CAPTURE(size);
    std::vector<int> failed_in(static_cast<size_t>(size), 0);
    std::atomic<int> wrong{0};
    const Verdicts verdicts = verdicts_of(run_ranks(
        size,
        [&](Context& context) {
          barrier(context);
          for (int call = 1; call <= kCalls; ++call) {
            failed_in[static_cast<size_t>(context.rank())] = call;
            std::vector<int32_t> data(4, context.rank() * 1000 + call);
            broadcast(context, std::span(data), context.rank(), board);
            if (data != std::vector<int32_t>(4, context.rank() * 1000 + call)) ++wrong;
          }
          failed_in[static_cast<size_t>(context.rank())] = kCalls + 1;
        },
        20s));
    CHECK(wrong == 0);
    for (int rank = 0; rank < size; ++rank) {
      INFO("rank " << rank << ": " << verdicts.texts[static_cast<size_t>(rank)]);
      CHECK(verdicts.classes[static_cast<size_t>(rank)] == "MismatchError");
      CHECK(verdicts.texts[static_cast<size_t>(rank)].find(" names root ") != std::string::npos);
      // A rank the abort reaches early fails in any call, or still in the
      // barrier before them (0).
      CHECK(failed_in[static_cast<size_t>(rank)] <= kEveryRankBy);
    }
    if (size == 2) {
      INFO("failed in calls " << failed_in[0] << " and " << failed_in[1]);
      CHECK(std::min(failed_in[0], failed_in[1]) >= 1);
      CHECK(std::min(failed_in[0], failed_in[1]) <= kFirstHandBy);
    }
  }
}

// 100 small broadcasts from root 0 at `size` ranks, where the ranks that
// `late` names start 300 ms after the others: whether every call arrived,
// and how long rank `timed`'s first 10 took.
struct LateStart {
  int wrong = 0;
  int64_t first_ten_ms = 0;
};
LateStart broadcasts_with_late_ranks(int size, bool (*late)(int rank), int timed) {
  constexpr int kCalls = 100;
  std::atomic<int> wrong{0};
  std::atomic<int64_t> first_ten_ms{0};
  require_all_ok(run_ranks(size, [&](Context& context) {
    barrier(context);
    const auto started = std::chrono::steady_clock::now();
    if (late(context.rank())) std::this_thread::sleep_for(300ms);
    for (int call = 0; call < kCalls; ++call) {
      std::vector<int64_t> data(3, context.rank() == 0 ? call : -1);
      broadcast(context, std::span(data), 0);
      if (data != std::vector<int64_t>(3, call)) ++wrong;
      if (call == 9 && context.rank() == timed)
        first_ten_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                             started).count();
    }
    barrier(context);
  }));
  return {wrong.load(), first_ten_ms.load()};
}

TEST_CASE("a small broadcast's root on the board runs ahead of a late rank, waits past the ring's depth, and every "
          "call arrives",
          "[board]") {
  // The root's first calls return while the others have not started (they
  // start 300 ms late); past Board::kRingRunAhead calls it waits for room.
  for (int size : {2, 4}) {
    CAPTURE(size);
    const LateStart run = broadcasts_with_late_ranks(size, [](int rank) { return rank != 0; }, 0);
    CHECK(run.wrong == 0);
    INFO("the root's first 10 broadcasts took " << run.first_ten_ms << " ms");
    CHECK(run.first_ten_ms < 250);
  }
}

TEST_CASE("a small broadcast's receiver on the board does not wait for a late left neighbour, and every call "
          "arrives",
          "[board]") {
  // Rank 2 receives from root 0; its left neighbour, rank 1, starts 300 ms
  // late. Rank 2 checks rank 1's entries later (board_ring.cc), so its
  // first calls return as soon as the root's data is there.
  const LateStart run = broadcasts_with_late_ranks(3, [](int rank) { return rank == 1; }, 2);
  CHECK(run.wrong == 0);
  INFO("rank 2's first 10 broadcasts took " << run.first_ten_ms << " ms");
  CHECK(run.first_ten_ms < 250);
}

TEST_CASE("a rank that runs the call on messages while the others use the board is a mismatch, not a hang",
          "[board]") {
  const auto started = std::chrono::steady_clock::now();
  const Verdicts verdicts = verdicts_of(run_ranks(
      3,
      [&](Context& context) {
        barrier(context);
        std::vector<float> data(2, 1.0f);
        CollectiveOptions options;
        if (context.rank() == 2) options.algorithm = "recursive_doubling";
        allreduce(context, std::span(data), ReduceOp::sum, options);
      },
      20s));
  CHECK(std::chrono::steady_clock::now() - started < 10s);
  bool named = false;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string& text = verdicts.texts[static_cast<size_t>(rank)];
    INFO("rank " << rank << ": " << text);
    CHECK(verdicts.classes[static_cast<size_t>(rank)] == "MismatchError");
    named = named || text.find("peer rank 2 runs it on messages") != std::string::npos;
  }
  CHECK(named);
}

TEST_CASE("a rank that never calls a board collective is named in the others' timeout", "[board]") {
  std::atomic<bool> done{false};
  const Verdicts verdicts = verdicts_of(run_ranks(
      3,
      [&](Context& context) {
        barrier(context);
        if (context.rank() == 1) {
          while (!done) std::this_thread::sleep_for(10ms);
          return;
        }
        std::vector<float> data(2, 1.0f);
        try {
          allreduce(context, std::span(data), ReduceOp::sum);
        } catch (...) {
          done = true;
          throw;
        }
      },
      1500ms));
  for (int rank : {0, 2}) {
    const std::string& text = verdicts.texts[static_cast<size_t>(rank)];
    INFO("rank " << rank << ": " << text);
    CHECK(verdicts.classes[static_cast<size_t>(rank)] == "TimeoutError");
    CHECK(text.find("allreduce #1") != std::string::npos);
    CHECK(text.find("rank 1 has not called allreduce #1") != std::string::npos);
  }
}

TEST_CASE("a rank that fails before a board call ends the others' wait at once, naming it", "[board]") {
  // One shot, and a large allreduce the others are in the pieces of.
  for (size_t count : {size_t{2}, size_t{600000}}) {
    CAPTURE(count);
    const auto started = std::chrono::steady_clock::now();
    const Verdicts verdicts = verdicts_of(run_ranks(
        3,
        [&](Context& context) {
          barrier(context);
          if (context.rank() == 2) context.abort("rank 2 gives up");
          std::vector<float> data(count, 1.0f);
          allreduce(context, std::span(data), ReduceOp::sum);
        },
        20s));
    CHECK(std::chrono::steady_clock::now() - started < 5s);
    for (int rank : {0, 1}) {
      const std::string& text = verdicts.texts[static_cast<size_t>(rank)];
      INFO("rank " << rank << ": " << text);
      CHECK_FALSE(verdicts.classes[static_cast<size_t>(rank)].empty());
      CHECK(text.find("rank 2") != std::string::npos);
    }
  }
}
