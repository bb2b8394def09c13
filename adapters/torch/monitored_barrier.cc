// monitored_barrier: a barrier that names the ranks that did not come.
//
// Rank 0 waits for one message from every other rank, all within one
// deadline; a rank whose message does not arrive is named ("Rank 2 failed to
// pass monitoredBarrier in 2000 ms"), or with wait_all_ranks every such rank.
// Only when all arrived does rank 0 release them with a message each. The
// other ranks send, then wait for that release: when it fails, they say that
// they arrived and that rank 0 did not answer, which tells a user reading any
// rank's log which side is stuck. The words are torch's (gloo's), since
// torch's tests and users' log scrapers match them.
//
// Its messages are point-to-point messages on tags at and above 2^31, which
// torch's own send/recv tags (non-negative ints) never reach, numbered per
// barrier so that a late message of one barrier never satisfies the next.
#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include "adapters/torch/process_group.h"
#include "base/error.h"
#include "base/log.h"
#include "chorus/point_to_point.h"

namespace chorus::torch_backend {

namespace {

constexpr uint32_t monitored_barrier_tags = 0x80000000u;

std::string first_line_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace

void ChorusProcessGroup::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  const int rank = getRank();
  const int size = getSize();
  const std::chrono::milliseconds timeout = opts.timeout.count() > 0 ? opts.timeout : timeout_;
  const uint32_t tag = monitored_barrier_tags | (monitored_barriers_++ & 0x7fffffffu);
  if (size == 1) return;
  CollectiveOptions call;
  call.timeout = timeout;
  unsigned char token = 1;
  if (rank != 0) {
    try {
      chorus::send(*context_, &token, 1, DataType::uint8, 0, tag, call);
      chorus::recv(*context_, &token, 1, DataType::uint8, 0, tag, call);
    } catch (...) {
      throw Error(cat("Rank ", rank, " successfully reached monitoredBarrier, but received errors while waiting for ",
                      "send/recv from rank 0. Please check rank 0 logs for faulty rank. (chorus: ",
                      first_line_of(std::current_exception()), ")"));
    }
    return;
  }
  if (opts.timeout.count() == 0) {
    // torch passes a zero timeout through as such: nothing can arrive in it.
    throw TimeoutError(cat("Rank 0 timed out in monitoredBarrier after 0 ms (a timeout of 0 ms was given)"));
  }
  // Every arrival is awaited at once, so one slow rank does not eat the
  // time of the ranks after it.
  std::vector<unsigned char> arrivals(static_cast<size_t>(size));
  std::vector<Work> works;
  for (int peer = 1; peer < size; ++peer) {
    works.push_back(recv_async(*context_, &arrivals[static_cast<size_t>(peer)], 1, DataType::uint8, peer, tag, call));
  }
  std::vector<int> missing;
  std::string cause;
  for (int peer = 1; peer < size; ++peer) {
    try {
      works[static_cast<size_t>(peer - 1)].wait();
    } catch (...) {
      missing.push_back(peer);
      if (cause.empty()) cause = first_line_of(std::current_exception());
    }
  }
  if (!missing.empty()) {
    // Once a wait timed out chorus finished the group, so ranks that came
    // after it also count as missing; the first in rank order is the one
    // that did not come in time.
    if (!wait_all_ranks) {
      throw TimeoutError(cat("Rank ", missing.front(), " failed to pass monitoredBarrier in ", timeout.count(),
                             " ms (chorus: ", cause, ")"));
    }
    std::string ranks;
    for (int peer : missing) ranks += cat(ranks.empty() ? "" : ", ", peer);
    throw TimeoutError(cat(missing.size() == 1 ? "Rank " : "Ranks ", ranks, " failed to pass monitoredBarrier in ",
                           timeout.count(), " ms (chorus: ", cause, ")"));
  }
  for (int peer = 1; peer < size; ++peer) chorus::send(*context_, &token, 1, DataType::uint8, peer, tag, call);
}

}  // namespace chorus::torch_backend
