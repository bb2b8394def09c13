// Posting a receive, written once for tcp, shm and ibverbs: the steps every
// transport's post_recv takes, in the same order, under the lock that guards
// its tag matching. What differs per transport is only what it does with a
// message that already arrived (land it, claim it, clear or pull it) and how
// it answers a failure (tcp and shm abort the device outside their lock,
// ibverbs fails it under the engine's), so those stay with the transport.
//
// The request's state follows Pair::post_recv_if_arrived's promise: a post
// that may find nothing (only_if_arrived) leaves the request idle until it
// is taken on; a plain post marks it pending before it takes the lock
// (mark_pending_unless_only_if_arrived), so a peer's answer never finds it idle.
#pragma once

#include <exception>
#include <span>

#include "transport/engine_core.h"
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

}  // namespace chorus::transport
