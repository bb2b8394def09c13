// The epoll instance a transport's progress thread sleeps in, made the same
// way by every engine that has one: the listening socket and an eventfd
// that wakes the thread (a caller's wake-up, a peer's doorbell) registered
// under the tokens the engine dispatches on (epoll_token.h).
#pragma once

#include <cstdint>
#include <string_view>

#include "transport/file_descriptor.h"

namespace chorus::transport {

struct ProgressPoll {
  Fd epoll;
  Fd wake;  // an eventfd, non-blocking
};

// Throws IoError naming `rank` and `transport` when the kernel refuses.
ProgressPoll open_progress_poll(int rank, std::string_view transport, int listener_fd, uint64_t listener_token,
                                uint64_t wake_token);

}  // namespace chorus::transport
