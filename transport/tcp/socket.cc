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
#include <optional>
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

namespace {

SocketAddress loopback_address() {
  sockaddr_in loopback{};
  loopback.sin_family = AF_INET;
  loopback.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return SocketAddress(reinterpret_cast<sockaddr*>(&loopback), sizeof(loopback));
}

// Whether a store host names this host's loopback by itself. A host name
// that merely resolves to loopback here ("node0" -> 127.0.1.1, as Debian's
// /etc/hosts does) does not count: other hosts may resolve it to a real
// address and dial the store there.
bool names_loopback(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr ipv4{};
  return inet_pton(AF_INET, host.c_str(), &ipv4) == 1 && (ntohl(ipv4.s_addr) >> 24) == 127;
}

// The local address the kernel would send to `host` from: a UDP socket
// "connected" to it sends nothing but has its source address chosen by the
// routing table. Nothing when the host does not resolve or is unroutable.
std::optional<SocketAddress> address_routing_to(const std::string& host) {
  std::string name = host;
  if (name.size() > 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* results = nullptr;
  if (getaddrinfo(name.c_str(), "9", &hints, &results) != 0 || !results) return std::nullopt;
  std::optional<SocketAddress> found;
  for (addrinfo* entry = results; entry && !found; entry = entry->ai_next) {
    Fd probe(::socket(entry->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!probe.valid() || ::connect(probe.get(), entry->ai_addr, entry->ai_addrlen) != 0) continue;
    SocketAddress local;
    socklen_t length = sizeof(sockaddr_storage);
    if (getsockname(probe.get(), local.get(), &length) != 0) continue;
    local = SocketAddress(local.get(), length);
    local.set_port(0);
    found = local;
  }
  freeaddrinfo(results);
  return found;
}

}  // namespace

ChosenAddress choose_local_address(const std::string& interface, const std::string& hostname,
                                   const JobPlacement& placement, bool loopback_usable, int rank) {
  if (!interface.empty()) return {address_of_interface(interface, rank), cat("interface ", interface, " was named")};
  if (!hostname.empty()) return {address_of_host(hostname, rank), cat("host ", hostname, " was named")};
  const std::string& store = placement.store_host;
  if (loopback_usable && !store.empty() && names_loopback(store))
    return {loopback_address(), cat("the store is on this host's loopback (", store, "), so every rank is here")};
  if (loopback_usable && placement.one_host)
    return {loopback_address(), "the launcher says every rank is on this host"};
  if (!store.empty()) {
    if (std::optional<SocketAddress> routed = address_routing_to(store); routed && !routed->is_loopback())
      return {*routed, cat("it is the address that routes to the store's host ", store)};
  }
  for (const std::string& name : default_route_interfaces()) {
    SocketAddress address;
    std::string available;
    if (interface_address(name, address, available)) {
      address.set_port(0);
      return {address, cat("interface ", name, " carries the default route and nothing says where the job's ranks ",
                           "are (set CHORUS_SOCKET_IFNAME to choose)")};
    }
  }
  return {loopback_address(), "no default route was found (single-host jobs only)"};
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
