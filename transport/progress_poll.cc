// open_progress_poll (progress_poll.h).
#include "transport/progress_poll.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <cerrno>

#include "base/error.h"
#include "base/log.h"

namespace chorus::transport {

ProgressPoll open_progress_poll(int rank, std::string_view transport, int listener_fd, uint64_t listener_token,
                                uint64_t wake_token) {
  ProgressPoll poll{Fd(::epoll_create1(EPOLL_CLOEXEC)), Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC))};
  if (!poll.epoll.valid() || !poll.wake.valid())
    throw IoError(cat("rank ", rank, ": cannot create the ", transport, " progress engine: ", errno_text(errno)));
  epoll_event listen_event{EPOLLIN, {.u64 = listener_token}};
  epoll_event wake_event{EPOLLIN, {.u64 = wake_token}};
  if (::epoll_ctl(poll.epoll.get(), EPOLL_CTL_ADD, listener_fd, &listen_event) != 0 ||
      ::epoll_ctl(poll.epoll.get(), EPOLL_CTL_ADD, poll.wake.get(), &wake_event) != 0)
    throw IoError(cat("rank ", rank, ": epoll_ctl failed: ", errno_text(errno)));
  return poll;
}

}  // namespace chorus::transport
