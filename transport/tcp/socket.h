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

#include "base/config.h"
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

// The local address to bind and publish (port 0), and why it was chosen.
// An interface wins over a host name (the registry fills interface from
// CHORUS_SOCKET_IFNAME). With neither, the listeners go where the job lives,
// never further by accident:
//  - loopback when the store's host is a loopback address or "localhost"
//    (no other host can reach that store, so every rank is here), or when
//    the launcher says every rank is on this host;
//  - else the address this host routes the store's host through;
//  - else (store host unknown) the default route's interface, then loopback.
// `loopback_usable` is false for transports that cannot run over lo (verbs):
// they skip the loopback rules. `rank` only labels errors and the log line.
struct ChosenAddress {
  SocketAddress address;
  std::string reason;  // "the store is on loopback", for the info log
};
ChosenAddress choose_local_address(const std::string& interface, const std::string& hostname,
                                   const JobPlacement& placement, bool loopback_usable, int rank);

// A non-blocking listening socket bound to `address` with a kernel-chosen
// port; `address` is updated to the bound address. Throws IoError.
Fd open_listener(SocketAddress& address, int rank);

// TCP_NODELAY, so small messages leave at once instead of waiting for Nagle.
void set_no_delay(int fd);

}  // namespace chorus::transport::tcp
