// Ranks that disagree on the root of a rooted collective (broadcast, reduce,
// gather(v), scatter(v)) all fail with MismatchError, the roots included, and
// well within the timeout: ranks as threads over a HashStore, on whichever
// transport the test's environment picks (meson runs it over shm and tcp,
// with every pair connected at once and on demand).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "test/integration/rank_threads.h"

using namespace chorus;
using chorus::testing::run_ranks;

namespace {

enum class Rooted { broadcast, reduce, gather, gatherv, scatter, scatterv };

const char* name_of(Rooted kind) {
  switch (kind) {
    case Rooted::broadcast: return "broadcast";
    case Rooted::reduce: return "reduce";
    case Rooted::gather: return "gather";
    case Rooted::gatherv: return "gatherv";
    case Rooted::scatter: return "scatter";
    case Rooted::scatterv: return "scatterv";
  }
  return "?";
}

constexpr Rooted kEveryRooted[] = {Rooted::broadcast, Rooted::reduce,  Rooted::gather,
                                   Rooted::gatherv,   Rooted::scatter, Rooted::scatterv};

// Long enough that a hang shows as a timeout far beyond what a mismatch takes.
constexpr std::chrono::milliseconds kTimeout{20000};
constexpr std::chrono::milliseconds kWellWithin{5000};

// One rooted call naming `root`, with buffers every rank could use as root
// (each rank may believe it is).
void call_rooted(Context& context, Rooted kind, int root) {
  const auto ranks = static_cast<size_t>(context.size());
  const size_t count = 1000;
  std::vector<float> block(count, static_cast<float>(context.rank()));
  std::vector<float> all(count * ranks, -1.0f);
  std::vector<size_t> counts(ranks);
  for (size_t r = 0; r < ranks; ++r) counts[r] = count - r;  // unequal blocks, all within `count`
  const size_t own = counts[static_cast<size_t>(context.rank())];
  switch (kind) {
    case Rooted::broadcast: broadcast(context, block.data(), count, DataType::float32, root); break;
    case Rooted::reduce:
      reduce(context, block.data(), all.data(), count, DataType::float32, ReduceOp::sum, root);
      break;
    case Rooted::gather: gather(context, block.data(), all.data(), count, DataType::float32, root); break;
    case Rooted::gatherv: gatherv(context, block.data(), all.data(), counts, DataType::float32, root); break;
    case Rooted::scatter: scatter(context, all.data(), block.data(), count, DataType::float32, root); break;
    case Rooted::scatterv:
      block.resize(own);
      scatterv(context, all.data(), block.data(), counts, DataType::float32, root);
      break;
  }
}

// What one rank ended with: the error's class and text, and which call raised it.
struct Verdict {
  std::string error_class = "none";
  std::string text;
  int failed_call = 0;  // 1: the mismatched call itself; 2: the one after it
};

std::string class_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const MismatchError&) {
    return "MismatchError";
  } catch (const TimeoutError&) {
    return "TimeoutError";
  } catch (const Aborted&) {
    return "Aborted";
  } catch (const IoError&) {
    return "IoError";
  } catch (const std::exception&) {
    return "other";
  }
}

std::string text_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  }
}

// Runs `kind` with each rank naming root_of(rank), then (on ranks whose call
// returned) a barrier, which must fail with the first call's error.
std::vector<Verdict> run_disagreement(int size, Rooted kind, int (*root_of)(int rank, int size),
                                      std::chrono::milliseconds& took) {
  std::vector<Verdict> verdicts(static_cast<size_t>(size));
  const auto started = std::chrono::steady_clock::now();
  auto outcomes = run_ranks(size, [&](Context& context) {
    Verdict& verdict = verdicts[static_cast<size_t>(context.rank())];
    verdict.failed_call = 1;
    call_rooted(context, kind, root_of(context.rank(), size));
    verdict.failed_call = 2;
    barrier(context);
    verdict.failed_call = 0;
  }, kTimeout);
  took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  for (size_t rank = 0; rank < outcomes.size(); ++rank) {
    if (!outcomes[rank].error) {
      verdicts[rank].failed_call = 0;
      continue;
    }
    verdicts[rank].error_class = class_of(outcomes[rank].error);
    verdicts[rank].text = text_of(outcomes[rank].error);
  }
  return verdicts;
}

// A broadcast on messages: the board's two slots let a root run only one
// call ahead (algorithms/shared_memory/board.h).
CollectiveOptions on_messages() {
  CollectiveOptions options;
  options.algorithm = "binomial";
  return options;
}

int own_rank(int rank, int) { return rank; }
// Every rank names root 0 but the last, which names 1.
int last_names_one(int rank, int size) { return rank == size - 1 ? 1 : 0; }

}  // namespace

// A rank that only sends in its Plan (a broadcast's or a scatter's root)
// does not wait for its root check: where only such ranks see the
// disagreement, it fails their next call (algorithms/execution/
// deferred_root_checks.h), and the abort fails every other rank.
TEST_CASE("every rank naming itself root fails with MismatchError on every rank, in that call or the next",
          "[roots]") {
  for (int size : {2, 3, 4}) {
    for (Rooted kind : kEveryRooted) {
      CAPTURE(size, name_of(kind));
      std::chrono::milliseconds took{};
      const std::vector<Verdict> verdicts = run_disagreement(size, kind, own_rank, took);
      CHECK(took < kWellWithin);
      for (size_t rank = 0; rank < verdicts.size(); ++rank) {
        const Verdict& verdict = verdicts[rank];
        INFO("rank " << rank << ": " << verdict.error_class << ": " << verdict.text);
        CHECK(verdict.error_class == "MismatchError");
        CHECK(verdict.failed_call >= 1);
        // Whether this rank saw it or adopted a neighbour's report, the words
        // are about roots: the check's ("names root 1"), or a Plan's frame
        // that met a receive for another root (a broadcast's root receives
        // in scatter-allgather).
        CHECK(verdict.text.find(" root ") != std::string::npos);
      }
    }
  }
}

// A gather whose ranks all name themselves root waits on every rank for
// blocks nobody sends: the late check (algorithms/execution/
// late_root_checks.h) is what finds it, in the root check's words.
TEST_CASE("the root check's words name this rank, the peer and both roots", "[roots]") {
  std::chrono::milliseconds took{};
  const std::vector<Verdict> verdicts = run_disagreement(3, Rooted::gather, own_rank, took);
  CHECK(took < kWellWithin);
  // Rank 1's own verdict, unless rank 0's or rank 2's report reached it first.
  const std::string own = "rank 1: gather #0: peer rank 0 names root 0 but this rank names root 1";
  bool someone_saw_it_first_hand = false;
  for (int rank = 0; rank < 3; ++rank) {
    const int left = (rank + 2) % 3;
    const std::string first_hand = cat("rank ", rank, ": gather #0: peer rank ", left, " names root ", left,
                                       " but this rank names root ", rank);
    const std::string& text = verdicts[static_cast<size_t>(rank)].text;
    INFO(text);
    someone_saw_it_first_hand = someone_saw_it_first_hand || text == first_hand;
    if (rank == 1 && text.find("aborted") == std::string::npos) CHECK(text == own);
  }
  CHECK(someone_saw_it_first_hand);
}

TEST_CASE("one rank naming another root fails every rank with MismatchError, this call or the next", "[roots]") {
  for (int size : {2, 3, 4}) {
    for (Rooted kind : kEveryRooted) {
      CAPTURE(size, name_of(kind));
      std::chrono::milliseconds took{};
      const std::vector<Verdict> verdicts = run_disagreement(size, kind, last_names_one, took);
      CHECK(took < kWellWithin);
      for (size_t rank = 0; rank < verdicts.size(); ++rank) {
        const Verdict& verdict = verdicts[rank];
        INFO("rank " << rank << " (failed in call " << verdict.failed_call << "): " << verdict.error_class << ": "
                     << verdict.text);
        CHECK(verdict.error_class == "MismatchError");
        CHECK(verdict.failed_call >= 1);
      }
      // The ranks whose left neighbour disagrees are the last (it names root
      // 1, its neighbour 0) and rank 0 (it names 0, its neighbour 1). Whichever
      // of them receives in its Plan sees it in the call itself: the last
      // rank of a broadcast or a scatter (with 3 ranks or more, where it is
      // not the root it names), rank 0 of a gather or a reduce (its root).
      const bool fans_out = kind == Rooted::broadcast || kind == Rooted::scatter || kind == Rooted::scatterv;
      if (!fans_out) CHECK(verdicts.front().failed_call == 1);
      if (fans_out && size >= 3) CHECK(verdicts.back().failed_call == 1);
    }
  }
}

// A broadcast on messages whose ranks all name themselves root only sends,
// on every rank: nothing in the call itself differs. The root each rank
// named rides in the next call's signature (Call::previous_root), and that
// call fails on every rank, its words naming both roots.
TEST_CASE("a rooted call every rank finished with its own root fails the next call, naming both roots", "[roots]") {
  for (int size : {2, 3, 4}) {
    CAPTURE(size);
    std::vector<std::string> texts(static_cast<size_t>(size));
    std::vector<int> failed_call(static_cast<size_t>(size), 0);
    auto outcomes = run_ranks(size, [&](Context& context) {
      const auto rank = static_cast<size_t>(context.rank());
      std::vector<float> data(16, static_cast<float>(context.rank()));
      failed_call[rank] = 1;
      broadcast(context, data.data(), data.size(), DataType::float32, context.rank(), on_messages());
      failed_call[rank] = 2;
      std::vector<float> sum(4, 1.0f);
      CollectiveOptions messages;
      messages.algorithm = "ring";
      allreduce(context, std::span(sum), ReduceOp::sum, messages);
      failed_call[rank] = 0;
    }, kTimeout);
    bool seen_in_the_next_call = false;
    for (size_t rank = 0; rank < outcomes.size(); ++rank) {
      INFO("rank " << rank << ": " << (outcomes[rank].error ? text_of(outcomes[rank].error) : "no error"));
      REQUIRE(outcomes[rank].error);
      CHECK(class_of(outcomes[rank].error) == "MismatchError");
      // A rank the abort reaches before it starts the broadcast fails there.
      CHECK(failed_call[rank] >= 1);
      // Seen first hand or relayed: "... after a rooted call naming root 1 ...".
      const std::string text = text_of(outcomes[rank].error);
      CHECK(text.find("after a rooted call naming root ") != std::string::npos);
      seen_in_the_next_call = seen_in_the_next_call || (failed_call[rank] == 2 && text.find("aborted") == std::string::npos);
    }
    CHECK(seen_in_the_next_call);
  }
}

// The same, back to back: every call is another self-rooted broadcast, so
// no call ever receives, nor carries the roots to a rank that does. The
// roots' frames wait unclaimed at their children, which look at what waits
// every 16 covered calls (late_root_checks.h, item 2): the calls fail
// before the last, not as the Context ends. At 2 and 3 ranks every rank is
// a child of every other's binomial tree, so whichever rank runs its calls
// later finds the frames of one that ran earlier, however the threads are
// scheduled. At 4 a rank is no child of its right neighbour's tree: if only
// those two run their calls while the others are off the cores, neither
// sees a frame, and the barrier after them (its chained root) finds it.
TEST_CASE("self-rooted broadcasts back to back on messages fail every rank within the calls", "[roots]") {
  constexpr int kCalls = 400;
  for (int size : {2, 3, 4}) {
    CAPTURE(size);
    std::vector<int> failed_in(static_cast<size_t>(size), 0);  // 1..kCalls; kCalls + 1: the barrier after them
    auto outcomes = run_ranks(size, [&](Context& context) {
      const auto rank = static_cast<size_t>(context.rank());
      barrier(context);
      for (int call = 1; call <= kCalls; ++call) {
        failed_in[rank] = call;
        std::vector<int32_t> data(4, context.rank());
        broadcast(context, data.data(), data.size(), DataType::int32, context.rank(), on_messages());
        // Each root keeps its own data: nothing wrong ever comes back.
        if (data != std::vector<int32_t>(4, context.rank())) throw std::runtime_error("a root's data changed");
      }
      failed_in[rank] = kCalls + 1;
      barrier(context);
      failed_in[rank] = 0;
    }, kTimeout);
    bool seen_first_hand_within_the_calls = false;
    for (size_t rank = 0; rank < outcomes.size(); ++rank) {
      const std::string text = outcomes[rank].error ? text_of(outcomes[rank].error) : "no error";
      INFO("rank " << rank << " (failed in call " << failed_in[rank] << "): " << text);
      REQUIRE(outcomes[rank].error);
      CHECK(class_of(outcomes[rank].error) == "MismatchError");
      CHECK(text.find(" root ") != std::string::npos);
      if (failed_in[rank] >= 1 && failed_in[rank] <= kCalls && text.find("aborted") == std::string::npos) {
        seen_first_hand_within_the_calls = true;
        // "rank 1: broadcast #17: peer rank 0 names root 0 but this rank
        // names root 1": the frame of a member that named itself.
        bool names_a_self_rooted_peer = false;
        for (int peer = 0; peer < size; ++peer)
          names_a_self_rooted_peer = names_a_self_rooted_peer ||
                                     text.find(cat("rank ", rank, ": broadcast #")) == 0 &&
                                         text.find(cat(": peer rank ", peer, " names root ", peer,
                                                       " but this rank names root ", rank)) != std::string::npos;
        // Or, where this rank had forgotten the call: "... which this rank
        // finished without taking it".
        const bool names_a_finished_call = text.find("finished without taking it") != std::string::npos;
        CHECK((names_a_self_rooted_peer || names_a_finished_call));
      }
    }
    if (size <= 3) CHECK(seen_first_hand_within_the_calls);
  }
}

TEST_CASE("ranks that agree on the root still run every rooted collective", "[roots]") {
  for (int size : {1, 2, 3}) {
    for (Rooted kind : kEveryRooted) {
      CAPTURE(size, name_of(kind));
      auto outcomes = run_ranks(size, [&](Context& context) {
        for (int root = 0; root < size; ++root) call_rooted(context, kind, root);
      }, kTimeout);
      chorus::testing::require_all_ok(outcomes);
    }
  }
}

TEST_CASE("split children check their roots among their own ranks", "[roots][split]") {
  // Children {0, 2} and {1, 3}: each agrees on its roots in a first round
  // (group tags keep the two children's checks apart on the shared pairs),
  // then each member names itself root.
  std::vector<std::string> classes(4, "none");
  auto outcomes = run_ranks(4, [&](Context& world) {
    std::shared_ptr<Context> child = world.split(world.rank() % 2, world.rank());
    for (Rooted kind : kEveryRooted)
      for (int root = 0; root < child->size(); ++root) call_rooted(*child, kind, root);
    try {
      // In the try: a rank whose barrier ends early may abort with the
      // mismatch while another still waits in it.
      barrier(world);
      call_rooted(*child, Rooted::broadcast, child->rank());
      // Each member only sent: the call after it raises the disagreement.
      barrier(*child);
    } catch (...) {
      classes[static_cast<size_t>(world.rank())] = class_of(std::current_exception());
      throw;
    }
  }, kTimeout);
  for (size_t rank = 0; rank < outcomes.size(); ++rank) {
    INFO("rank " << rank << ": " << (outcomes[rank].error ? text_of(outcomes[rank].error) : "no error"));
    CHECK(classes[rank] == "MismatchError");
  }
}

TEST_CASE("a broadcast's root runs ahead of a neighbour that has not reached the call yet", "[roots]") {
  // Rank 0 is the root of 20 small broadcasts; rank 1 (its left neighbour,
  // whose root checks it would wait for) starts them 300 ms late. The root
  // returns from all 20 long before that, and the checks it left are
  // settled by the barrier after them: every broadcast still arrives whole.
  constexpr int kCalls = 20;
  std::vector<std::chrono::milliseconds> root_took(1);
  std::atomic<int> wrong{0};  // Catch's assertions are not for the rank threads
  auto outcomes = run_ranks(2, [&](Context& context) {
    barrier(context);  // the first call sets up the Context's candidates on every rank
    const auto started = std::chrono::steady_clock::now();
    if (context.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int call = 0; call < kCalls; ++call) {
      std::vector<float> data(2, context.rank() == 0 ? static_cast<float>(call) : -1.0f);
      broadcast(context, data.data(), data.size(), DataType::float32, 0, on_messages());
      if (data != std::vector<float>(2, static_cast<float>(call))) ++wrong;
    }
    if (context.rank() == 0)
      root_took[0] = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
    barrier(context);
  }, kTimeout);
  chorus::testing::require_all_ok(outcomes);
  CHECK(wrong == 0);
  INFO("the root's 20 broadcasts took " << root_took[0].count() << " ms");
  CHECK(root_took[0] < std::chrono::milliseconds(250));
}

TEST_CASE("a broadcast's root runs 200 calls ahead of late receivers, and every call arrives", "[roots]") {
  // No root check message holds it (late_root_checks.h): 200 broadcasts
  // then a barrier, with the receivers late, lose nothing.
  std::atomic<int> wrong{0};
  auto outcomes = run_ranks(3, [&](Context& context) {
    if (context.rank() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (int call = 0; call < 200; ++call) {
      int64_t value = context.rank() == 0 ? call : -1;
      broadcast(context, &value, 1, DataType::int64, 0, on_messages());
      if (value != call) ++wrong;
    }
    barrier(context);
  }, kTimeout);
  chorus::testing::require_all_ok(outcomes);
  CHECK(wrong == 0);
}

TEST_CASE("a reduce's leaves more than 64 calls ahead wait for their neighbour, and every call arrives", "[roots]") {
  // A reduce keeps its root check message; its leaves only send and leave
  // the receive to the deferred checks (deferred_root_checks.h), and past
  // their capacity a leaf waits for the oldest. 200 reduces then a barrier,
  // with the root late, lose nothing.
  std::atomic<int> wrong{0};
  auto outcomes = run_ranks(3, [&](Context& context) {
    if (context.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (int call = 0; call < 200; ++call) {
      int64_t value = call + context.rank();
      int64_t sum = -1;
      reduce(context, &value, &sum, 1, DataType::int64, ReduceOp::sum, 0, on_messages());
      if (context.rank() == 0 && sum != 3 * call + 3) ++wrong;
    }
    barrier(context);
  }, kTimeout);
  chorus::testing::require_all_ok(outcomes);
  CHECK(wrong == 0);
}
