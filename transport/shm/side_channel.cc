// The side channel's messages and socket plumbing.
#include "transport/shm/side_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "base/little_endian.h"
#include "base/log.h"
#include "transport/abort_report.h"

namespace chorus::transport::shm {
namespace {

constexpr uint32_t kSideChannelMagic = 0x44495343;  // "CSID"
// 2: the handshake proves the job secret.
// 3: probes carry a group and their answers a position (transport/positions.h).
constexpr uint16_t kSideChannelVersion = 3;
constexpr size_t kHeaderBytes = 8;

// A side-channel message of `kind`: its header, then what the caller appends.
LittleEndianWriter side_message(SideKind kind) {
  LittleEndianWriter out;
  out.number(kSideChannelMagic, 4).number(kSideChannelVersion, 2).number(static_cast<uint16_t>(kind), 2);
  return out;
}

// Reads a side-channel message's body, after the header check_side_message checked.
LittleEndianReader body_of(std::span<const std::byte> message) { return LittleEndianReader(message, kHeaderBytes); }

constexpr std::chrono::milliseconds kRefusedMeansGone{1000};

sockaddr_un abstract_address(const std::string& name, socklen_t& length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const size_t bytes = std::min(name.size(), sizeof(address.sun_path));
  std::memcpy(address.sun_path, name.data(), bytes);
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + bytes);
  return address;
}

}  // namespace

std::vector<std::byte> encode_challenge(const Challenge& challenge) {
  LittleEndianWriter out = side_message(SideKind::challenge);
  out.raw(challenge);
  return out.take();
}

std::vector<std::byte> encode_hello(const Hello& hello) {
  LittleEndianWriter out = side_message(SideKind::hello);
  out.number(hello.listener_nonce, 8)
      .number(static_cast<uint32_t>(hello.dialer_rank), 4)
      .number(static_cast<uint32_t>(hello.listener_rank), 4)
      .number(hello.probe_address, 8)
      .number(hello.probe_value, 8)
      .raw(hello.dialer_challenge);
  return out.take();
}

void sign_side_message(std::vector<std::byte>& message, const JobSecret& secret, std::string_view purpose,
                       std::initializer_list<std::span<const std::byte>> context) {
  std::vector<std::span<const std::byte>> parts(context);
  parts.push_back(message);
  const Proof proof = secret.prove(purpose, parts);
  message.insert(message.end(), proof.begin(), proof.end());
}

std::string verify_side_message(std::span<const std::byte> message, const JobSecret& secret,
                                std::string_view purpose, std::initializer_list<std::span<const std::byte>> context,
                                std::span<const std::byte>& body) {
  if (message.size() < kHeaderBytes + kProofBytes) return cat("a message of ", message.size(), " bytes");
  body = message.first(message.size() - kProofBytes);
  const std::span<const std::byte> proof = message.last(kProofBytes);
  std::vector<std::span<const std::byte>> parts(context);
  parts.push_back(body);
  if (!secret.verify(proof, purpose, parts))
    return secret.configured() ? "a proof that does not match this job's secret (CHORUS_SECRET)"
                               : "a proof that does not match (the peer has a job secret, this rank has none)";
  return "";
}

std::vector<std::byte> encode_ack(const Ack& ack) {
  LittleEndianWriter out = side_message(SideKind::ack);
  out.number(static_cast<uint32_t>(ack.listener_rank), 4)
      .number(static_cast<uint32_t>(ack.dialer_rank), 4)
      .number(ack.ring_bytes, 8)
      .number(ack.probe_address, 8)
      .number(ack.probe_value, 8)
      .number(ack.listener_pulls, 1);
  return out.take();
}

std::vector<std::byte> encode_confirm(const Confirm& confirm) {
  LittleEndianWriter out = side_message(SideKind::confirm);
  out.number(confirm.dialer_pulls, 1);
  return out.take();
}

std::vector<std::byte> encode_goodbye() { return side_message(SideKind::goodbye).take(); }

std::vector<std::byte> encode_probe(SideKind kind, const ProbeNote& note) {
  LittleEndianWriter out = side_message(kind);
  out.number(note.number, 8).number(note.group, 8).number(note.position, 8);
  return out.take();
}

std::string decode_probe(std::span<const std::byte> message, ProbeNote& note) {
  LittleEndianReader in = body_of(message);
  if (!in.number(note.number, 8) || !in.number(note.group, 8) || !in.number(note.position, 8) || in.left() != 0)
    return cat("a probe of ", message.size(), " bytes");
  return "";
}

std::vector<std::byte> encode_abort(const AbortNote& note) {
  LittleEndianWriter out = side_message(SideKind::abort);
  out.number(note.error_class, 8).number(note.blamed_rank, 8);
  out.text(std::string_view(note.text).substr(0, kMaxAbortTextBytes));
  return out.take();
}

std::string check_side_message(std::span<const std::byte> message, SideKind& kind) {
  if (message.size() < kHeaderBytes) return cat("a message of ", message.size(), " bytes");
  const uint64_t magic = load_le(message.data(), 4);
  const uint64_t version = load_le(message.data() + 4, 2);
  const uint64_t raw_kind = load_le(message.data() + 6, 2);
  if (magic != kSideChannelMagic) return cat("bad magic 0x", std::hex, magic);
  if (version != kSideChannelVersion) return cat("version ", version, ", this rank speaks ", kSideChannelVersion);
  if (raw_kind < static_cast<uint64_t>(SideKind::hello) || raw_kind > static_cast<uint64_t>(SideKind::probe_answer))
    return cat("unknown kind ", raw_kind);
  kind = static_cast<SideKind>(raw_kind);
  return "";
}

std::string decode_hello(std::span<const std::byte> message, Hello& hello) {
  LittleEndianReader in = body_of(message);
  uint64_t dialer = 0, listener = 0;
  if (!in.number(hello.listener_nonce, 8) || !in.number(dialer, 4) || !in.number(listener, 4) ||
      !in.number(hello.probe_address, 8) || !in.number(hello.probe_value, 8) || !in.raw(hello.dialer_challenge) ||
      in.left() != 0)
    return cat("a hello of ", message.size(), " bytes");
  hello.dialer_rank = static_cast<int32_t>(dialer);
  hello.listener_rank = static_cast<int32_t>(listener);
  return "";
}

std::string decode_challenge(std::span<const std::byte> message, Challenge& challenge) {
  LittleEndianReader in = body_of(message);
  if (!in.raw(challenge) || in.left() != 0) return cat("a challenge of ", message.size(), " bytes");
  return "";
}

std::string decode_ack(std::span<const std::byte> message, Ack& ack) {
  LittleEndianReader in = body_of(message);
  uint64_t listener = 0, dialer = 0, pulls = 0;
  if (!in.number(listener, 4) || !in.number(dialer, 4) || !in.number(ack.ring_bytes, 8) ||
      !in.number(ack.probe_address, 8) || !in.number(ack.probe_value, 8) || !in.number(pulls, 1) ||
      in.left() != 0 || pulls > 1)
    return cat("an ack of ", message.size(), " bytes");
  ack.listener_rank = static_cast<int32_t>(listener);
  ack.dialer_rank = static_cast<int32_t>(dialer);
  ack.listener_pulls = static_cast<uint8_t>(pulls);
  return "";
}

std::string decode_confirm(std::span<const std::byte> message, Confirm& confirm) {
  LittleEndianReader in = body_of(message);
  uint64_t pulls = 0;
  if (!in.number(pulls, 1) || in.left() != 0 || pulls > 1) return cat("a confirm of ", message.size(), " bytes");
  confirm.dialer_pulls = static_cast<uint8_t>(pulls);
  return "";
}

std::string decode_abort(std::span<const std::byte> message, AbortNote& note) {
  LittleEndianReader in = body_of(message);
  if (!in.number(note.error_class, 8) || !in.number(note.blamed_rank, 8) || in.left() > kMaxAbortTextBytes)
    return cat("an abort of ", message.size(), " bytes");
  const auto text = in.rest();
  note.text.assign(reinterpret_cast<const char*>(text.data()), text.size());
  return "";
}

Fd listen_on(const std::string& abstract_name, int rank) {
  Fd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) throw IoError(cat("rank ", rank, ": cannot create a unix socket: ", errno_text(errno)));
  socklen_t length = 0;
  const sockaddr_un address = abstract_address(abstract_name, length);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0)
    throw IoError(cat("rank ", rank, ": cannot bind the shared-memory listener: ", errno_text(errno)));
  if (::listen(fd.get(), SOMAXCONN) != 0)
    throw IoError(cat("rank ", rank, ": cannot listen for shared-memory peers: ", errno_text(errno)));
  return fd;
}

Fd dial(const std::string& abstract_name, int rank, int peer_rank, Deadline deadline) {
  socklen_t length = 0;
  const sockaddr_un address = abstract_address(abstract_name, length);
  int last_error = 0;
  auto backoff = std::chrono::milliseconds(1);
  const auto started = Clock::now();
  while (true) {
    Fd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (!fd.valid()) throw IoError(cat("rank ", rank, ": cannot create a unix socket: ", errno_text(errno)));
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), length) == 0) return fd;
    last_error = errno;
    // Refused: nobody listens there (yet, or any more: a dead peer). A full
    // backlog says EAGAIN. Both are worth another try until the deadline.
    if (last_error != ECONNREFUSED && last_error != EAGAIN && last_error != ENOENT && last_error != EINTR)
      break;
    // The name was published after its listener opened: a refusal that
    // lasts means the rank is gone (exited, or closed its Context), which on
    // demand (transport/mesh.h) a dial may find long after connect.
    if (last_error != EAGAIN && last_error != EINTR && Clock::now() - started >= kRefusedMeansGone)
      throw PeerLostError(cat("rank ", rank, ": peer rank ", peer_rank, " is gone: its shared-memory listener has "
                              "refused connections for ", kRefusedMeansGone.count(),
                              " ms (the process exited or closed its Context)"),
                          peer_rank);
    if (deadline.expired()) {
      throw TimeoutError(cat("rank ", rank, ": timed out connecting to the shared-memory listener of peer rank ",
                             peer_rank, " (", errno_text(last_error), "): has it started, and is it alive?"));
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
  }
  throw IoError(cat("rank ", rank, ": cannot connect to the shared-memory listener of peer rank ", peer_rank, ": ",
                    errno_text(last_error)),
                peer_rank);
}

KnockAnswer knock_listener(const std::string& abstract_name, std::chrono::milliseconds window) {
  socklen_t length = 0;
  const sockaddr_un address = abstract_address(abstract_name, length);
  return knock(reinterpret_cast<const sockaddr*>(&address), length, SOCK_SEQPACKET, window);
}

bool peer_credentials(int fd, Credentials& credentials) {
  ucred cred{};
  socklen_t length = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) return false;
  credentials.pid = cred.pid;
  credentials.uid = cred.uid;
  return true;
}

int send_side(int fd, std::span<const std::byte> message, std::span<const int> fds) {
  iovec iov{const_cast<std::byte*>(message.data()), message.size()};
  msghdr header{};
  header.msg_iov = &iov;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  if (!fds.empty()) {
    if (fds.size() > 4) return EINVAL;
    header.msg_control = control;
    header.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* entry = CMSG_FIRSTHDR(&header);
    entry->cmsg_level = SOL_SOCKET;
    entry->cmsg_type = SCM_RIGHTS;
    entry->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(entry), fds.data(), sizeof(int) * fds.size());
  }
  while (true) {
    const ssize_t sent = ::sendmsg(fd, &header, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent == static_cast<ssize_t>(message.size())) return 0;
    if (sent >= 0) return EMSGSIZE;
    if (errno != EINTR) return errno;
  }
}

ssize_t receive_side(int fd, std::vector<std::byte>& message, std::vector<Fd>& fds, size_t max_fds) {
  message.resize(kMaxSideMessage);
  iovec iov{message.data(), message.size()};
  msghdr header{};
  header.msg_iov = &iov;
  header.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)] = {};
  header.msg_control = control;
  header.msg_controllen = sizeof(control);
  ssize_t received;
  do {
    received = ::recvmsg(fd, &header, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  } while (received < 0 && errno == EINTR);
  fds.clear();
  for (cmsghdr* entry = CMSG_FIRSTHDR(&header); entry; entry = CMSG_NXTHDR(&header, entry)) {
    if (entry->cmsg_level != SOL_SOCKET || entry->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (entry->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int passed = -1;
      std::memcpy(&passed, CMSG_DATA(entry) + i * sizeof(int), sizeof(int));
      // Beyond what this message may carry: closed at once.
      if (fds.size() < max_fds) fds.emplace_back(passed);
      else ::close(passed);
    }
  }
  if (received < 0) return -1;
  const bool truncated = (header.msg_flags & MSG_TRUNC) != 0;
  message.resize(static_cast<size_t>(received));
  if (truncated) message.clear();  // too long to be ours: checked as malformed
  return truncated && received == 0 ? 1 : received;
}

bool wait_readable(int fd, Deadline deadline) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.at() - Clock::now()).count();
    if (left <= 0) return false;
    pollfd entry{fd, POLLIN, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(std::min<long long>(left, 60'000)));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return true;  // let the read report it
  }
}

}  // namespace chorus::transport::shm
