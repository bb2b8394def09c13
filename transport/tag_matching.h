// Tag matching, written once for the transports that receive messages off a
// wire of their own (tcp, shm, ibverbs): receives the user posted before
// their message came, and messages that came before their receive.
//
// The rules every transport keeps:
// - A receive matches the oldest message with its tag key (group and value),
//   and a message the oldest receive: first in, first matched, per key.
// - A receive whose message is still arriving claims it (`claimant`) and is
//   completed by whoever lands the last byte.
// - Messages nobody asked for are bounded per connection by
//   CHORUS_MAX_UNEXPECTED_BYTES: a peer cannot make this rank buffer without
//   limit. What a message costs against the limit is the transport's choice
//   (its length, or its length plus bookkeeping so empty ones count too).
//
// Lists, not maps: a peer has few messages in flight (the executor's
// window), so a scan costs less than a hash map's allocations per message.
// Not thread-safe: the transport guards it with the lock it already holds
// for its receive bookkeeping.
#pragma once

#include <algorithm>
#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "transport/transport.h"

namespace chorus::transport {

// A receive the user posted.
struct PostedReceive {
  Request* request = nullptr;
  Tag tag;
  std::span<std::byte> buffer;

  // Whether a message of `bytes` bytes sent with `theirs` is what this
  // receive expects: the same length, from the same call. (The key matched
  // already; a mismatch here is the MismatchError the user sees.)
  bool expects(const Tag& theirs, size_t bytes) const {
    return buffer.size() == bytes && tag.signature == theirs.signature;
  }
};

// What a message arriving met among the posted receives (TagMatching::match_posted).
struct PostedMatch {
  enum class Kind { none, taken, mismatched } kind = Kind::none;
  PostedReceive receive;  // taken: no longer posted; mismatched: left posted (the abort that follows fails it)
};

// What every transport records of a message that arrived before its
// receive; a transport's own record derives from it (the payload, a pull
// offer, a rendezvous announcement). A record that can be reused for the
// next message defines `bool reuse()`: it clears itself and says whether it
// is worth keeping (a large buffer is not).
struct Arrival {
  Tag tag;
  size_t bytes = 0;        // the length the sender announced
  size_t charged = 0;      // what it counts against the unexpected-bytes limit
  PostedReceive claimant;  // a receive posted while the bytes were still arriving

  bool claimed() const { return claimant.request != nullptr; }
};

// The eager window (docs/shm.md, "The eager window"): the eager bytes a
// sender lets wait unclaimed at its receiver before its further messages
// wait for their receive instead (shm: a pull; tcp: an announcement the
// receiver clears). Never more than half of what the receiver may buffer.
inline constexpr size_t kDefaultEagerWindowBytes = size_t{32} << 20;
inline size_t eager_window(size_t configured, size_t max_unexpected_bytes) {
  return std::min(configured, max_unexpected_bytes / 2);
}
// Whether `bytes` more sent eagerly would pass `window`, given the eager
// bytes sent so far and what the receiver last said its receives took
// (its word, so a figure above what was sent counts as all taken).
inline bool past_eager_window(uint64_t sent, uint64_t claimed, size_t bytes, size_t window) {
  const uint64_t unclaimed = claimed >= sent ? 0 : sent - claimed;
  return unclaimed + bytes > window;
}

template <class Record>
class TagMatching {
 public:
  // ---- posting a receive

  // The oldest message with `tag`'s key that no receive has claimed, or null.
  Record* unclaimed(const Tag& tag) const {
    const TagKey key(tag);
    for (const auto& arrival : arrivals_)
      if (!arrival->claimed() && TagKey(arrival->tag) == key) return arrival.get();
    return nullptr;
  }
  bool has_unclaimed(const Tag& tag) const { return unclaimed(tag) != nullptr; }
  void post(PostedReceive receive) { posted_.push_back(receive); }

  // ---- a message arriving

  // The oldest receive posted for the key of a message of `bytes` bytes
  // sent with `tag`: taken out when it expects that message.
  PostedMatch match_posted(const Tag& tag, size_t bytes) {
    auto found = find_posted(tag);
    if (found == posted_.end()) return {};
    PostedMatch match{PostedMatch::Kind::mismatched, *found};
    if (found->expects(tag, bytes)) {
      match.kind = PostedMatch::Kind::taken;
      posted_.erase(found);
    }
    return match;
  }

  // Whether a message costing `charge` more fits under `limit`.
  bool admits(size_t charge, size_t limit) const { return charge <= limit - std::min(limit, buffered_bytes_); }
  // Keeps a message nobody asked for yet (admits() said it fits), charging
  // `charge` against the limit until it is removed.
  Record& add(const Tag& tag, size_t bytes, size_t charge) {
    std::unique_ptr<Record> arrival;
    if (spares_.empty()) {
      arrival = std::make_unique<Record>();
    } else {
      arrival = std::move(spares_.back());
      spares_.pop_back();
    }
    arrival->tag = tag;
    arrival->bytes = bytes;
    arrival->charged = charge;
    buffered_bytes_ += charge;
    arrivals_.push_back(std::move(arrival));
    return *arrivals_.back();
  }
  // Forgets a message whose receive has it now.
  void remove(const Record& arrival) {
    auto found = std::find_if(arrivals_.begin(), arrivals_.end(), [&](const auto& kept) { return kept.get() == &arrival; });
    std::unique_ptr<Record> done = std::move(*found);
    arrivals_.erase(found);
    buffered_bytes_ -= done->charged;
    if constexpr (requires(Record& record) { record.reuse(); }) {
      if (spares_.size() < kSpares && done->reuse()) {
        done->claimant = {};
        spares_.push_back(std::move(done));
      }
    }
  }

  // ---- bookkeeping

  // The oldest message in `group` that no receive has claimed and that
  // `wanted` accepts, among the group's `oldest` oldest (Pair::find_unclaimed).
  std::optional<Tag> find_unclaimed(uint64_t group, size_t oldest, const UnclaimedFilter& wanted) const {
    size_t looked = 0;
    for (const auto& arrival : arrivals_) {
      if (arrival->tag.group != group) continue;
      if (looked++ == oldest) break;
      if (!arrival->claimed() && wanted(arrival->tag)) return arrival->tag;
    }
    return std::nullopt;
  }

  // Bytes charged by the messages kept.
  size_t buffered_bytes() const { return buffered_bytes_; }
  // Receives that wait: posted ones, and those that claimed a message still arriving.
  size_t waiting_receives() const {
    return posted_.size() + static_cast<size_t>(std::count_if(arrivals_.begin(), arrivals_.end(),
                                                              [](const auto& arrival) { return arrival->claimed(); }));
  }
  // The peer is gone: hands back the posted receives, to be failed. Messages
  // that arrived stay claimable.
  std::vector<Request*> withdraw_posted() {
    std::vector<Request*> waiting;
    for (const PostedReceive& receive : posted_) waiting.push_back(receive.request);
    posted_.clear();
    return waiting;
  }
  // Failure: forgets everything and hands back the requests that were waiting, to be failed.
  std::vector<Request*> forget_all() {
    std::vector<Request*> waiting = withdraw_posted();
    for (const auto& arrival : arrivals_)
      if (arrival->claimed()) waiting.push_back(arrival->claimant.request);
    arrivals_.clear();
    buffered_bytes_ = 0;
    return waiting;
  }

 private:
  static constexpr size_t kSpares = 16;

  std::vector<PostedReceive>::iterator find_posted(const Tag& tag) {
    const TagKey key(tag);
    return std::find_if(posted_.begin(), posted_.end(),
                        [&](const PostedReceive& receive) { return TagKey(receive.tag) == key; });
  }

  std::vector<PostedReceive> posted_;
  std::deque<std::unique_ptr<Record>> arrivals_;
  std::vector<std::unique_ptr<Record>> spares_;
  size_t buffered_bytes_ = 0;
};

}  // namespace chorus::transport
