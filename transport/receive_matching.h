// Receive matching, written once for tcp, shm and ibverbs, on top of their
// TagMatching (tag_matching.h): the steps every transport takes, in the same
// order, under the lock that guards its matching,
// - when the user posts a receive (post_receive_locked, finish_posting), and
// - when a message (or its announcement, or a pull offer) arrives
//   (match_arrival_locked).
// What differs per transport is only what it does with a message that is
// matched (land it, claim it, clear or pull it) and how it answers a
// failure (tcp and shm abort the device outside their lock, ibverbs fails
// it under the engine's), so those stay with the transport.
//
// The request's state follows Pair::post_recv_if_arrived's promise: a post
// that may find nothing (only_if_arrived) leaves the request idle until it
// is taken on; a plain post marks it pending before it takes the lock
// (mark_pending_unless_only_if_arrived), so a peer's answer never finds it idle.
#pragma once

#include <exception>
#include <span>
#include <string>

#include "base/log.h"
#include "transport/engine_core.h"
#include "transport/peer_errors.h"
#include "transport/tag_matching.h"
#include "transport/transport.h"

namespace chorus::transport {

// What post_receive_locked came to.
struct ReceivePosting {
  enum class Kind {
    taken,        // an arrived message was handed to `take`: the transport's move
    posted,       // the receive waits for its message
    not_arrived,  // only_if_arrived and nothing arrived: the request stays idle
    failed,       // the device had failed: the caller fails the request with its failure
    mismatched,   // the arrived message is not what the receive expects: `error`
    peer_closed,  // the peer said goodbye and nothing arrived: the caller names it
  } kind = Kind::posted;
  std::exception_ptr error;  // mismatched only
};

// Called before taking the lock: a plain post is pending from here on.
inline void mark_pending_unless_only_if_arrived(Request& request, bool only_if_arrived) {
  if (!only_if_arrived) request.mark_pending();
}

// Under the transport's matching lock. `device_failed`: the device (or this
// connection) failed already. `take(arrival, receive)` is called for an
// arrived message the receive expects; it must take it (land, claim or
// remove it) before it returns.
template <class Record, class Take>
ReceivePosting post_receive_locked(TagMatching<Record>& matching, const CommonConnectionOwner& owner, int peer_rank,
                                   bool device_failed, bool peer_said_goodbye, Request& request, const Tag& tag,
                                   std::span<std::byte> data, bool only_if_arrived, Take&& take) {
  using Kind = ReceivePosting::Kind;
  if (device_failed) {
    if (only_if_arrived) request.mark_pending();
    return {Kind::failed, nullptr};
  }
  if (Record* arrived = matching.unclaimed(tag)) {
    if (only_if_arrived) request.mark_pending();
    const PostedReceive receive{&request, tag, data};
    // A receive that does not fit leaves the message where it is: the
    // device fails, and its cleanup forgets both.
    if (!receive.expects(arrived->tag, arrived->bytes))
      return {Kind::mismatched, owner.mismatch_error(peer_rank, arrived->tag, arrived->bytes, receive)};
    take(*arrived, receive);
    return {Kind::taken, nullptr};
  }
  if (only_if_arrived) return {Kind::not_arrived, nullptr};
  if (peer_said_goodbye) return {Kind::peer_closed, nullptr};
  matching.post({&request, tag, data});
  return {Kind::posted, nullptr};
}

// What a message arriving came to (match_arrival_locked): exactly one of
// a receive that takes it, the record kept for a later receive, or an error.
template <class Record>
struct ArrivalMatch {
  PostedReceive receive;     // taken: no longer posted (receive.request is set)
  Record* kept = nullptr;    // kept: filled by the transport, then arrivals().notify()
  std::exception_ptr error;  // a mismatch with the oldest receive, or past the unexpected-bytes limit
};

// Under the matching lock: a message of `bytes` bytes from `peer_rank`
// (`peer_label` in words) sent with `tag` meets the oldest receive posted
// for its key: taken where it expects the message, an error where it does
// not (the receive stays posted: the abort that follows fails it). With no
// receive it is kept, charging `charge` against max_unexpected_bytes, or is
// an error naming the peer where that passes the limit: a peer cannot make
// this rank buffer without bound.
template <class Record>
ArrivalMatch<Record> match_arrival_locked(TagMatching<Record>& matching, const CommonConnectionOwner& owner,
                                          int peer_rank, const std::string& peer_label, const Tag& tag, size_t bytes,
                                          size_t charge) {
  const PostedMatch match = matching.match_posted(tag, bytes);
  if (match.kind == PostedMatch::Kind::mismatched)
    return {{}, nullptr, owner.mismatch_error(peer_rank, tag, bytes, match.receive)};
  if (match.kind == PostedMatch::Kind::taken) return {match.receive, nullptr, nullptr};
  if (const size_t limit = owner.max_unexpected_bytes(); !matching.admits(charge, limit))
    return {{}, nullptr,
            unexpected_limit_error(owner.rank(), peer_rank, peer_label, tag, bytes, matching.buffered_bytes(), limit)};
  return {{}, &matching.add(tag, bytes, charge), nullptr};
}

// How a transport that aborts its device outside its lock (tcp, shm) ends
// a post, once it let go of the lock: returns what post_recv returns. A
// mismatch, or a receive for a peer that said goodbye, aborts the device
// (`owner.abort(reason, level)`), and the request fails with the device's
// failure, whichever came first.
template <class Owner>
bool finish_posting(ReceivePosting posting, Owner& owner, int peer_rank, Request& request, const Tag& tag) {
  switch (posting.kind) {
    case ReceivePosting::Kind::taken:
    case ReceivePosting::Kind::posted: return true;
    case ReceivePosting::Kind::not_arrived: return false;
    case ReceivePosting::Kind::failed: request.fail(owner.failure()); return true;
    case ReceivePosting::Kind::peer_closed:
      posting.error = closed_context_error(
          owner.rank(), peer_rank, cat(" before sending ", describe_tag(tag.group, tag.value), " that this rank expects"));
      break;
    case ReceivePosting::Kind::mismatched: break;
  }
  owner.abort(posting.error, receive_failure_level(posting.error));
  request.fail(owner.failure());
  return true;
}

}  // namespace chorus::transport
