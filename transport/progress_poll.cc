// ProgressLoop (progress_poll.h).
#include "transport/progress_poll.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "base/error.h"
#include "base/log.h"

namespace chorus::transport {

void ProgressLoop::open(int rank, std::string_view transport, int listener_fd, uint64_t listener_token,
                        uint64_t wake_token) {
  epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  wake_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_.valid() || !wake_.valid())
    throw IoError(cat("rank ", rank, ": cannot create the ", transport, " progress engine: ", errno_text(errno)));
  epoll_event listen_event{EPOLLIN, {.u64 = listener_token}};
  epoll_event wake_event{EPOLLIN, {.u64 = wake_token}};
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener_fd, &listen_event) != 0 ||
      ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &wake_event) != 0)
    throw IoError(cat("rank ", rank, ": epoll_ctl failed: ", errno_text(errno)));
}

void ProgressLoop::wake() {
  if (!wake_.valid()) return;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t written = ::write(wake_.get(), &one, sizeof(one));
}

void ProgressLoop::drain_wake() {
  uint64_t count = 0;
  [[maybe_unused]] ssize_t read = ::read(wake_.get(), &count, sizeof(count));
}

void ProgressLoop::stop() {
  stopping_.store(true, std::memory_order_release);
  if (!thread_.joinable()) return;
  wake();
  thread_.join();
}

}  // namespace chorus::transport
