#include "adapters/negotiation/negotiator.h"

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "base/little_endian.h"
#include "base/log.h"
#include "chorus/collectives.h"

namespace chorus::negotiation {
namespace {

// Every rank's block in a cycle's allgather. One ordinary announcement
// (a name, a shape) is well under 200 bytes; more than fits goes in a
// second allgatherv.
constexpr size_t kBlockBytes = 1024;
// Block header: magic, the length of the whole announcement, the cycle number.
constexpr size_t kHeaderBytes = 16;
constexpr size_t kPayloadBytes = kBlockBytes - kHeaderBytes;
constexpr uint32_t kMagic = 0x474e4843;  // "CHNG"
// An announcement longer than this is not believed (a block that is not one).
constexpr uint64_t kLongestAnnouncement = uint64_t{1} << 30;
// The pause between empty cycles while calls wait for ranks that have not
// reached them: from the first to the longest, doubling.
constexpr std::chrono::microseconds kFirstPause{20};
constexpr std::chrono::microseconds kLongestPause{2000};

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return ranks.size() == 1 ? "rank " + text : "ranks " + text;
}

std::string seconds_text(std::chrono::milliseconds limit) {
  return cat(static_cast<double>(limit.count()) / 1000.0, " s");
}

}  // namespace

Negotiator::Negotiator(std::shared_ptr<Context> context, Options options)
    : context_(std::move(context)),
      options_(std::move(options)),
      rank_(context_->rank()),
      size_(context_->size()),
      stall_limit_(options_.stall_limit.value_or(context_->timeout())),
      thread_([this] { worker_loop(); }) {}

Negotiator::~Negotiator() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

uint64_t Negotiator::cycles() const { return cycles_.load(); }

void Negotiator::submit(Call call) {
  std::unique_lock lock(mutex_);
  if (stopping_) {
    lock.unlock();
    finish(call, std::make_exception_ptr(Aborted(cat("rank ", rank_, ": ", to_string(call.description.kind),
                                                     " was submitted while its context shuts down"))));
    return;
  }
  Key key;
  key.matching = call.description.matching;
  if (key.matching == Matching::in_order) {
    key.number = ordered_count_++;
  } else {
    key.name = call.description.name;
    key.number = named_counts_[key.name]++;
  }
  // Inline only when nothing else is in flight: with the table empty and no
  // driver, this call's first cycle is likely to complete it.
  const bool here = !driving_ && queue_.empty() && call.bytes <= options_.inline_max_bytes;
  queue_.push_back({key, std::move(call)});
  if (!here) {
    lock.unlock();
    wake_.notify_all();
    return;
  }
  driving_ = true;
  lock.unlock();
  drive(true);
}

void Negotiator::worker_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return handoff_ || stopping_ || (!driving_ && !queue_.empty()); });
    if (handoff_ || (!driving_ && !queue_.empty())) {
      handoff_ = false;
      driving_ = true;
      lock.unlock();
      drive(false);
      lock.lock();
      continue;
    }
    return;  // stopping, and nothing to drive
  }
}

void Negotiator::drive(bool caller) {
  bool ran_a_cycle = false;
  for (;;) {
    std::vector<Submitted> batch;
    {
      std::unique_lock lock(mutex_);
      if (stopping_) {
        batch.swap(queue_);
        lock.unlock();
        const auto stopped = std::make_exception_ptr(
            Aborted(cat("rank ", rank_, ": the context shut down while this call waited for the other ranks")));
        for (Submitted& submitted : batch) finish(submitted.call, stopped);
        fail_everything(stopped);
        lock.lock();
        driving_ = false;
        return;
      }
      if (caller && ran_a_cycle) {
        // A submitting thread drives one cycle: its call has run, or waits
        // for ranks that have not reached it. Either way, what is left is
        // the worker's, so this thread goes back to its framework.
        if (queue_.empty() && table_.empty()) {
          driving_ = false;
        } else {
          handoff_ = true;
          lock.unlock();
          wake_.notify_all();
        }
        return;
      }
      if (queue_.empty() && table_.empty()) {
        driving_ = false;
        return;
      }
      if (queue_.empty() && last_cycle_was_empty_) {
        // Calls wait for ranks that have not reached them, and the last
        // cycle brought nothing new: pause before the next one, unless this
        // rank submits something meanwhile.
        pause_ = std::clamp(pause_ * 2, kFirstPause, kLongestPause);
        wake_.wait_for(lock, pause_, [this] { return !queue_.empty() || stopping_; });
        if (stopping_) continue;
      } else {
        pause_ = std::chrono::microseconds{0};
      }
      batch.swap(queue_);
      ran_a_cycle = true;
    }
    run_cycle(std::move(batch));
  }
}

void Negotiator::finish(Call& call, std::exception_ptr failure) {
  if (call.done) call.done(std::move(failure));
  call.done = nullptr;
}

void Negotiator::fail_everything(std::exception_ptr failure) {
  std::vector<Submitted> queued;
  {
    std::lock_guard lock(mutex_);
    queued.swap(queue_);
  }
  for (Submitted& submitted : queued) finish(submitted.call, failure);
  std::map<Key, Call> waiting;
  waiting.swap(waiting_);
  for (auto& [key, call] : waiting) finish(call, failure);
  table_.clear();
  last_cycle_was_empty_ = false;
}

std::vector<std::span<const std::byte>> Negotiator::exchange(const std::vector<std::byte>& mine) {
  const uint64_t cycle = cycles_.load();
  // The blocks are kept from cycle to cycle: nothing is allocated for a
  // cycle whose announcements fit.
  send_block_.assign(kBlockBytes, std::byte{0});
  store_le(send_block_.data(), kMagic, 4);
  store_le(send_block_.data() + 4, mine.size(), 4);
  store_le(send_block_.data() + 8, cycle, 8);
  const size_t inline_part = std::min(mine.size(), kPayloadBytes);
  std::copy_n(mine.begin(), inline_part, send_block_.begin() + kHeaderBytes);
  blocks_.resize(kBlockBytes * static_cast<size_t>(size_));
  allgather(*context_, send_block_.data(), blocks_.data(), kBlockBytes, DataType::uint8);
  cycles_.fetch_add(1);

  std::vector<size_t> lengths(static_cast<size_t>(size_));
  std::vector<size_t> overflow(static_cast<size_t>(size_));
  bool any_overflow = false;
  for (size_t r = 0; r < lengths.size(); ++r) {
    const std::byte* header = blocks_.data() + r * kBlockBytes;
    const uint64_t magic = load_le(header, 4), length = load_le(header + 4, 4), theirs = load_le(header + 8, 8);
    if (magic != kMagic || length > kLongestAnnouncement) {
      throw MismatchError(cat("rank ", rank_, ": rank ", r, "'s part of negotiation cycle ", cycle,
                              " is not a negotiation block (another collective issued on this context outside "
                              "the framework's ops?)"));
    }
    if (theirs != cycle) {
      throw MismatchError(cat("rank ", rank_, ": rank ", r, " is at negotiation cycle ", theirs, ", rank ", rank_,
                              " at ", cycle, " (a collective issued on this context outside the framework's ops?)"));
    }
    lengths[r] = length;
    overflow[r] = length > kPayloadBytes ? length - kPayloadBytes : 0;
    any_overflow = any_overflow || overflow[r] > 0;
  }
  std::vector<std::span<const std::byte>> everyone(static_cast<size_t>(size_));
  if (!any_overflow) {
    for (size_t r = 0; r < everyone.size(); ++r) {
      everyone[r] = std::span<const std::byte>(blocks_).subspan(r * kBlockBytes + kHeaderBytes, lengths[r]);
    }
    return everyone;
  }
  size_t rest_total = 0;
  for (size_t count : overflow) rest_total += count;
  std::vector<std::byte> rest(rest_total);
  allgatherv(*context_, mine.data() + inline_part, rest.data(), overflow, DataType::uint8);
  assembled_.resize(static_cast<size_t>(size_));
  size_t offset = 0;
  for (size_t r = 0; r < everyone.size(); ++r) {
    const std::byte* payload = blocks_.data() + r * kBlockBytes + kHeaderBytes;
    assembled_[r].assign(payload, payload + std::min(lengths[r], kPayloadBytes));
    assembled_[r].insert(assembled_[r].end(), rest.begin() + static_cast<ptrdiff_t>(offset),
                         rest.begin() + static_cast<ptrdiff_t>(offset + overflow[r]));
    offset += overflow[r];
    everyone[r] = assembled_[r];
  }
  return everyone;
}

std::string Negotiator::waiting_summary(int rank) const {
  std::string text;
  size_t shown = 0, total = 0;
  for (const auto& [key, entry] : table_) {
    const auto& theirs = entry.from[static_cast<size_t>(rank)];
    if (!theirs) continue;
    if (++total > 3) continue;
    text += (shown++ ? ", " : "") + std::string(to_string(theirs->kind)) + " " + describe_key(key);
    if (key.matching == Matching::in_order && !theirs->name.empty()) text += " ('" + theirs->name + "')";
  }
  if (total == 0) return "rank " + std::to_string(rank) + " has announced nothing it waits on";
  if (total > shown) text += cat(" and ", total - shown, " more");
  return "rank " + std::to_string(rank) + " waits on " + text;
}

void Negotiator::run_cycle(std::vector<Submitted> batch) {
  const auto now = std::chrono::steady_clock::now();
  mine_.clear();
  for (Submitted& submitted : batch) {
    if (abandoned_.count(submitted.key)) {
      finish(submitted.call, std::make_exception_ptr(TimeoutError(
                                 cat("rank ", rank_, ": ", to_string(submitted.call.description.kind), " ",
                                     describe_key(submitted.key),
                                     " came after the other ranks had given up waiting for it"))));
      continue;
    }
    encode_announcement(submitted.key, submitted.call.description, mine_);
    waiting_.emplace(submitted.key, std::move(submitted.call));
  }
  for (auto& [key, entry] : table_) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - entry.first_seen);
    // Each rank warns about the calls it waits on itself.
    if (!entry.warned && waited > stall_limit_ / 2 && waiting_.count(key)) {
      entry.warned = true;
      std::vector<int> missing;
      for (int r = 0; r < size_; ++r) {
        if (!entry.from[static_cast<size_t>(r)]) missing.push_back(r);
      }
      CHORUS_LOG(warn, rank_, describe_key(key), " has waited ", seconds_text(waited), " for ", rank_list(missing),
                 " (it is given up after ", seconds_text(stall_limit_), "); ", waiting_summary(missing.front()));
    }
    if (!entry.abandon_sent && waited > stall_limit_) {
      entry.abandon_sent = true;
      Kind kind = Kind::allreduce;
      for (const auto& description : entry.from) {
        if (description) kind = description->kind;
      }
      encode_abandon(key, kind, mine_);
    }
  }

  std::vector<std::vector<Record>> decoded(static_cast<size_t>(size_));
  try {
    const std::vector<std::span<const std::byte>> everyone = exchange(mine_);
    for (size_t r = 0; r < everyone.size(); ++r) {
      std::optional<std::vector<Record>> parsed = decode_records(everyone[r]);
      if (!parsed) {
        throw MismatchError(cat("rank ", rank_, ": rank ", r,
                                "'s negotiation block does not parse (ranks running different chorus versions?)"));
      }
      decoded[r] = std::move(*parsed);
    }
  } catch (...) {
    fail_everything(std::current_exception());
    return;
  }

  // The common cycle of eager execution: nothing outstanding, and every
  // rank announced one call, the same one. It completes at once, without
  // a trip through the table.
  if (table_.empty()) {
    bool one_call = true;
    for (const auto& records_of_rank : decoded) {
      one_call = one_call && records_of_rank.size() == 1 && !records_of_rank.front().abandon &&
                 records_of_rank.front().key == decoded.front().front().key;
    }
    if (one_call && !abandoned_.count(decoded.front().front().key)) {
      auto local = waiting_.extract(decoded.front().front().key);
      if (!local.empty()) {
        last_cycle_was_empty_ = false;
        std::vector<const Description*> everyone;
        for (const auto& records_of_rank : decoded) everyone.push_back(&records_of_rank.front().description);
        run_complete(local.key(), local.mapped(), everyone);
        return;
      }
    }
  }

  // Give-ups first, in rank order, so a call announced and given up in one
  // cycle is given up on every rank.
  for (const auto& records_of_rank : decoded) {
    for (const Record& record : records_of_rank) {
      if (!record.abandon || abandoned_.count(record.key)) continue;
      abandoned_.insert(record.key);
      const auto found = table_.find(record.key);
      std::string message = cat(to_string(record.description.kind), " ", describe_key(record.key), ": ");
      if (found != table_.end()) {
        std::vector<int> came, missing;
        for (int r = 0; r < size_; ++r) (found->second.from[static_cast<size_t>(r)] ? came : missing).push_back(r);
        message += cat(rank_list(came), " submitted it and waited ", seconds_text(stall_limit_), " for ",
                       rank_list(missing), ", which did not submit it; ", waiting_summary(missing.front()));
        table_.erase(found);
      }
      const auto local = waiting_.find(record.key);
      if (local != waiting_.end()) {
        finish(local->second, std::make_exception_ptr(TimeoutError(cat("rank ", rank_, ": ", message))));
        waiting_.erase(local);
      }
    }
  }
  bool anything_new = false;
  for (size_t r = 0; r < decoded.size(); ++r) {
    for (Record& record : decoded[r]) {
      if (record.abandon) continue;
      anything_new = true;
      if (abandoned_.count(record.key)) {
        const auto local = static_cast<int>(r) == rank_ ? waiting_.find(record.key) : waiting_.end();
        if (local != waiting_.end()) {
          finish(local->second, std::make_exception_ptr(TimeoutError(
                                    cat("rank ", rank_, ": ", to_string(record.description.kind), " ",
                                        describe_key(record.key),
                                        " came after the other ranks had given up waiting for it"))));
          waiting_.erase(local);
        }
        continue;
      }
      Entry& entry = table_[record.key];
      if (entry.from.empty()) {
        entry.from.resize(static_cast<size_t>(size_));
        entry.first_seen = now;
      }
      if (entry.from[r]) {
        fail_everything(std::make_exception_ptr(MismatchError(
            cat("rank ", rank_, ": rank ", r, " announced ", describe_key(record.key), " twice"))));
        return;
      }
      entry.from[r] = std::move(record.description);
      ++entry.announced;
      if (r == 0) entry.rank0_order = rank0_announcements_++;
    }
  }
  last_cycle_was_empty_ = !anything_new;

  // What every rank announced runs in the order rank 0 announced it.
  std::vector<std::pair<uint64_t, Key>> complete;
  for (const auto& [key, entry] : table_) {
    if (entry.announced == static_cast<size_t>(size_)) complete.emplace_back(*entry.rank0_order, key);
  }
  std::sort(complete.begin(), complete.end());
  for (const auto& [order, key] : complete) {
    auto node = table_.extract(key);
    Entry& entry = node.mapped();
    auto local = waiting_.extract(key);
    // Every rank announced it, this one included, so it waits here.
    std::vector<const Description*> everyone;
    for (const auto& description : entry.from) everyone.push_back(&*description);
    run_complete(key, local.mapped(), everyone);
  }
}

void Negotiator::run_complete(const Key& key, Call& call, std::span<const Description* const> everyone) {
  // Named in a failure's message only: the cost of the words is paid then.
  const auto what = [&] {
    const Description& first = *everyone.front();
    return cat(to_string(first.kind), " ", describe_key(key),
               first.name.empty() || key.matching == Matching::by_name ? "" : " ('" + first.name + "')");
  };
  std::exception_ptr failure;
  for (int r = 0; r < size_ && !failure; ++r) {
    const std::string& refusal = everyone[static_cast<size_t>(r)]->refusal;
    if (refusal.empty()) continue;
    failure = std::make_exception_ptr(InvalidArgument(
        r == rank_ ? refusal : cat("rank ", rank_, ": ", what(), ": rank ", r, " refused it: ", refusal)));
  }
  if (!failure) {
    if (auto differs = disagreement(everyone, options_.type_name, options_.op_name)) {
      failure = std::make_exception_ptr(MismatchError(cat("rank ", rank_, ": ", what(),
                                                          ": the ranks' calls do not match, so nothing was sent "
                                                          "(the job can go on): ", *differs)));
    }
  }
  if (!failure) {
    try {
      call.run(*context_, everyone);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  finish(call, failure);
}

}  // namespace chorus::negotiation
