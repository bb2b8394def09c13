// Socket plumbing for TcpStore (see tcp_store_socket.h).
#include "rendezvous/tcp_store_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>

#include "base/error.h"
#include "base/log.h"
#include "rendezvous/tcp_store.h"

namespace chorus::tcp_store {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int UniqueFd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string errno_text(int error) { return std::strerror(error); }

std::string host_port(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return cat("[", host, "]:", port);
  return cat(host.empty() ? "*" : host, ":", port);
}

namespace {

// poll() timeout for a deadline: rounds up so we never spin on "0 ms left".
int poll_timeout(Deadline deadline) {
  if (deadline.at() == Clock::time_point::max()) return -1;
  auto now = Clock::now();
  if (now >= deadline.at()) return 0;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.at() - now).count() + 1;
  return static_cast<int>(std::min<long long>(left, INT_MAX));
}

// Waits for `events`; false on timeout.
bool wait_for(int fd, short events, Deadline deadline) {
  pollfd entry{fd, events, 0};
  while (true) {
    int ready = ::poll(&entry, 1, poll_timeout(deadline));
    if (ready > 0) return true;
    if (ready == 0) {
      if (deadline.expired()) return false;
      continue;
    }
    if (errno != EINTR) return false;
  }
}

}  // namespace

void make_nonblocking_nodelay(int fd) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

UniqueFd connect_once(const std::string& host, uint16_t port, Deadline deadline, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  int resolved = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found);
  if (resolved != 0) {
    error = cat("cannot resolve '", host, "': ", ::gai_strerror(resolved));
    return {};
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> addresses(found, ::freeaddrinfo);
  for (addrinfo* address = found; address != nullptr; address = address->ai_next) {
    UniqueFd fd(::socket(address->ai_family, address->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                         address->ai_protocol));
    if (!fd) {
      error = cat("socket: ", errno_text(errno));
      continue;
    }
    if (::connect(fd.get(), address->ai_addr, address->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        error = errno_text(errno);
        continue;
      }
      // Even with the deadline passed, give a connect that is under way a moment to finish.
      Deadline attempt = Deadline(std::max(deadline.at(), Clock::now() + std::chrono::milliseconds(20)));
      if (!wait_for(fd.get(), POLLOUT, attempt)) {
        error = "connect timed out";
        continue;
      }
      int so_error = 0;
      socklen_t length = sizeof(so_error);
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &length);
      if (so_error != 0) {
        error = errno_text(so_error);
        continue;
      }
    }
    make_nonblocking_nodelay(fd.get());
    return fd;
  }
  return {};
}

namespace {

IoResult failed(Link& link, int error) {
  if (error == EPROTO && link.tls) return {IoStatus::closed, link.tls->error()};
  return {IoStatus::closed, errno_text(error)};
}

}  // namespace

IoResult send_all(Link& link, std::span<const std::byte> bytes, Deadline deadline) {
  const int fd = link.fd.get();
  size_t done = 0;
  while (done < bytes.size() || (link.tls && link.tls->unsent_output())) {
    ssize_t n;
    if (!link.tls) {
      n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    } else if (done < bytes.size()) {
      n = link.tls->write(bytes.data() + done, bytes.size() - done);
    } else {
      // TLS kept back a sealed record the socket did not take.
      n = -1;
      errno = link.tls->flush();
      if (errno == 0) continue;
    }
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd, POLLOUT, deadline)) return {IoStatus::timed_out, "send timed out"};
      continue;
    }
    return failed(link, errno);
  }
  return {};
}

IoResult receive_exact(Link& link, std::span<std::byte> bytes, Deadline deadline) {
  const int fd = link.fd.get();
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = link.tls ? link.tls->read(bytes.data() + done, bytes.size() - done)
                         : ::recv(fd, bytes.data() + done, bytes.size() - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return {IoStatus::closed, "connection closed by the server"};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd, POLLIN, deadline)) return {IoStatus::timed_out, "receive timed out"};
      continue;
    }
    return failed(link, errno);
  }
  return {};
}

bool idle_connection_is_dead(int fd) {
  pollfd entry{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  int ready = ::poll(&entry, 1, 0);
  return ready != 0;
}

namespace {

[[noreturn]] void throw_listen_error(const std::string& host, uint16_t port, const std::string& step, int error) {
  std::string where = host.empty() ? "every address" : "'" + host + "'";
  throw IoError(cat("TcpStoreServer: cannot ", step, " port ", port, " on ", where, ": ", errno_text(error)));
}

// Binds and listens on one address; returns the errno on failure.
int try_listen(const sockaddr* address, socklen_t length, bool dual_stack, UniqueFd& out) {
  UniqueFd fd(::socket(address->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return errno;
  int one = 1;
  // Restarting a server on the same port must not wait out TIME_WAIT.
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (dual_stack) {
    int zero = 0;
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  }
  if (::bind(fd.get(), address, length) != 0) return errno;
  if (::listen(fd.get(), SOMAXCONN) != 0) return errno;
  out = std::move(fd);
  return 0;
}

}  // namespace

UniqueFd listen_on(const std::string& host, uint16_t port) {
  UniqueFd fd;
  if (host.empty()) {
    sockaddr_in6 any6{};
    any6.sin6_family = AF_INET6;
    any6.sin6_addr = in6addr_any;
    any6.sin6_port = htons(port);
    int error = try_listen(reinterpret_cast<sockaddr*>(&any6), sizeof(any6), true, fd);
    if (error == 0) return fd;
    if (error != EAFNOSUPPORT && error != EADDRNOTAVAIL) throw_listen_error(host, port, "listen on", error);
    sockaddr_in any4{};
    any4.sin_family = AF_INET;
    any4.sin_addr.s_addr = htonl(INADDR_ANY);
    any4.sin_port = htons(port);
    error = try_listen(reinterpret_cast<sockaddr*>(&any4), sizeof(any4), false, fd);
    if (error != 0) throw_listen_error(host, port, "listen on", error);
    return fd;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string service = std::to_string(port);
  int resolved = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (resolved != 0) {
    throw IoError(cat("TcpStoreServer: cannot resolve '", host, "' to listen on port ", port, ": ",
                      ::gai_strerror(resolved)));
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> addresses(found, ::freeaddrinfo);
  int last_error = EADDRNOTAVAIL;
  for (addrinfo* address = found; address != nullptr; address = address->ai_next) {
    last_error = try_listen(address->ai_addr, address->ai_addrlen, false, fd);
    if (last_error == 0) return fd;
    if (last_error == EADDRINUSE) break;
  }
  throw_listen_error(host, port, "listen on", last_error);
}

uint16_t local_port(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

std::string peer_name(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return "unknown peer";
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET6) {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    return host_port(text, ntohs(v6->sin6_port));
  }
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
  ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text));
  return host_port(text, ntohs(v4->sin_port));
}

}  // namespace chorus::tcp_store
