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
//
// Before its first round a rank joins (join/...), which catches the setup
// mistakes that would otherwise cost a whole timeout and then blame
// something else: two processes given one rank (each rank claims its number
// with an add; the second claimant sees 2) and ranks given different job
// sizes (each compares its size with rank 0's). The rank that finds the
// mistake writes it to "join/error"; every rank waiting in this bootstrap
// looks at that key between slices of its wait, so the whole job fails at
// once with the same message.
#include "rendezvous/bootstrap.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "rendezvous/store_common.h"

namespace chorus {
namespace {

// How often a waiting rank looks whether another rank has failed the job.
constexpr std::chrono::milliseconds kErrorPollInterval{200};
const std::string kErrorKey = "join/error";

std::vector<std::byte> bytes_of(std::string_view text) {
  const auto* data = reinterpret_cast<const std::byte*>(text.data());
  return {data, data + text.size()};
}

std::string text_of(const std::vector<std::byte>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// "pid 4242 on node7": how one process of a job tells itself from another.
std::string this_process() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "an unknown host");
  return cat("pid ", ::getpid(), " on ", host);
}

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

[[noreturn]] void StoreBootstrap::fail_job(const std::string& why) {
  store_->set(kErrorKey, bytes_of(why));
  throw InvalidArgument(why);
}

void StoreBootstrap::throw_if_job_failed() {
  std::vector<std::byte> why;
  try {
    why = store_->get(kErrorKey, std::chrono::milliseconds(0));
  } catch (const TimeoutError&) {
    return;
  } catch (const IoError&) {
    // A peek with no time to spare: a store that needs a new connection
    // cannot greet within 0 ms when hundreds of ranks meet at once (256
    // local ranks did). Nothing is known then; the wait this look sits
    // between has the real timeout and reports a store that is truly gone.
    return;
  }
  throw InvalidArgument(cat("rank ", rank_, ": the job cannot start: ", text_of(why)));
}

std::vector<std::vector<std::byte>> StoreBootstrap::get_many_watching(const std::vector<std::string>& keys,
                                                                     std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    try {
      return store_->get_many(keys, std::clamp(left, std::chrono::milliseconds(0), kErrorPollInterval));
    } catch (const TimeoutError&) {
      throw_if_job_failed();
      if (left <= kErrorPollInterval) throw;
    }
  }
}

void StoreBootstrap::join() {
  const std::string me = this_process();
  const std::string who_key = cat("join/who/", rank_);
  if (store_->add(cat("join/claims/", rank_), 1) > 1) {
    std::string first = "another process";
    try {
      first = text_of(get_many_watching({who_key}, std::chrono::milliseconds(1000))[0]);
    } catch (const TimeoutError&) {
    }
    if (first == me) {
      // One process joining again (a second Context, or connecting after a
      // close): the store still holds its first join.
      fail_job(cat("rank ", rank_, " joined this store and job id twice from one process (", me,
                   "): a process that connects again needs a job id (or store prefix) of its own"));
    }
    // Every seat taken: the job can run without this process, which is one
    // too many (a launcher that started more processes than the job has
    // ranks, or a rank restarted while the first still runs). It leaves
    // alone and writes no failure into the store: a running job is not
    // for a stray process to stop, and the ranks read that failure again
    // whenever they use the store (a split, a shrink).
    std::vector<std::string> seats;
    for (int rank = 0; rank < size_; ++rank) seats.push_back(cat("join/who/", rank));
    if (ranks_missing(*store_, seats).empty())
      throw InvalidArgument(cat("rank ", rank_, " of this job is already ", first, ", and every rank of the job has "
                                "joined: this process (", me, ") is one too many and leaves; the job goes on "
                                "without it (did the launcher start more processes than CHORUS_SIZE, or restart a "
                                "rank whose first process still runs?)"));
    fail_job(cat("rank ", rank_, " was given to two processes: ", first, " and ", me,
                 " (each process of a job needs its own rank: check the launcher's rank variable, CHORUS_RANK or "
                 "RANK, and that two jobs do not share a store and job id)"));
  }
  store_->set(who_key, bytes_of(me));
  if (rank_ == 0) {
    store_->set("join/size", bytes_of(std::to_string(size_)));
    return;
  }
  std::vector<std::vector<std::byte>> size_of_rank0;
  try {
    size_of_rank0 = get_many_watching({"join/size"}, timeout_);
  } catch (const TimeoutError&) {
    throw TimeoutError(cat("rank ", rank_, ": timed out after ", timeout_.count(),
                           " ms waiting for rank 0 to join (is rank 0 running, and at the same store with the same "
                           "job id?)"));
  }
  const std::string theirs = text_of(size_of_rank0[0]);
  if (theirs != std::to_string(size_))
    fail_job(cat("rank ", rank_, " (", me, ") was started for a job of ", size_, " ranks, but rank 0 for a job of ",
                 theirs, " (the ranks' size variables disagree: CHORUS_SIZE, WORLD_SIZE, or the launcher's -n)"));
}

std::vector<std::vector<std::byte>> StoreBootstrap::allgather(std::span<const std::byte> mine) {
  uint64_t round = round_++;
  std::string base = cat("allgather/", round, "/");
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) keys.push_back(base + std::to_string(r));
  std::string my_key = keys[static_cast<size_t>(rank_)];
  try {
    if (round == 0) join();
    store_->set(my_key, mine);
    std::vector<std::vector<std::byte>> blobs;
    try {
      blobs = get_many_watching(keys, timeout_);
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
    if (round == 0) join();
    // Arrival is recorded before counting, so anyone counted can be named.
    store_->set(arrived_key, {});
    if (store_->add(base, 1) == size_) {
      store_->set(done_key, {});
      written.push_back(base);
      written.push_back(done_key);
    }
    try {
      get_many_watching({done_key}, timeout_);
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
