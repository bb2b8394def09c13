// ProgressLoop (progress_poll.h).
#include "transport/progress_poll.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "base/error.h"
#include "base/log.h"

namespace chorus::transport {

void ProgressLoop::open(int rank, std::string_view transport, uint64_t wake_token) {
  rank_ = rank;
  epoll_ = Fd(::epoll_create1(EPOLL_CLOEXEC));
  wake_ = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_.valid() || !wake_.valid())
    throw IoError(cat("rank ", rank, ": cannot create the ", transport, " progress engine: ", errno_text(errno)));
  if (!watch(wake_.get(), wake_token)) throw IoError(cat("rank ", rank, ": epoll_ctl failed: ", errno_text(errno)));
}

void ProgressLoop::open(int rank, std::string_view transport, int listener_fd, uint64_t listener_token,
                        uint64_t wake_token) {
  open(rank, transport, wake_token);
  if (!watch(listener_fd, listener_token)) throw IoError(cat("rank ", rank, ": epoll_ctl failed: ", errno_text(errno)));
}

bool ProgressLoop::watch(int fd, uint64_t token, uint32_t events) {
  epoll_event event{events, {.u64 = token}};
  return ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &event) == 0;
}

bool ProgressLoop::rewatch(int fd, uint64_t token, uint32_t events) {
  epoll_event event{events, {.u64 = token}};
  return ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &event) == 0;
}

void ProgressLoop::unwatch(int fd) { ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr); }

void ProgressLoop::start(std::function<void()> body) {
  thread_ = std::thread([this, body = std::move(body)] {
    thread_id_.store(std::this_thread::get_id(), std::memory_order_release);
    body();
  });
}

std::exception_ptr ProgressLoop::wait_error(int error) const {
  return std::make_exception_ptr(IoError(cat("rank ", rank_, ": epoll_wait failed: ", errno_text(error))));
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
