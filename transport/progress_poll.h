// A transport engine's progress thread, made and stopped the same way by
// every engine that has one (tcp, shm): the epoll set it sleeps in, with the
// listening socket and an eventfd that wakes it (a caller's wake-up, a
// peer's doorbell) registered under the tokens the engine dispatches on
// (epoll_token.h); the thread; and the flag that ends its loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string_view>
#include <thread>

#include "transport/file_descriptor.h"

namespace chorus::transport {

class ProgressLoop {
 public:
  ProgressLoop() = default;
  ProgressLoop(const ProgressLoop&) = delete;
  ProgressLoop& operator=(const ProgressLoop&) = delete;
  ~ProgressLoop() { stop(); }

  // Makes the epoll set and the eventfd. Throws IoError naming `rank` and
  // `transport` when the kernel refuses.
  void open(int rank, std::string_view transport, int listener_fd, uint64_t listener_token, uint64_t wake_token);
  int epoll_fd() const { return epoll_.get(); }
  // The eventfd: written to wake the thread; a peer may hold it (shm's doorbell).
  int wake_fd() const { return wake_.get(); }

  void start(std::function<void()> body) { thread_ = std::thread(std::move(body)); }
  // What the thread's loop checks before each wait.
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }
  void wake();
  // Takes what the eventfd counted, so the next wait sleeps.
  void drain_wake();
  // Ends the loop, wakes the thread and waits for it; nothing when it never
  // started or has stopped already.
  void stop();

 private:
  Fd epoll_;
  Fd wake_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
};

}  // namespace chorus::transport
