// An epoll event's 64-bit user data as a token: what woke the progress
// thread (its kind, one of the transport's own enum, in the top byte) and
// which one (a connection's index, a handshake's id) in the 56 bits below.
#pragma once

#include <cstdint>

namespace chorus::transport {

template <class Kind>
uint64_t epoll_token(Kind kind, uint64_t value) {
  return (static_cast<uint64_t>(kind) << 56) | value;
}
template <class Kind>
Kind epoll_token_kind(uint64_t token) {
  return static_cast<Kind>(token >> 56);
}
inline uint64_t epoll_token_value(uint64_t token) { return token & ((uint64_t{1} << 56) - 1); }

}  // namespace chorus::transport
