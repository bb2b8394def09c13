// StoreBootstrap: allgather and barrier over any Store.
//
// allgather round n: rank r sets "allgather/<n>/<r>", then reads every rank's
// key with one get_many (one round trip on a TcpStore).
// barrier round n: rank r sets "barrier/<n>/<r>" (so a timeout can say who is
// missing), adds 1 to "barrier/<n>"; the rank whose add reaches size sets
// "barrier/<n>/done", which everyone waits for. O(1) keys per rank either way.
//
// Rounds share one counter, so every rank must call allgather/barrier in the
// same order. Finishing round n proves every rank has finished round n - 1
// (each has written its round-n key), so each rank then removes the keys it
// wrote in round n - 1: a long job does not grow the store.
#include "rendezvous/bootstrap.h"

#include "base/error.h"
#include "base/log.h"
#include "rendezvous/store_common.h"

namespace chorus {
namespace {

std::string join_ranks(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

}  // namespace

StoreBootstrap::StoreBootstrap(std::shared_ptr<Store> store, int rank, int size, std::chrono::milliseconds timeout)
    : store_(std::move(store)), rank_(rank), size_(size), timeout_(timeout) {
  if (size < 1) throw InvalidArgument(cat("StoreBootstrap: size must be at least 1 (got ", size, ")"));
  if (rank < 0 || rank >= size) throw InvalidArgument(cat("rank ", rank, " out of range for size ", size));
  if (!store_) throw InvalidArgument(cat("rank ", rank, ": StoreBootstrap needs a store (got null)"));
  if (timeout.count() <= 0) throw InvalidArgument(cat("rank ", rank, ": StoreBootstrap timeout must be positive (got ", timeout.count(), " ms)"));
}

namespace {

// Which of `keys` (one per rank) do not exist yet. Asked key by key with a
// zero timeout ("look once"): slow for thousands of ranks, but only ever run
// after a timeout, to name the culprits.
std::vector<int> ranks_missing(Store& store, const std::vector<std::string>& keys) {
  std::vector<int> missing;
  for (size_t r = 0; r < keys.size(); ++r) {
    try {
      store.wait({keys[r]}, std::chrono::milliseconds(0));
    } catch (const TimeoutError&) {
      missing.push_back(static_cast<int>(r));
    }
  }
  return missing;
}

}  // namespace

std::vector<std::vector<std::byte>> StoreBootstrap::allgather(std::span<const std::byte> mine) {
  uint64_t round = round_++;
  std::string base = cat("allgather/", round, "/");
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) keys.push_back(base + std::to_string(r));
  std::string my_key = keys[static_cast<size_t>(rank_)];
  try {
    store_->set(my_key, mine);
    std::vector<std::vector<std::byte>> blobs;
    try {
      blobs = store_->get_many(keys, timeout_);
    } catch (const TimeoutError&) {
      std::vector<int> missing = ranks_missing(*store_, keys);
      if (missing.empty()) {
        blobs = store_->get_many(keys, std::chrono::milliseconds(0));  // everyone arrived just at the deadline
      } else {
        throw TimeoutError(cat("rank ", rank_, ": timed out after ", timeout_.count(), " ms waiting for ",
                               missing.size() == 1 ? "rank " : "ranks ", join_ranks(missing),
                               " to join allgather round ", round));
      }
    }
    finish_round({my_key});
    return blobs;
  } catch (const IoError& error) {
    throw IoError(cat("rank ", rank_, ": allgather round ", round, ": ", error.what()), error.peer_rank());
  }
}

void StoreBootstrap::barrier() {
  uint64_t round = round_++;
  std::string base = cat("barrier/", round);
  std::string arrived_key = cat(base, "/", rank_);
  std::string done_key = base + "/done";
  std::vector<std::string> written{arrived_key};
  try {
    // Arrival is recorded before counting, so anyone counted can be named.
    store_->set(arrived_key, {});
    if (store_->add(base, 1) == size_) {
      store_->set(done_key, {});
      written.push_back(base);
      written.push_back(done_key);
    }
    try {
      store_->wait({done_key}, timeout_);
    } catch (const TimeoutError&) {
      std::vector<std::string> keys;
      for (int r = 0; r < size_; ++r) keys.push_back(cat(base, "/", r));
      std::vector<int> missing = ranks_missing(*store_, keys);
      if (missing.empty()) {
        throw TimeoutError(cat("rank ", rank_, ": timed out after ", timeout_.count(), " ms waiting for barrier round ",
                               round, " to be released (every rank arrived, but the last one never set ", done_key, ")"));
      }
      throw TimeoutError(cat("rank ", rank_, ": timed out after ", timeout_.count(), " ms waiting for ",
                             missing.size() == 1 ? "rank " : "ranks ", join_ranks(missing),
                             " to join barrier round ", round));
    }
    finish_round(std::move(written));
  } catch (const IoError& error) {
    throw IoError(cat("rank ", rank_, ": barrier round ", round, ": ", error.what()), error.peer_rank());
  }
}

void StoreBootstrap::finish_round(std::vector<std::string> written) {
  for (const auto& key : previous_round_keys_) store_->remove(key);
  previous_round_keys_ = std::move(written);
}

}  // namespace chorus
