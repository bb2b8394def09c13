// What a Context holds, hidden from the public header: the Communicator the
// algorithm layer runs on, the collective numbering, the queue of async
// collectives and whatever must live as long as the Context. The API layer
// reaches it through ContextAccess. Internal (not installed).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "algorithms/execution/communicator.h"
#include "algorithms/execution/late_root_checks.h"
#include "algorithms/run.h"
#include "algorithms/shared_memory/board.h"
#include "api/work_queue.h"
#include "base/config.h"
#include "chorus/collective_options.h"
#include "chorus/connect.h"
#include "chorus/context.h"
#include "rendezvous/bootstrap.h"
#include "rendezvous/store.h"

namespace chorus::detail {

struct ContextState {
  ContextState(algorithms::Communicator communicator, std::chrono::milliseconds timeout)
      : communicator(std::move(communicator)), timeout(timeout) {
    // The application's Contexts (not the helper groups of one call) get a board.
    algorithms::enable_board(this->communicator);
    // ... and let their rooted calls' senders go on without waiting for
    // their root checks (algorithms/execution/deferred_root_checks.h).
    this->communicator.enable_deferred_root_checks();
    // ... and check most rooted calls with no message of their own
    // (algorithms/execution/late_root_checks.h).
    this->communicator.enable_late_root_checks();
  }

  // Numbers collectives in issue order; equal on every rank for the same call.
  uint32_t next_sequence() { return sequence++; }
  // Sets the root that the last covered rooted call named into `call` (a
  // collective, issued as number `sequence`), and notes what it carries
  // (algorithms/execution/late_root_checks.h): a rooted call a later call
  // did not carry is checked as the Context ends. `compares`: the call runs
  // on chorus's own algorithms, whose frames and board slots compare
  // signatures (a backend's, NCCL's, do not).
  void chain(algorithms::Call& call, uint32_t sequence, bool compares) {
    if (communicator.size() > algorithms::kMaxChainedRanks) return;
    call.previous_root = chain_root;
    if (algorithms::LateRootChecks::covers(communicator, call)) {
      chain_root = call.root;
      chain_carried = false;
      chained_sequence = sequence;
    } else if (compares && call.collective != algorithms::Collective::reduce) {
      chain_carried = true;
    }
  }
  // The message group of this Context's next Window (chorus/window.h):
  // windows are created collectively, so every rank numbers them alike, and
  // a hash keeps their traffic apart from every Context's collectives.
  uint64_t next_window_group() {
    const uint64_t number = ++windows;
    uint64_t mixed = communicator.group() ^ (0x9E3779B97F4A7C15ull * (number + 0x57494E44ull));
    mixed ^= mixed >> 31;
    return mixed * 0xBF58476D1CE4E5B9ull | 1;
  }
  WorkQueue& work_queue();
  // Whether no async collective is queued or running: true before the
  // queue exists (a job that never calls one never starts its thread).
  bool queue_idle() const {
    const WorkQueue* queue = work_queue_ready_.load(std::memory_order_acquire);
    return !queue || queue->idle();
  }

  // Members are destroyed bottom up: the work queue (finishing queued
  // collectives) first, the objects kept alive (rank 0's embedded store
  // server) last.
  std::vector<std::shared_ptr<void>> kept_alive;
  algorithms::Communicator communicator;
  std::chrono::milliseconds timeout;
  // Settles the root checks the last calls left, once the work queue below
  // has finished (members go bottom up).
  struct SettleRootChecksAtEnd {
    ContextState& state;
    ~SettleRootChecksAtEnd();
  } settle_root_checks_at_end{*this};
  uint32_t sequence = 0;
  uint64_t windows = 0;
  // The chain (chain() above): the last covered call's root and number, and
  // whether a later call carried it.
  int chain_root = -1;
  uint32_t chained_sequence = 0;
  bool chain_carried = true;
  // The last few blocking calls of fixed counts on host memory, as issued
  // (their Calls complete) with their choices (api/issue.cc): a training
  // loop repeats a few shapes, and a call of one of them runs again from
  // here, neither building its Call nor looking up its choice. Only the one
  // thread that issues on this Context touches them (docs/c_api.md,
  // "Threads"), and only while no async call runs.
  struct RepeatedCall {
    algorithms::Call call;
    std::string algorithm;
    algorithms::HeldChoice choice;  // null: an empty record
  };
  static constexpr size_t kRepeatedCalls = 4;
  std::array<RepeatedCall, kRepeatedCalls> repeated_calls;
  size_t next_repeated_call = 0;  // the record the next new shape replaces
  // The member a receive from any peer looks at first (api/recv_any.cc):
  // one after the last one it took from, so a chatty peer cannot starve the rest.
  std::atomic<int> next_any_source{0};
  // How a Context made by connect was made, for shrink (chorus/shrink.h): the
  // job's store (null over MPI), the options and configuration, and which
  // generation of the job it is (0 first, then one more per shrink). Unset
  // on Contexts made by split.
  struct Origin {
    std::shared_ptr<Store> store;
    ConnectOptions options;
    Config config;
    uint32_t generation = 0;
  };
  std::optional<Origin> origin;
  std::once_flag work_queue_once;
  std::unique_ptr<WorkQueue> work_queue_;
  std::atomic<const WorkQueue*> work_queue_ready_{nullptr};
};

struct ContextAccess {
  static std::shared_ptr<Context> make(std::unique_ptr<ContextState> state) {
    return std::shared_ptr<Context>(new Context(std::move(state)));
  }
  static ContextState& state(const Context& context) { return *context.state_; }
};

// The Context's default timeout: the options', else CHORUS_TIMEOUT's, else 30 s.
std::chrono::milliseconds timeout_of(const ConnectOptions& options, const Config& config);

// connect() once the configuration is read; shrink connects the survivors with it.
std::shared_ptr<Context> connect_with(Bootstrap& bootstrap, const ConnectOptions& options, const Config& config,
                                      uint32_t generation);

inline ContextState& state_of(const Context& context) { return ContextAccess::state(context); }

// How long one collective or message may take: its options' timeout, else the Context's.
inline std::chrono::milliseconds operation_timeout(const Context& context, const CollectiveOptions& options) {
  return options.timeout.value_or(context.timeout());
}

inline const algorithms::Communicator& communicator_of(const Context& context) {
  return ContextAccess::state(context).communicator;
}

}  // namespace chorus::detail
