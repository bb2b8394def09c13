// Socket plumbing: descriptor ownership, address printing, and choosing the
// local address a device binds (interface, host name, default route, loopback).
#include "transport/tcp/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <net/route.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace chorus::transport::tcp {

SocketAddress::SocketAddress(const sockaddr* address, socklen_t length) {
  if (length > sizeof(storage_)) length = sizeof(storage_);
  std::memcpy(&storage_, address, length);
  length_ = length;
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return 0;
}

void SocketAddress::set_port(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(port);
}

bool SocketAddress::is_loopback() const {
  if (family() == AF_INET) {
    auto ip = ntohl(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr.s_addr);
    return (ip >> 24) == 127;
  }
  if (family() == AF_INET6) {
    const auto& ip = reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&ip);
  }
  return false;
}

std::string SocketAddress::host_string() const {
  char text[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr, text, sizeof(text));
    return text;
  }
  if (family() == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
    inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text));
    std::string scope = v6->sin6_scope_id ? cat("%", v6->sin6_scope_id) : std::string();
    return cat("[", text, scope, "]");
  }
  return "<no address>";
}

std::string SocketAddress::to_string() const {
  if (family() != AF_INET && family() != AF_INET6) return "<no address>";
  return cat(host_string(), ":", port());
}


namespace {

// Interface names that carry the default route, IPv4 first, from procfs.
std::vector<std::string> default_route_interfaces() {
  std::vector<std::string> names;
  std::ifstream ipv4("/proc/net/route");
  std::string line;
  std::getline(ipv4, line);  // column titles
  while (std::getline(ipv4, line)) {
    std::istringstream fields(line);
    std::string name, destination, gateway;
    unsigned flags = 0;
    if (!(fields >> name >> destination >> gateway >> std::hex >> flags)) continue;
    if (destination == "00000000" && (flags & RTF_UP) && name != "lo") names.push_back(name);
  }
  std::ifstream ipv6("/proc/net/ipv6_route");
  while (std::getline(ipv6, line)) {
    std::istringstream fields(line);
    std::string destination, prefix, source, source_prefix, next_hop, metric, refs, use, name;
    unsigned flags = 0;
    if (!(fields >> destination >> prefix >> source >> source_prefix >> next_hop >> metric >> refs >>
          use >> std::hex >> flags >> name))
      continue;
    bool is_default = destination == std::string(32, '0') && prefix == "00";
    if (is_default && (flags & RTF_UP) && !(flags & RTF_REJECT) && name != "lo") names.push_back(name);
  }
  return names;
}

// The best address of one interface: IPv4, else global IPv6, else link-local
// IPv6 (which needs its scope id to be dialled).
bool interface_address(const std::string& name, SocketAddress& chosen, std::string& available) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  int best_score = 0;
  for (ifaddrs* entry = list; entry; entry = entry->ifa_next) {
    if (!entry->ifa_addr) continue;
    int family = entry->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (available.find(cat(" ", entry->ifa_name, " ")) == std::string::npos)
      available += cat(" ", entry->ifa_name, " ");
    if (name != entry->ifa_name) continue;
    int score = 3;
    socklen_t length = sizeof(sockaddr_in);
    if (family == AF_INET6) {
      length = sizeof(sockaddr_in6);
      const auto& ip = reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr)->sin6_addr;
      score = IN6_IS_ADDR_LINKLOCAL(&ip) ? 1 : 2;
    }
    if (score > best_score) {
      best_score = score;
      chosen = SocketAddress(entry->ifa_addr, length);
    }
  }
  freeifaddrs(list);
  return best_score > 0;
}

SocketAddress address_of_interface(const std::string& name, int rank) {
  SocketAddress address;
  std::string available;
  if (!interface_address(name, address, available))
    throw InvalidArgument(cat("rank ", rank, ": network interface '", name,
                              "' does not exist or has no IP address (interfaces with addresses:",
                              available, ")"));
  address.set_port(0);
  return address;
}

SocketAddress address_of_host(const std::string& host, int rank) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* results = nullptr;
  int status = getaddrinfo(host.c_str(), nullptr, &hints, &results);
  if (status != 0 || !results)
    throw InvalidArgument(cat("rank ", rank, ": cannot resolve host name '", host,
                              "': ", gai_strerror(status)));
  SocketAddress address(results->ai_addr, results->ai_addrlen);
  freeaddrinfo(results);
  address.set_port(0);
  return address;
}

}  // namespace

SocketAddress choose_local_address(const std::string& interface, const std::string& hostname,
                                   int rank) {
  if (!interface.empty()) return address_of_interface(interface, rank);
  if (!hostname.empty()) return address_of_host(hostname, rank);
  for (const std::string& name : default_route_interfaces()) {
    SocketAddress address;
    std::string available;
    if (interface_address(name, address, available)) {
      address.set_port(0);
      CHORUS_LOG(debug, rank, "tcp: using interface ", name, " of the default route");
      return address;
    }
  }
  CHORUS_LOG(info, rank,
             "tcp: no default route found; using loopback 127.0.0.1 (single-host jobs only)");
  sockaddr_in loopback{};
  loopback.sin_family = AF_INET;
  loopback.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return SocketAddress(reinterpret_cast<sockaddr*>(&loopback), sizeof(loopback));
}

Fd open_listener(SocketAddress& address, int rank) {
  Fd fd(::socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid())
    throw IoError(cat("rank ", rank, ": cannot create a listening socket: ", errno_text(errno)));
  int one = 1;
  // A restarted job may reuse a port that still has TIME_WAIT connections.
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (address.family() == AF_INET6) setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (::bind(fd.get(), address.get(), address.length()) != 0)
    throw IoError(cat("rank ", rank, ": cannot bind a listening socket to ", address.to_string(),
                      ": ", errno_text(errno)));
  if (::listen(fd.get(), SOMAXCONN) != 0)
    throw IoError(cat("rank ", rank, ": cannot listen on ", address.to_string(), ": ",
                      errno_text(errno)));
  SocketAddress bound;
  socklen_t length = sizeof(sockaddr_storage);
  if (getsockname(fd.get(), bound.get(), &length) != 0)
    throw IoError(cat("rank ", rank, ": getsockname failed: ", errno_text(errno)));
  address = SocketAddress(bound.get(), length);
  return fd;
}

void set_no_delay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace chorus::transport::tcp
