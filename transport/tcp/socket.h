// Socket plumbing for the TCP transport: an IPv4/IPv6 socket address that
// prints itself, and the choice of which local address a device binds and
// publishes.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "base/tls.h"
#include "transport/file_descriptor.h"

namespace chorus::transport::tcp {


class SocketAddress {
 public:
  SocketAddress() = default;
  SocketAddress(const sockaddr* address, socklen_t length);

  int family() const { return storage_.ss_family; }
  uint16_t port() const;
  void set_port(uint16_t port);
  bool is_loopback() const;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  sockaddr* get() { return reinterpret_cast<sockaddr*>(&storage_); }
  socklen_t length() const { return length_; }
  // "10.0.0.3:41234" or "[fd00::2]:41234".
  std::string to_string() const;
  // The address without the port ("10.0.0.2", "[fe80::1%2]").
  std::string host_string() const;

 private:
  sockaddr_storage storage_{};
  socklen_t length_ = 0;
};


// A socket that passed the connection handshake (handshake.h), and its TLS
// session when the job uses TLS.
struct AdmittedSocket {
  Fd fd;
  std::unique_ptr<TlsSession> tls;
};

// The local address to bind and publish (port 0). `rank` only labels errors.
// interface wins over hostname (the registry fills interface from
// CHORUS_SOCKET_IFNAME); with neither, the
// interface of the default route, then loopback (logged at info).
SocketAddress choose_local_address(const std::string& interface, const std::string& hostname,
                                   int rank);

// A non-blocking listening socket bound to `address` with a kernel-chosen
// port; `address` is updated to the bound address. Throws IoError.
Fd open_listener(SocketAddress& address, int rank);

// TCP_NODELAY, so small messages leave at once instead of waiting for Nagle.
void set_no_delay(int fd);

}  // namespace chorus::transport::tcp
