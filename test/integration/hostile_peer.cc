// Finding a process's listening ports through /proc and sending them bytes no
// rank of the job would send.
#include "test/integration/hostile_peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/un.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace chorus::integration {
namespace {

std::set<uint64_t> socket_inodes(pid_t pid) {
  std::set<uint64_t> inodes;
  std::error_code error;
  const std::filesystem::path fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& entry : std::filesystem::directory_iterator(fd_dir, error)) {
    std::error_code link_error;
    const std::string target = std::filesystem::read_symlink(entry.path(), link_error).string();
    // Targets of sockets read "socket:[12345]".
    if (!link_error && target.rfind("socket:[", 0) == 0) inodes.insert(std::stoull(target.substr(8)));
  }
  return inodes;
}

// /proc/net/tcp prints each 32-bit word of an address as the hex of its
// in-memory value, so parsing the hex back gives the bytes as stored.
void parse_address_words(const std::string& hex, void* out) {
  auto* words = static_cast<uint32_t*>(out);
  for (size_t i = 0; i * 8 < hex.size(); ++i) words[i] = static_cast<uint32_t>(std::stoul(hex.substr(i * 8, 8), nullptr, 16));
}

void add_listeners(const char* table, bool ipv6, const std::set<uint64_t>& inodes,
                   std::vector<ListeningEndpoint>& endpoints) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // column titles
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
    uint64_t inode = 0;
    if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode))
      continue;
    if (state != "0A" || !inodes.count(inode)) continue;  // 0A = TCP_LISTEN
    const size_t colon = local.find(':');
    const auto port = static_cast<uint16_t>(std::stoul(local.substr(colon + 1), nullptr, 16));
    ListeningEndpoint endpoint;
    char text[INET6_ADDRSTRLEN] = {};
    if (ipv6) {
      auto* address = reinterpret_cast<sockaddr_in6*>(&endpoint.address);
      address->sin6_family = AF_INET6;
      address->sin6_port = htons(port);
      parse_address_words(local.substr(0, colon), &address->sin6_addr);
      if (IN6_IS_ADDR_UNSPECIFIED(&address->sin6_addr)) address->sin6_addr = in6addr_loopback;
      endpoint.length = sizeof(sockaddr_in6);
      inet_ntop(AF_INET6, &address->sin6_addr, text, sizeof(text));
      // Built by a stream: g++ 12 misreports "[" + string as an overlapping memcpy.
      std::ostringstream bracketed;
      bracketed << '[' << text << "]:" << port;
      endpoint.text = bracketed.str();
    } else {
      auto* address = reinterpret_cast<sockaddr_in*>(&endpoint.address);
      address->sin_family = AF_INET;
      address->sin_port = htons(port);
      parse_address_words(local.substr(0, colon), &address->sin_addr);
      if (address->sin_addr.s_addr == htonl(INADDR_ANY)) address->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      endpoint.length = sizeof(sockaddr_in);
      inet_ntop(AF_INET, &address->sin_addr, text, sizeof(text));
      endpoint.text = std::string(text) + ":" + std::to_string(port);
    }
    endpoints.push_back(endpoint);
  }
}

// Listening unix sockets: /proc/net/unix lines are "Num RefCount Protocol
// Flags Type St Inode Path"; flag 0x10000 (__SO_ACCEPTCON) marks a listener
// and a path starting with '@' an abstract name.
void add_unix_listeners(const std::set<uint64_t>& inodes, std::vector<ListeningEndpoint>& endpoints) {
  std::ifstream in("/proc/net/unix");
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, references, protocol, flags, type, state, path;
    uint64_t inode = 0;
    if (!(fields >> slot >> references >> protocol >> flags >> type >> state >> inode >> path)) continue;
    if (!inodes.count(inode) || (std::stoul(flags, nullptr, 16) & 0x10000) == 0 || path.empty() || path[0] != '@')
      continue;
    ListeningEndpoint endpoint;
    auto* address = reinterpret_cast<sockaddr_un*>(&endpoint.address);
    address->sun_family = AF_UNIX;
    std::memcpy(address->sun_path + 1, path.data() + 1, std::min(path.size() - 1, sizeof(address->sun_path) - 1));
    endpoint.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
    endpoint.type = static_cast<int>(std::stoul(type, nullptr, 16));
    endpoint.text = path;
    endpoints.push_back(endpoint);
  }
}

void put_le(std::vector<uint8_t>& out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

// The wire layouts of transport/tcp and transport/shm as written today
// (tcp/handshake.cc, tcp/frame.h, shm/side_channel.cc), rebuilt here by
// hand: the test plays an outsider that copied the format, and if the format
// changes these stay hostile bytes all the same.
std::vector<uint8_t> forged_hello(uint64_t nonce, int dialer_rank, int listener_rank) {
  std::vector<uint8_t> hello;
  put_le(hello, 0x53484843, 4);  // "CHHS"
  put_le(hello, 1, 2);           // version
  put_le(hello, 0, 2);
  put_le(hello, nonce, 8);
  put_le(hello, static_cast<uint32_t>(dialer_rank), 4);
  put_le(hello, static_cast<uint32_t>(listener_rank), 4);
  return hello;
}

std::vector<uint8_t> forged_frame_header(uint16_t kind, uint64_t tag, uint64_t signature, uint64_t payload_bytes) {
  std::vector<uint8_t> header;
  put_le(header, 0x46524843, 4);  // "CHRF"
  put_le(header, 2, 2);
  put_le(header, kind, 2);
  put_le(header, tag, 8);
  put_le(header, signature, 8);
  put_le(header, payload_bytes, 8);
  put_le(header, 0, 8);  // group
  return header;
}

// A shared-memory hello with a guessed nonce (the real one also carries an
// eventfd; this one arrives without, or with one of the forger's own).
std::vector<uint8_t> forged_shm_hello(uint64_t nonce, int dialer_rank, int listener_rank) {
  std::vector<uint8_t> hello;
  put_le(hello, 0x44495343, 4);  // "CSID"
  put_le(hello, 1, 2);
  put_le(hello, 1, 2);           // hello
  put_le(hello, nonce, 8);
  put_le(hello, static_cast<uint32_t>(dialer_rank), 4);
  put_le(hello, static_cast<uint32_t>(listener_rank), 4);
  put_le(hello, 0x1000, 8);
  put_le(hello, nonce, 8);
  return hello;
}

std::vector<uint8_t> forged_shm_abort(const std::string& text) {
  std::vector<uint8_t> abort;
  put_le(abort, 0x44495343, 4);
  put_le(abort, 1, 2);
  put_le(abort, 5, 2);  // abort
  put_le(abort, 5, 8);
  put_le(abort, 0, 8);
  abort.insert(abort.end(), text.begin(), text.end());
  return abort;
}

std::vector<uint8_t> random_bytes(size_t count, std::mt19937_64& random) {
  std::vector<uint8_t> bytes(count);
  for (uint8_t& byte : bytes) byte = static_cast<uint8_t>(random());
  return bytes;
}

void append(std::vector<uint8_t>& out, const std::vector<uint8_t>& more) { out.insert(out.end(), more.begin(), more.end()); }

int connect_to(const ListeningEndpoint& target) {
  int fd = ::socket(target.address.ss_family, target.type | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  // A rank that stops reading must not stall the attacker (and so the test).
  timeval limit{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&target.address), target.length) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Errors are expected (the rank may hang up on us at any byte) and ignored.
void send_all(int fd, const std::vector<uint8_t>& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

constexpr int kKinds = 8;

}  // namespace

std::vector<ListeningEndpoint> listening_endpoints(pid_t pid) {
  const std::set<uint64_t> inodes = socket_inodes(pid);
  std::vector<ListeningEndpoint> endpoints;
  add_listeners("/proc/net/tcp", false, inodes, endpoints);
  add_listeners("/proc/net/tcp6", true, inodes, endpoints);
  add_unix_listeners(inodes, endpoints);
  return endpoints;
}

int attack_kinds() { return kKinds; }

namespace {

// One message (the listener reads whole messages), optionally with a descriptor.
void send_message(int fd, const std::vector<uint8_t>& bytes, int passed_fd = -1) {
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  msghdr header{};
  header.msg_iov = &iov;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (passed_fd >= 0) {
    header.msg_control = control;
    header.msg_controllen = sizeof(control);
    cmsghdr* entry = CMSG_FIRSTHDR(&header);
    entry->cmsg_level = SOL_SOCKET;
    entry->cmsg_type = SCM_RIGHTS;
    entry->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(entry), &passed_fd, sizeof(int));
  }
  [[maybe_unused]] ssize_t sent = ::sendmsg(fd, &header, MSG_NOSIGNAL);
}

AttackOutcome attack_shared_memory_listener(int fd, int kind, int dialer, std::mt19937_64& random) {
  switch (kind % kKinds) {
    case 0:  // connect and hang up
      break;
    case 1:  // noise
      send_message(fd, random_bytes(4096, random));
      break;
    case 2:  // a hello with a guessed nonce and no doorbell
      send_message(fd, forged_shm_hello(random(), dialer, 0));
      break;
    case 3: {  // a plausible hello (guessed nonce, a real eventfd), then noise
      const int doorbell = ::eventfd(0, EFD_CLOEXEC);
      send_message(fd, forged_shm_hello(random(), dialer, 0), doorbell);
      if (doorbell >= 0) ::close(doorbell);
      send_message(fd, random_bytes(64, random));
      break;
    }
    case 4:  // an abort with no handshake at all
      send_message(fd, forged_shm_abort("forged abort from the hostile-bytes test"));
      break;
    case 5:  // a message too long to be a handshake
      send_message(fd, random_bytes(size_t{200} << 10, random));
      break;
    case 6:  // a hello for a rank that never dials this one
      send_message(fd, forged_shm_hello(random(), 0, 0));
      break;
    case 7:  // half a hello, then silence with the connection left open
    {
      std::vector<uint8_t> half = forged_shm_hello(random(), dialer, 0);
      half.resize(half.size() / 2);
      send_message(fd, half);
      return {true, fd};
    }
  }
  ::close(fd);
  return {true, -1};
}

}  // namespace

AttackOutcome attack_once(const ListeningEndpoint& target, int kind, int job_size, std::mt19937_64& random) {
  const int fd = connect_to(target);
  if (fd < 0) return {};
  const int dialer = job_size - 1;  // the rank that dials everyone: the most plausible forgery
  if (target.type == SOCK_SEQPACKET) return attack_shared_memory_listener(fd, kind, dialer, random);
  std::vector<uint8_t> bytes;
  switch (kind % kKinds) {
    case 0:  // connect and hang up
      break;
    case 1:  // noise
      bytes = random_bytes(4096, random);
      break;
    case 2:  // a well-formed hello with a guessed nonce, then a data frame claiming 1 TiB
      bytes = forged_hello(random(), dialer, 0);
      append(bytes, forged_frame_header(1, random(), random(), uint64_t{1} << 40));
      append(bytes, random_bytes(64, random));
      break;
    case 3:  // a forged abort frame with no handshake at all
      bytes = forged_frame_header(2, 0, 0, 24);
      append(bytes, std::vector<uint8_t>(24, 'x'));
      break;
    case 4: {  // a hello with a guessed nonce, then an abort trying to end the job
      bytes = forged_hello(random(), dialer, 0);
      const std::string text = "forged abort from the hostile-bytes test";
      append(bytes, forged_frame_header(2, 0, 0, text.size()));
      bytes.insert(bytes.end(), text.begin(), text.end());
      break;
    }
    case 5:  // a lot of noise
      bytes = random_bytes(size_t{1} << 20, random);
      break;
    case 6:  // a data frame header claiming a small plausible message, no handshake
      bytes = forged_frame_header(1, 1, random(), 16);
      append(bytes, random_bytes(16, random));
      break;
    case 7:  // half a hello, then silence with the connection left open
      bytes = forged_hello(random(), dialer, 0);
      bytes.resize(bytes.size() / 2);
      send_all(fd, bytes);
      return {true, fd};
  }
  send_all(fd, bytes);
  ::close(fd);
  return {true, -1};
}

}  // namespace chorus::integration
