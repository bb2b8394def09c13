// The abort record in the store: best effort both ways, and bounded in time,
// since it serves a job that is already failing: its store may be gone with
// a rank, or cut off by the same network fault, and a store call blocked
// on it must not hold up the abort (a rank cut off from the store host
// would otherwise report its own timeout seconds late).
#include "api/store_abort_record.h"

#include <charconv>
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

StoreSuspectRecord::StoreSuspectRecord(std::shared_ptr<Store> store, uint32_t generation)
    : store_(std::move(store)), generation_(generation) {}

void StoreSuspectRecord::post(int rank, const std::vector<int>& suspects) {
  try {
    const bool posted = within(kPostLimit, [store = store_, generation = generation_,
                                            bytes = encode_suspect_report(rank, suspects)] {
                          const int64_t number = store->add(suspect_count_key(generation), 1);
                          store->set(suspect_report_key(generation, number), bytes);
                          return true;
                        }).has_value();
    if (!posted) CHORUS_LOG(debug, rank, "the store took too long to take this rank's suspects");
  } catch (const std::exception& error) {
    CHORUS_LOG(debug, rank, "cannot leave this rank's suspects in the store: ", error.what());
  }
}

std::string suspect_count_key(uint32_t generation) { return cat("suspects/", generation, "/count"); }

std::string suspect_report_key(uint32_t generation, int64_t number) { return cat("suspects/", generation, "/", number); }

std::vector<std::byte> encode_suspect_report(int rank, const std::vector<int>& suspects) {
  std::string text = cat(rank, ":");
  for (size_t i = 0; i < suspects.size(); ++i) text += cat(i == 0 ? "" : ",", suspects[i]);
  const auto* begin = reinterpret_cast<const std::byte*>(text.data());
  return std::vector<std::byte>(begin, begin + text.size());
}

std::optional<std::pair<int, std::vector<int>>> decode_suspect_report(std::span<const std::byte> bytes, int size) {
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  auto in_job = [size](std::string_view digits) -> std::optional<int> {
    int value = -1;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || value < 0 || value >= size)
      return std::nullopt;
    return value;
  };
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::optional<int> rank = in_job(text.substr(0, colon));
  if (!rank) return std::nullopt;
  std::vector<int> suspects;
  std::string_view rest = text.substr(colon + 1);
  while (!rest.empty()) {
    const size_t comma = std::min(rest.find(','), rest.size());
    const std::optional<int> suspect = in_job(rest.substr(0, comma));
    if (!suspect) return std::nullopt;
    suspects.push_back(*suspect);
    rest = comma < rest.size() ? rest.substr(comma + 1) : std::string_view();
  }
  return std::make_pair(*rank, std::move(suspects));
}

}  // namespace chorus::detail
