#include "base/socket_owner.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/log.h"

namespace chorus {
namespace {

// One end of the connection in the form sock_diag keys sockets by.
struct End {
  int family = AF_UNSPEC;
  std::array<uint32_t, 4> address{};  // network order; IPv4 in [0]
  uint16_t port = 0;                  // network order
  bool loopback = false;
};

std::string errno_string(int error) { return std::strerror(error); }

// Reads a socket address; an IPv4 address mapped into IPv6 (a dual-stack
// listener's view of an IPv4 dialer) becomes IPv4, as the kernel keys it.
bool read_end(const sockaddr_storage& storage, End& end) {
  if (storage.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(storage);
    end.family = AF_INET;
    end.address[0] = in.sin_addr.s_addr;
    end.port = in.sin_port;
    end.loopback = (ntohl(in.sin_addr.s_addr) >> 24) == 127;
  } else if (storage.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(storage);
    end.port = in6.sin6_port;
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      end.family = AF_INET;
      std::memcpy(&end.address[0], in6.sin6_addr.s6_addr + 12, 4);
      end.loopback = (ntohl(end.address[0]) >> 24) == 127;
    } else {
      end.family = AF_INET6;
      std::memcpy(end.address.data(), in6.sin6_addr.s6_addr, 16);
      end.loopback = IN6_IS_ADDR_LOOPBACK(&in6.sin6_addr);
    }
  } else {
    return false;
  }
  return true;
}

// A socket whose state only a full socket has carries its owner even before
// accept() gives it a file (inode 0); a time-wait record (TIME_WAIT, or
// FIN_WAIT2 once its process closed it) and a half-open request carry none.
bool owner_known(const inet_diag_msg& message) {
  if (message.idiag_inode != 0) return true;
  switch (message.idiag_state) {
    case TCP_ESTABLISHED:
    case TCP_CLOSE_WAIT:
    case TCP_FIN_WAIT1:
    case TCP_CLOSING:
    case TCP_LAST_ACK:
      return true;
    default:
      return false;
  }
}

// Asks sock_diag for the socket whose source is `source` and destination
// `destination` (one exact lookup, not a dump).
SocketOwner look_up(const End& source, const End& destination) {
  SocketOwner owner;
  const int netlink = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (netlink < 0) {
    owner.error = cat("cannot open a sock_diag netlink socket: ", errno_string(errno));
    return owner;
  }
  struct Request {
    nlmsghdr header;
    inet_diag_req_v2 body;
  } request{};
  request.header.nlmsg_len = sizeof(request);
  request.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  request.header.nlmsg_flags = NLM_F_REQUEST;
  request.header.nlmsg_seq = 1;
  request.body.sdiag_family = static_cast<uint8_t>(source.family);
  request.body.sdiag_protocol = IPPROTO_TCP;
  request.body.idiag_states = ~0u;
  request.body.id.idiag_sport = source.port;
  request.body.id.idiag_dport = destination.port;
  std::memcpy(request.body.id.idiag_src, source.address.data(), sizeof(request.body.id.idiag_src));
  std::memcpy(request.body.id.idiag_dst, destination.address.data(), sizeof(request.body.id.idiag_dst));
  request.body.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  request.body.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  ssize_t sent;
  do {
    sent = ::sendto(netlink, &request, sizeof(request), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel));
  } while (sent < 0 && errno == EINTR);
  if (sent != static_cast<ssize_t>(sizeof(request))) {
    owner.error = cat("sock_diag request failed: ", errno_string(errno));
    ::close(netlink);
    return owner;
  }
  alignas(nlmsghdr) std::array<char, 8192> reply;
  ssize_t received;
  do {
    received = ::recv(netlink, reply.data(), reply.size(), 0);
  } while (received < 0 && errno == EINTR);
  const int receive_error = errno;
  ::close(netlink);
  if (received < 0) {
    owner.error = cat("sock_diag reply failed: ", errno_string(receive_error));
    return owner;
  }
  // NLMSG_OK and NLMSG_NEXT by hand: the macros compare the header's
  // unsigned length with an int, which clang's -Wsign-compare refuses.
  size_t remaining = static_cast<size_t>(received);
  char* at = reply.data();
  while (remaining >= sizeof(nlmsghdr)) {
    auto* header = reinterpret_cast<nlmsghdr*>(at);
    if (header->nlmsg_len < sizeof(nlmsghdr) || header->nlmsg_len > remaining) break;
    const size_t step = std::min<size_t>(NLMSG_ALIGN(header->nlmsg_len), remaining);
    at += step;
    remaining -= step;
    if (header->nlmsg_type == NLMSG_ERROR) {
      const int error = -static_cast<const nlmsgerr*>(NLMSG_DATA(header))->error;
      if (error == ENOENT) {
        owner.where = SocketOwner::Where::not_found;
      } else {
        owner.error = cat("sock_diag: ", errno_string(error));
      }
      return owner;
    }
    if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;
    if (header->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) break;
    const auto& message = *static_cast<const inet_diag_msg*>(NLMSG_DATA(header));
    if (message.id.idiag_sport != source.port || message.id.idiag_dport != destination.port) break;
    if (!owner_known(message)) {
      owner.where = SocketOwner::Where::closed;
      return owner;
    }
    owner.where = SocketOwner::Where::this_host;
    owner.uid = message.idiag_uid;
    return owner;
  }
  owner.error = "sock_diag gave no answer about the socket";
  return owner;
}

std::string user_text(uid_t uid) {
  std::vector<char> buffer(4096);
  passwd entry{};
  passwd* found = nullptr;
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found)
    return cat("uid ", uid, " (", found->pw_name, ")");
  return cat("uid ", uid);
}

}  // namespace

SocketOwner tcp_peer_owner(int fd) {
  SocketOwner owner;
  sockaddr_storage local_storage{}, peer_storage{};
  socklen_t local_length = sizeof(local_storage), peer_length = sizeof(peer_storage);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local_storage), &local_length) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer_storage), &peer_length) != 0) {
    owner.error = cat("cannot read the connection's addresses: ", errno_string(errno));
    return owner;
  }
  End local, peer;
  if (!read_end(local_storage, local) || !read_end(peer_storage, peer) || local.family != peer.family) {
    owner.error = "not a TCP connection over IPv4 or IPv6";
    return owner;
  }
  // The other end's socket has the peer's address as its source.
  owner = look_up(peer, local);
  if (owner.where == SocketOwner::Where::not_found && !peer.loopback) owner.where = SocketOwner::Where::other_host;
  return owner;
}

std::string same_user_refusal(int fd, const std::string& what) {
  const SocketOwner owner = tcp_peer_owner(fd);
  const uid_t mine = ::geteuid();
  const std::string advice = "a job without a job secret admits only processes of its own user on this host; "
                             "set the same CHORUS_SECRET or CHORUS_SECRET_FILE on every rank to admit others";
  switch (owner.where) {
    case SocketOwner::Where::this_host:
      if (owner.uid == mine) return "";
      return cat(what, " is a process of ", user_text(owner.uid), ", and this job runs as ", user_text(mine), ": ",
                 advice);
    case SocketOwner::Where::other_host:
      return "";
    case SocketOwner::Where::closed:
      return cat(what, " closed its socket before its user could be checked (", advice, ")");
    case SocketOwner::Where::not_found:
      return cat(what, " is on this host's loopback, but the kernel has no socket for it, so its user cannot be "
                 "checked (", advice, ")");
    case SocketOwner::Where::unknown:
      break;
  }
  return cat("cannot tell which user ", what, " is: ", owner.error, " (", advice, ")");
}

}  // namespace chorus
