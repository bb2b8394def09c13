// Knocking on a listener: a non-blocking connect, then a look at what comes back.
#include "transport/knock.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/deadline.h"
#include "transport/file_descriptor.h"

namespace chorus::transport {
namespace {

constexpr std::chrono::milliseconds kFirstKnockAfter{200};
constexpr std::chrono::milliseconds kKnockEvery{500};

// Waits for `events` on fd until `until`; the revents, 0 on timeout.
short wait_for(int fd, short events, Clock::time_point until) {
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
    if (ready > 0) return entry.revents;
    if (ready == 0) return 0;
    if (errno != EINTR) return POLLERR;
  }
}

}  // namespace

KnockAnswer knock(const sockaddr* address, socklen_t length, int type, std::chrono::milliseconds window) {
  const Clock::time_point until = Clock::now() + window;
  Fd fd(::socket(address->sa_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return KnockAnswer::unknown;
  if (::connect(fd.get(), address, length) != 0) {
    if (errno == ECONNREFUSED || errno == ENOENT) return KnockAnswer::refused;
    if (errno != EINPROGRESS && errno != EAGAIN) return KnockAnswer::unknown;
    if (!(wait_for(fd.get(), POLLOUT, until) & (POLLOUT | POLLERR | POLLHUP))) return KnockAnswer::unknown;
    int error = 0;
    socklen_t error_length = sizeof(error);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &error_length);
    if (error == ECONNREFUSED) return KnockAnswer::refused;
    if (error != 0) return KnockAnswer::unknown;
  }
  // Connected. A listener that aborted closes it as soon as it accepts; a
  // live one sends its handshake challenge at once. The kernel completes
  // the connection even for a stopped process, which then says nothing.
  const short events = wait_for(fd.get(), POLLIN, until);
  if (events == 0) return KnockAnswer::silent;
  // Read what came (the handshake's opening), so closing sends a plain
  // end of stream: unread bytes would make it a reset, which the listener
  // logs as a broken connection rather than a knock.
  char opening[256];
  const ssize_t received = ::recv(fd.get(), opening, sizeof(opening), MSG_DONTWAIT);
  if (received > 0) {
    ::shutdown(fd.get(), SHUT_WR);
    return KnockAnswer::alive;
  }
  if (received == 0 || errno == ECONNRESET || errno == EPIPE) return KnockAnswer::closed;
  return KnockAnswer::unknown;
}

bool KnockSchedule::due(std::chrono::steady_clock::duration waited) {
  if (waited < kFirstKnockAfter || (last_ && waited - *last_ < kKnockEvery)) return false;
  last_ = waited;
  return true;
}

}  // namespace chorus::transport
