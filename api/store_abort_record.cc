// The abort record in the store: best effort both ways, and bounded in time,
// since it serves a job that is already failing: its store may be gone with
// a rank, or cut off by the same network fault, and a store call blocked
// on it must not hold up the abort (a rank cut off from the store host
// would otherwise report its own timeout seconds late).
#include "api/store_abort_record.h"

#include <future>
#include <thread>

#include "base/error.h"
#include "base/log.h"

namespace chorus::detail {
namespace {

// How long posting a report may hold up this rank's abort.
constexpr std::chrono::milliseconds kPostLimit{200};

// Runs `work` on a thread of its own and waits up to `limit` for it. Past
// that the thread is left to finish (or fail) alone: it holds everything
// it uses, and nullopt is returned.
template <typename Work>
auto within(std::chrono::milliseconds limit, Work work) -> std::optional<decltype(work())> {
  using Result = decltype(work());
  auto task = std::make_shared<std::packaged_task<Result()>>(std::move(work));
  std::future<Result> result = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (result.wait_for(limit) != std::future_status::ready) return std::nullopt;
  return result.get();
}

}  // namespace

StoreAbortRecord::StoreAbortRecord(std::shared_ptr<Store> store, uint32_t generation, int rank)
    : store_(std::move(store)), generation_(generation), rank_(rank) {}

void StoreAbortRecord::post(int rank, const transport::AbortReport& report) {
  try {
    const bool posted = within(kPostLimit, [store = store_, key = cat("abort/", generation_, "/", rank),
                                            bytes = transport::encode_abort_report(report)] {
                          store->set(key, bytes);
                          return true;
                        }).has_value();
    if (!posted) CHORUS_LOG(debug, rank_, "the store took too long to take this rank's abort report");
  } catch (const std::exception& error) {
    CHORUS_LOG(debug, rank_, "cannot leave this rank's abort report in the store: ", error.what());
  }
}

std::optional<transport::AbortReport> StoreAbortRecord::find(int rank, std::chrono::milliseconds wait) {
  try {
    // The store's own wait, and a little more for the round trip.
    std::optional<std::vector<std::byte>> bytes =
        within(wait + std::chrono::milliseconds(100),
               [store = store_, key = cat("abort/", generation_, "/", rank), wait] { return store->get(key, wait); });
    if (!bytes) return std::nullopt;
    return transport::decode_abort_report(*bytes);
  } catch (const std::exception& error) {
    CHORUS_LOG(debug, rank_, "no abort report of rank ", rank, " in the store: ", error.what());
    return std::nullopt;
  }
}

}  // namespace chorus::detail
