// The errors every transport raises about a peer, in one wording: a message
// that is not the one the receive expected, and a peer that closed its
// context while this rank still expected something of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "base/log.h"
#include "transport/transport.h"

namespace chorus::transport {

// MismatchError: "rank R: peer rank P sent <theirs> but this rank expected
// <mine>, for <tag> (a message of N bytes; this rank expected M)"; when the
// calls are the same and only the lengths differ, "rank R: peer rank P sent
// N bytes for <tag> (<call>) but this rank expected M". The two calls come
// described (Tag signatures turned into words by the caller).
std::exception_ptr mismatch_error(int rank, int peer_rank, const std::string& theirs, const std::string& mine,
                                  const Tag& tag, uint64_t their_bytes, size_t my_bytes);

// IoError naming the peer: "rank R: <peer> sent a message of N bytes (<tag>)
// that no receive was posted for, with B bytes of such messages from it
// buffered already: more than the limit of L bytes (CHORUS_MAX_UNEXPECTED_BYTES)...".
std::exception_ptr unexpected_limit_error(int rank, int peer_rank, const std::string& peer_label, const Tag& tag,
                                          uint64_t bytes, size_t buffered, size_t limit);

// IoError naming the peer: "rank R: peer rank P closed its context<detail>".
std::exception_ptr closed_context_error(int rank, int peer_rank, const std::string& detail);

// How loudly a transport logs the abort that `error`, met while posting a
// receive, causes: a mismatch is the user's bug and worth a warning; the
// rest (a peer already gone) was reported where it happened.
LogLevel receive_failure_level(const std::exception_ptr& error);

}  // namespace chorus::transport
