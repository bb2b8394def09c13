// A transport engine's progress thread, made and stopped the same way by
// every engine (tcp, shm, ibverbs): the epoll set it sleeps in, with an
// eventfd that wakes it (a caller's wake-up, a peer's doorbell) and the
// descriptors the engine watches (its listener, sockets, an RDMA device's
// channels) registered under the tokens the engine dispatches on
// (epoll_token.h); the thread; and the flag that ends its loop.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <exception>
#include <functional>
#include <string_view>
#include <thread>

#include "transport/file_descriptor.h"

namespace chorus::transport {

class ProgressLoop {
 public:
  static constexpr uint32_t kReadable = EPOLLIN;
  ProgressLoop() = default;
  ProgressLoop(const ProgressLoop&) = delete;
  ProgressLoop& operator=(const ProgressLoop&) = delete;
  ~ProgressLoop() { stop(); }

  // Makes the epoll set and the eventfd (watched under `wake_token`). Throws
  // IoError naming `rank` and `transport` when the kernel refuses.
  void open(int rank, std::string_view transport, uint64_t wake_token);
  // open, then watch the listening socket under `listener_token` (the same IoError).
  void open(int rank, std::string_view transport, int listener_fd, uint64_t listener_token, uint64_t wake_token);
  // Adds `fd` to the epoll set (watch), changes what it waits for
  // (rewatch), removes it (unwatch). false, with errno, when the kernel refuses.
  bool watch(int fd, uint64_t token, uint32_t events = kReadable);
  bool rewatch(int fd, uint64_t token, uint32_t events);
  void unwatch(int fd);
  // Whether the calling thread is the loop's (the thread records itself
  // first thing, so no caller reads thread_ while start() writes it).
  bool on_thread() const { return std::this_thread::get_id() == thread_id_.load(std::memory_order_acquire); }
  int epoll_fd() const { return epoll_.get(); }
  // The eventfd: written to wake the thread; a peer may hold it (shm's doorbell).
  int wake_fd() const { return wake_.get(); }

  void start(std::function<void()> body);

  // What an engine's turn of the loop says before the thread sleeps.
  enum class Turn { wait, again, stop };
  // The loop every engine's thread runs, until stop() (or a hook says stop):
  //   engine.before_wait(): the work done awake; again skips the sleep;
  //   epoll_wait for at most engine.wait_timeout_ms();
  //   engine.wait_failed(error) on a failing wait (not EINTR), with the
  //     IoError naming the rank: false ends the loop;
  //   engine.dispatch(token, events) for each ready descriptor;
  //   engine.after_wait(): timers (handshakes that expire, ...).
  // A template: the hooks are the engine's own functions, called directly.
  template <size_t kEventsPerWait, class Engine>
  void run(Engine& engine) {
    epoll_event events[kEventsPerWait];
    while (!stopping()) {
      const Turn turn = engine.before_wait();
      if (turn == Turn::stop) break;
      if (turn == Turn::again) continue;
      const int ready = ::epoll_wait(epoll_.get(), events, static_cast<int>(kEventsPerWait), engine.wait_timeout_ms());
      if (ready < 0 && errno != EINTR && !engine.wait_failed(wait_error(errno))) break;
      for (int i = 0; i < ready; ++i) engine.dispatch(events[i].data.u64, events[i].events);
      engine.after_wait();
    }
  }
  // What the thread's loop checks before each wait.
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }
  void wake();
  // Takes what the eventfd counted, so the next wait sleeps.
  void drain_wake();
  // Ends the loop, wakes the thread and waits for it; nothing when it never
  // started or has stopped already.
  void stop();

 private:
  std::exception_ptr wait_error(int error) const;

  int rank_ = -1;
  Fd epoll_;
  Fd wake_;
  std::thread thread_;
  std::atomic<std::thread::id> thread_id_{};
  std::atomic<bool> stopping_{false};
};

}  // namespace chorus::transport
