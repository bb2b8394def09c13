// Socket plumbing for TcpStore client and server: an owning descriptor,
// deadline-bounded connect/send/receive on non-blocking sockets, and the
// listening socket. Results are values, not exceptions, because the client
// decides per call whether a lost connection is retried or reported.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/deadline.h"
#include "base/tls.h"

namespace chorus::tcp_store {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release();
  void reset();

 private:
  int fd_ = -1;
};

// A client's connection: the socket and, when the job uses TLS, its session
// (declared after the socket, so it goes first).
struct Link {
  UniqueFd fd;
  std::unique_ptr<TlsSession> tls;
  explicit operator bool() const { return static_cast<bool>(fd); }
};

std::string errno_text(int error);
// "host:port", with brackets around IPv6 literals.
std::string host_port(const std::string& host, uint16_t port);

// One pass over every address of host:port (each with a short connect
// timeout). On failure returns an empty fd and says why in `error`.
UniqueFd connect_once(const std::string& host, uint16_t port, Deadline deadline, std::string& error);

// Connected sockets are non-blocking with TCP_NODELAY: store requests are
// small, and Nagle would add tens of milliseconds to each round trip.
void make_nonblocking_nodelay(int fd);

enum class IoStatus { ok, timed_out, closed };
struct IoResult {
  IoStatus status = IoStatus::ok;
  std::string error;  // for closed: "closed by the server", "Connection reset by peer", ...
};
// Through the link's TLS session once it has one.
IoResult send_all(Link& link, std::span<const std::byte> bytes, Deadline deadline);
IoResult receive_exact(Link& link, std::span<std::byte> bytes, Deadline deadline);

// True if an idle connection has been closed (or sent something unasked).
bool idle_connection_is_dead(int fd);

// Listening socket for the server; IoError naming the port if it cannot bind.
// host "" binds every address: IPv6 dual-stack where the kernel has IPv6, else IPv4.
UniqueFd listen_on(const std::string& host, uint16_t port);
uint16_t local_port(int fd);
std::string peer_name(int fd);

}  // namespace chorus::tcp_store
