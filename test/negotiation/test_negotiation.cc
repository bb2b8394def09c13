// The Negotiator (adapters/negotiation/negotiator.h) on real Contexts, one
// thread per rank: calls matched by name whatever order each rank submits
// them in, bit-exact, 1,000 times; calls in issue order; ranks that
// disagree (shape, type, name, root, scaling) or refuse fail alike on every
// rank with the job going on; a call some ranks never submit given up
// after the stall limit, naming them; announcements larger than a block;
// shutdown with calls waiting; records through their wire form, and bytes
// that are not records.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "adapters/negotiation/negotiator.h"
#include "base/error.h"
#include "test/integration/rank_threads.h"

using namespace chorus;
using namespace chorus::negotiation;
using chorus::testing::require_all_ok;
using chorus::testing::run_ranks;

namespace {

// Catch2's assertions belong to the test's thread: ranks throw instead.
void expect(bool holds, const std::string& what) {
  if (!holds) throw std::runtime_error(what);
}

std::shared_ptr<Context> borrowed(Context& context) { return std::shared_ptr<Context>(std::shared_ptr<Context>{}, &context); }

Negotiator::Options options(std::chrono::milliseconds stall = std::chrono::milliseconds(0)) {
  Negotiator::Options result;
  result.type_name = [](int32_t type) { return type == 1 ? std::string("float32") : "type " + std::to_string(type); };
  result.op_name = [](uint8_t op) { return op == 0 ? std::string("sum") : "op " + std::to_string(op); };
  if (stall.count() > 0) result.stall_limit = stall;
  return result;
}

Description allreduce_of(const std::string& name, Matching matching, std::vector<int64_t> dims) {
  Description description;
  description.kind = Kind::allreduce;
  description.matching = matching;
  description.name = name;
  description.tensors = {{1, std::move(dims)}};
  return description;
}

// How a call ended, read on the thread that finished it: the exception
// itself never crosses threads. (An exception_ptr shared between threads is
// safe, but its reference count lives in the uninstrumented libstdc++, so
// ThreadSanitizer takes the last owner's destructor for a race.)
struct Outcome {
  std::string type;  // empty: it succeeded
  std::string message;
};

Outcome outcome_of(std::exception_ptr failure) {
  if (!failure) return {};
  try {
    std::rethrow_exception(failure);
  } catch (const MismatchError& error) {
    return {"MismatchError", error.what()};
  } catch (const InvalidArgument& error) {
    return {"InvalidArgument", error.what()};
  } catch (const TimeoutError& error) {
    return {"TimeoutError", error.what()};
  } catch (const Aborted& error) {
    return {"Aborted", error.what()};
  } catch (const PeerLostError& error) {
    return {"PeerLostError", error.what()};
  } catch (const std::exception& error) {
    return {"std::exception", error.what()};
  }
}

// A call that sums `values` over the ranks into `values`, and its outcome.
struct Submission {
  std::vector<float> values;
  std::promise<Outcome> outcome;
  std::future<Outcome> done = outcome.get_future();
};

void submit_allreduce(Negotiator& negotiator, Submission& submission, Description description) {
  Call call;
  call.description = std::move(description);
  call.bytes = submission.values.size() * sizeof(float);
  call.run = [&submission](Context& context, std::span<const Description* const>) {
    allreduce(context, std::span(submission.values), ReduceOp::sum);
  };
  call.done = [&submission](std::exception_ptr failure) { submission.outcome.set_value(outcome_of(failure)); };
  negotiator.submit(std::move(call));
}

// The error the call failed with, as its message; empty for none.
// `expected` names the error type the call must have failed with.
std::string failure_of(Submission& submission, const std::string& expected) {
  const Outcome outcome = submission.done.get();
  if (outcome.type.empty() || outcome.type == expected) return outcome.message;
  return "a failure of another type (" + outcome.type + "): " + outcome.message;
}

void expect_ok(Submission& submission, const std::string& what) {
  const Outcome outcome = submission.done.get();
  if (!outcome.type.empty()) throw std::runtime_error(what + " failed: " + outcome.message);
}

}  // namespace

TEST_CASE("calls matched by name run with their own names' data whatever order each rank submits them in",
          "[negotiation]") {
  constexpr int kRounds = 1000;
  std::atomic<int> wrong{0};
  require_all_ok(run_ranks(3, [&](Context& context) {
    Negotiator negotiator(borrowed(context), options());
    std::mt19937 shuffle(static_cast<unsigned>(context.rank()) * 7919u + 1u);
    for (int round = 0; round < kRounds; ++round) {
      // Three calls of one size; each rank submits them in its own order.
      std::vector<Submission> calls(3);
      std::vector<int> order = {0, 1, 2};
      std::shuffle(order.begin(), order.end(), shuffle);
      for (int which = 0; which < 3; ++which) {
        calls[static_cast<size_t>(which)].values.assign(4, static_cast<float>((which + 1) * 100 + context.rank()));
      }
      for (int which : order) {
        submit_allreduce(negotiator, calls[static_cast<size_t>(which)],
                         allreduce_of("tensor" + std::to_string(which), Matching::by_name, {4}));
      }
      for (int which = 0; which < 3; ++which) {
        Submission& call = calls[static_cast<size_t>(which)];
        expect_ok(call, "call tensor" + std::to_string(which));
        // Sum over ranks 0..2 of (which + 1) * 100 + rank.
        const float expected = static_cast<float>(3 * (which + 1) * 100 + 3);
        for (float value : call.values) {
          if (value != expected) ++wrong;
        }
      }
    }
  }));
  REQUIRE(wrong.load() == 0);
}

TEST_CASE("calls in issue order run in that order, on the submitting thread when small", "[negotiation]") {
  require_all_ok(run_ranks(2, [&](Context& context) {
    Negotiator negotiator(borrowed(context), options());
    for (int round = 0; round < 50; ++round) {
      Submission call;
      call.values.assign(static_cast<size_t>(round + 1), static_cast<float>(round + context.rank()));
      submit_allreduce(negotiator, call, allreduce_of("", Matching::in_order, {round + 1}));
      // Small and alone: run before submit returned.
      expect(call.done.wait_for(std::chrono::seconds(0)) == std::future_status::ready,
             "a small call alone did not run on the submitting thread");
      expect_ok(call, "round " + std::to_string(round));
      for (float value : call.values) expect(value == static_cast<float>(2 * round + 1), "wrong sum");
    }
    // A large one runs on the negotiator's thread.
    Submission large;
    large.values.assign(size_t{1} << 20, 1.0f);
    submit_allreduce(negotiator, large, allreduce_of("", Matching::in_order, {1 << 20}));
    expect_ok(large, "the large call");
    expect(large.values.front() == 2.0f && large.values.back() == 2.0f, "wrong large sum");
  }));
}

TEST_CASE("ranks that disagree fail alike naming both ranks, and the job goes on", "[negotiation]") {
  struct Case {
    const char* what;
    std::function<void(Description&, int rank)> change;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"shape", [](Description& d, int rank) { d.tensors[0].dims = {rank == 0 ? 4 : 2, rank == 0 ? 1 : 2}; },
       "rank 0 passes a float32 tensor of shape [4, 1], rank 1 a float32 tensor of shape [2, 2]"},
      {"type", [](Description& d, int rank) { d.tensors[0].type = 1 + rank; },
       "rank 0 passes a float32 tensor of shape [4], rank 1 a type 2 tensor of shape [4]"},
      {"name in order", [](Description& d, int rank) { d.name = rank == 0 ? "a" : "b"; },
       "rank 0 calls it 'a' and rank 1 'b'"},
      {"kind", [](Description& d, int rank) { if (rank == 1) d.kind = Kind::broadcast; },
       "rank 0 calls allreduce, rank 1 calls broadcast"},
      {"root", [](Description& d, int rank) { d.kind = Kind::broadcast; d.root = rank; },
       "rank 0 names root rank 0, rank 1 root rank 1"},
      {"scale", [](Description& d, int rank) { d.postscale = rank == 0 ? 0.5f : 1.0f; },
       "rank 0 scales by (1, 0.5), rank 1 by (1, 1)"},
  };
  for (const Case& one : cases) {
    std::vector<std::string> messages(2);
    require_all_ok(run_ranks(2, [&](Context& context) {
      Negotiator negotiator(borrowed(context), options());
      Submission call;
      call.values.assign(4, 1.0f);
      Description description = allreduce_of("", Matching::in_order, {4});
      one.change(description, context.rank());
      submit_allreduce(negotiator, call, description);
      messages[static_cast<size_t>(context.rank())] = failure_of(call, "MismatchError");
      expect(call.values[0] == 1.0f, "a mismatched call moved data");
      // The Context goes on.
      Submission next;
      next.values.assign(4, 1.0f);
      submit_allreduce(negotiator, next, allreduce_of("", Matching::in_order, {4}));
      expect_ok(next, "the call after the mismatch");
      expect(next.values[0] == 2.0f, "the call after the mismatch summed wrong");
    }));
    INFO(one.what);
    for (const std::string& message : messages) {
      REQUIRE_THAT(message, Catch::Contains(one.message) && Catch::Contains("nothing was sent"));
    }
  }
}

TEST_CASE("a call one rank refuses fails on every rank with that rank's reason", "[negotiation]") {
  std::vector<std::string> messages(3);
  require_all_ok(run_ranks(3, [&](Context& context) {
    Negotiator negotiator(borrowed(context), options());
    Submission call;
    call.values.assign(4, 1.0f);
    Description description = allreduce_of("", Matching::in_order, {4});
    if (context.rank() == 2) description.refusal = "rank 2 passed splits that do not sum to its rows";
    submit_allreduce(negotiator, call, description);
    messages[static_cast<size_t>(context.rank())] = failure_of(call, "InvalidArgument");
    Submission next;
    next.values.assign(2, 1.0f);
    submit_allreduce(negotiator, next, allreduce_of("", Matching::in_order, {2}));
    expect_ok(next, "the call after the refusal");
  }));
  REQUIRE(messages[2] == "rank 2 passed splits that do not sum to its rows");
  REQUIRE_THAT(messages[0], Catch::Contains("rank 2 refused it: rank 2 passed splits"));
  REQUIRE_THAT(messages[1], Catch::Contains("rank 2 refused it: rank 2 passed splits"));
}

TEST_CASE("a call some ranks never submit is given up after the stall limit, naming them", "[negotiation]") {
  std::vector<std::string> messages(2);
  const auto started = std::chrono::steady_clock::now();
  require_all_ok(run_ranks(2, [&](Context& context) {
    Negotiator negotiator(borrowed(context), options(std::chrono::milliseconds(400)));
    Submission call;
    call.values.assign(4, 1.0f);
    submit_allreduce(negotiator, call, allreduce_of(context.rank() == 0 ? "x" : "y", Matching::by_name, {4}));
    messages[static_cast<size_t>(context.rank())] = failure_of(call, "TimeoutError");
    // Not a broken job: the next call runs.
    Submission next;
    next.values.assign(4, 1.0f);
    submit_allreduce(negotiator, next, allreduce_of("z", Matching::by_name, {4}));
    expect_ok(next, "the call after the stall");
  }));
  REQUIRE(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
  REQUIRE_THAT(messages[0], Catch::Contains("the call named 'x'") && Catch::Contains("rank 0 submitted it") &&
                                Catch::Contains("for rank 1, which did not") &&
                                Catch::Contains("rank 1 waits on allreduce the call named 'y'"));
  REQUIRE_THAT(messages[1], Catch::Contains("the call named 'y'") && Catch::Contains("for rank 0, which did not"));
}

TEST_CASE("announcements larger than a block arrive whole", "[negotiation]") {
  require_all_ok(run_ranks(2, [&](Context& context) {
    Negotiator negotiator(borrowed(context), options());
    std::vector<Submission> calls(40);
    // Submitted from a thread of its own so that they queue up and go out in one cycle.
    for (size_t which = 0; which < calls.size(); ++which) {
      calls[which].values.assign(3, static_cast<float>(which));
    }
    std::vector<size_t> order(calls.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = context.rank() == 0 ? i : order.size() - 1 - i;
    for (size_t which : order) {
      submit_allreduce(negotiator, calls[which],
                       allreduce_of(std::string(100, 'n') + std::to_string(which), Matching::by_name, {3}));
    }
    for (size_t which = 0; which < calls.size(); ++which) {
      expect_ok(calls[which], "call " + std::to_string(which));
      expect(calls[which].values[0] == static_cast<float>(2 * which), "wrong sum for call " + std::to_string(which));
    }
  }));
}

TEST_CASE("a negotiator shut down with calls waiting finishes them, within the context's timeout",
          "[negotiation]") {
  std::vector<std::string> messages(2);
  const auto started = std::chrono::steady_clock::now();
  run_ranks(
      2,
      [&](Context& context) {
        Submission call;
        call.values.assign(4, 1.0f);
        {
          Negotiator negotiator(borrowed(context), options(std::chrono::milliseconds(60000)));
          // Each rank's call waits for the other rank, which never submits it.
          submit_allreduce(negotiator, call, allreduce_of(context.rank() == 0 ? "a" : "b", Matching::by_name, {4}));
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        // A rank whose peer stopped while it was inside a cycle learns it when
        // the cycle times out, or (over tcp) when the peer's context closes
        // under it; one that stopped between cycles says so.
        const Outcome outcome = call.done.get();
        std::string& message = messages[static_cast<size_t>(context.rank())];
        if (outcome.type.empty()) {
          message = "no failure";
        } else if (outcome.type == "Aborted" || outcome.type == "TimeoutError" || outcome.type == "PeerLostError") {
          message = outcome.message;
        } else {
          message = "unexpected " + outcome.type + ": " + outcome.message;
        }
      },
      std::chrono::milliseconds(1500));
  REQUIRE(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
  for (const std::string& message : messages) {
    REQUIRE_THAT(message, Catch::Contains("shut down") || Catch::Contains("timed out") || Catch::Contains("timeout") ||
                              (Catch::Contains("peer rank") && Catch::Contains("closed its context")));
  }
}

TEST_CASE("records survive their wire form, and bytes that are not records are refused", "[negotiation]") {
  Record record;
  record.key = {Matching::by_name, "grad_3", 7};
  record.description = allreduce_of("grad_3", Matching::by_name, {17, 0, -1});
  record.description.tensors.push_back({9, {}});
  record.description.kind = Kind::grouped_allreduce;
  record.description.op = 4;
  record.description.root = 2;
  record.description.prescale = 0.25f;
  record.description.postscale = 3.0f;
  record.description.refusal = "bad";
  record.description.counts = {3, 0, -2};
  Record abandon;
  abandon.key = {Matching::in_order, "", 12};
  abandon.abandon = true;
  std::vector<std::byte> bytes;
  encode_record(record, bytes);
  encode_record(abandon, bytes);
  auto decoded = decode_records(bytes);
  REQUIRE(decoded.has_value());
  REQUIRE(decoded->size() == 2);
  const Record& got = (*decoded)[0];
  REQUIRE(got.key == record.key);
  REQUIRE(!got.abandon);
  REQUIRE(got.description.kind == Kind::grouped_allreduce);
  REQUIRE(got.description.tensors == record.description.tensors);
  REQUIRE(got.description.op == 4);
  REQUIRE(got.description.root == 2);
  REQUIRE(got.description.prescale == 0.25f);
  REQUIRE(got.description.postscale == 3.0f);
  REQUIRE(got.description.refusal == "bad");
  REQUIRE(got.description.counts == record.description.counts);
  REQUIRE((*decoded)[1].abandon);
  REQUIRE((*decoded)[1].key == abandon.key);
  // Every cut of a valid block, and random bytes, either parse or are refused: never a crash.
  for (size_t cut = 1; cut < bytes.size(); ++cut) {
    (void)decode_records(std::span(bytes).first(cut));
  }
  std::mt19937 random(5);
  for (int attempt = 0; attempt < 2000; ++attempt) {
    std::vector<std::byte> noise(random() % 200);
    for (std::byte& b : noise) b = static_cast<std::byte>(random());
    (void)decode_records(noise);
  }
  REQUIRE(!decode_records(std::vector<std::byte>{std::byte{0xff}, std::byte{1}}).has_value());
}
