// Runs one function per rank, each on its own thread with its own Context,
// connected through an in-process HashStore over the transports connect()
// picks (shared memory between threads of one process, unless configured).
//
// Catch2 2.x is not thread-safe. A body may use REQUIRE/CHECK (a passing one
// only bumps counters), but never INFO or CAPTURE: their messages live in one
// vector per test run, which every other thread's REQUIRE_THROWS_AS, FAIL or
// failed assertion copies and clears, so a scoped message popped on one rank's
// thread frees what another rank's thread is reading (a heap-use-after-free that
// ASan caught in test_recv_any). Say what failed in the assertion itself
// (REQUIRE_THAT(text, Catch::Contains(...)) prints the text), or after join.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "rendezvous/hash_store.h"

namespace chorus::testing {

struct RankOutcome {
  std::exception_ptr error;
};

// `configure` may adjust each rank's ConnectOptions (a fake host per rank).
inline std::vector<RankOutcome> run_ranks(int size, const std::function<void(Context&)>& body,
                                          std::chrono::milliseconds timeout = std::chrono::milliseconds(20000),
                                          const std::function<void(int rank, ConnectOptions&)>& configure = {}) {
  auto store = std::make_shared<HashStore>();
  std::vector<RankOutcome> outcomes(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        StoreBootstrap bootstrap(store, rank, size, timeout);
        ConnectOptions options;
        options.timeout = timeout;
        options.hostname = "127.0.0.1";
        if (configure) configure(rank, options);
        std::shared_ptr<Context> context = connect(bootstrap, options);
        body(*context);
      } catch (...) {
        outcomes[static_cast<size_t>(rank)].error = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return outcomes;
}

// What each rank's error says, and its class ("" where it had none).
struct Verdicts {
  std::vector<std::string> classes;
  std::vector<std::string> texts;
};

inline Verdicts verdicts_of(const std::vector<RankOutcome>& outcomes) {
  Verdicts verdicts;
  for (const auto& outcome : outcomes) {
    std::string error_class, text;
    if (outcome.error) {
      try {
        std::rethrow_exception(outcome.error);
      } catch (const MismatchError& error) {
        error_class = "MismatchError", text = error.what();
      } catch (const TimeoutError& error) {
        error_class = "TimeoutError", text = error.what();
      } catch (const Error& error) {
        error_class = "Error", text = error.what();
      }
    }
    verdicts.classes.push_back(error_class);
    verdicts.texts.push_back(text);
  }
  return verdicts;
}

// Rethrows the first rank's error, so Catch2 shows its message.
inline void require_all_ok(const std::vector<RankOutcome>& outcomes) {
  for (const auto& outcome : outcomes) {
    if (outcome.error) std::rethrow_exception(outcome.error);
  }
}

}  // namespace chorus::testing
