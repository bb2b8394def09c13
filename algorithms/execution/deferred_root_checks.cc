// The root checks left to settle after their call (deferred_root_checks.h).
#include "algorithms/execution/deferred_root_checks.h"

#include <exception>
#include <string>

#include "algorithms/execution/communicator.h"
#include "algorithms/execution/root_check.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

struct DeferredRootChecks::Entry {
  transport::Tag tag;
  std::string name;  // "broadcast", "gatherv": the call's, for the verdict
  int rank = 0;
  int left = 0;
  int root = 0;
  uint32_t sequence = 0;
  bool claimed = false;  // its receive is posted into `theirs`
  std::array<std::byte, 4> theirs{};
  transport::Request request;
};

DeferredRootChecks::DeferredRootChecks() : entries_(std::make_unique<Entry[]>(kCapacity)) {
  for (size_t i = 0; i < kCapacity; ++i) entries_[i].request.attach(&signal_);
}

// A claimed receive is of a message already here (announced at least): the
// Mesh's abort, which the Context's end or a failure brings first, finishes
// it before the entries go.
DeferredRootChecks::~DeferredRootChecks() = default;

void DeferredRootChecks::defer(const Communicator& communicator, const Call& call, transport::Tag tag,
                               uint32_t sequence) {
  std::lock_guard lock(mutex_);
  const size_t waiting = waiting_.load(std::memory_order_relaxed);
  if (waiting >= kCapacity) throw Error("internal: a deferred root check beyond the capacity");
  Entry& entry = entries_[(oldest_ + waiting) % kCapacity];
  entry.tag = tag;
  entry.name = RootCheck::name_of(call);
  entry.rank = call.rank;
  entry.left = RootCheck::left(call);
  entry.root = call.root;
  entry.sequence = sequence;
  entry.claimed = false;
  waiting_.store(waiting + 1, std::memory_order_release);
  settle_arrived(communicator);
}

// Oldest first, and only in order: every check of this Context comes from
// the same left neighbour over the same pair, which delivers in order, so
// when the oldest has not arrived neither has any later one.
void DeferredRootChecks::settle_arrived(const Communicator& communicator) {
  size_t waiting = waiting_.load(std::memory_order_relaxed);
  while (waiting > 0) {
    Entry& entry = entries_[oldest_];
    if (!entry.claimed) {
      entry.claimed = communicator.pair(entry.left).post_recv_if_arrived(entry.request, entry.tag, entry.theirs,
                                                                          Memory::host());
      if (!entry.claimed) return;
    }
    const transport::Request::State state = entry.request.state();
    if (state == transport::Request::State::failed) fail(communicator, entry.request.error());
    if (state != transport::Request::State::done) return;
    try {
      RootCheck::verify_bytes(entry.name, entry.rank, entry.left, entry.root, entry.theirs, entry.sequence);
    } catch (...) {
      fail(communicator, std::current_exception());
    }
    entry.claimed = false;
    oldest_ = (oldest_ + 1) % kCapacity;
    waiting_.store(--waiting, std::memory_order_release);
  }
}

void DeferredRootChecks::settle(const Communicator& communicator, Deadline deadline, Wait wait) {
  std::unique_lock lock(mutex_);
  settle_arrived(communicator);
  const auto satisfied = [&] {
    const size_t waiting = waiting_.load(std::memory_order_relaxed);
    return wait == Wait::none || waiting == 0 || (wait == Wait::make_room && waiting < kCapacity);
  };
  if (satisfied()) return;
  transport::Mesh& mesh = communicator.mesh();
  // The transports read on their own threads while we sleep (shm only while
  // someone waits).
  transport::WaitingScope waiting_scope(mesh);
  while (!satisfied()) {
    if (mesh.failed()) std::rethrow_exception(mesh.failure());
    const uint64_t arrivals = mesh.arrivals().count();
    const uint64_t completions = signal_.count();
    settle_arrived(communicator);
    if (satisfied()) return;
    if (deadline.expired()) {
      const Entry& oldest = entries_[oldest_];
      fail(communicator,
           std::make_exception_ptr(TimeoutError(cat(
               "rank ", oldest.rank, ": ", oldest.name, " #", oldest.sequence, ": timed out waiting for the root ",
               "check's message from rank ", oldest.left, " (4 bytes; this rank only sent in that call and ",
               "went on)"))));
    }
    // An arrival or a claimed receive's completion wakes us; a short slice
    // covers the one that lands between the look and the sleep.
    const Deadline slice(std::min(deadline.at(), Clock::now() + std::chrono::milliseconds(1)));
    if (entries_[oldest_].claimed) {
      signal_.wait_change(completions, slice);
    } else {
      mesh.arrivals().wait_change(arrivals, slice);
    }
  }
}

void DeferredRootChecks::fail(const Communicator& communicator, std::exception_ptr error) {
  communicator.mesh().abort(error);
  std::rethrow_exception(error);
}

}  // namespace chorus::algorithms
