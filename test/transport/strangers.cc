// Each transport's listener as a stranger sees it (strangers.h).
#include "test/transport/strangers.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "transport/file_descriptor.h"
#if CHORUS_HAVE_CUDA
#include "transport/cuda_ipc/address.h"
#endif
#include "transport/shm/address.h"
#include "transport/shm/side_channel.h"
#include "transport/tcp/address.h"
#include "transport/tcp/frame.h"
#include "transport/tcp/handshake.h"

namespace chorus::transport::testing {
namespace {

using integration::ListeningEndpoint;

void send_ignoring_errors(int fd, std::span<const std::byte> bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

// ---------------------------------------------------------------- tcp: a port in the published address

std::optional<ListeningEndpoint> tcp_listener(std::span<const std::byte> address, int owner) {
  const tcp::ListenerAddress listener = tcp::decode_address(address, -1, owner);
  ListeningEndpoint endpoint;
  std::memcpy(&endpoint.address, listener.socket.get(), listener.socket.length());
  endpoint.length = listener.socket.length();
  endpoint.type = SOCK_STREAM;
  endpoint.text = listener.socket.to_string();
  return endpoint;
}

// Reads exactly out.size() bytes within two seconds; false if they do not come.
bool receive_within(int fd, std::span<std::byte> out) {
  timeval two_seconds{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &two_seconds, sizeof(two_seconds));
  size_t received = 0;
  while (received < out.size()) {
    const ssize_t n = ::recv(fd, out.data() + received, out.size() - received, 0);
    if (n <= 0) return false;
    received += static_cast<size_t>(n);
  }
  return true;
}

// The hello of transport/tcp/handshake.cc, stream 0 of 1.
Challenge tcp_hello(int fd, std::span<const std::byte> address, int owner, const Forgery& forgery) {
  const tcp::ListenerAddress listener = tcp::decode_address(address, -1, owner);
  tcp::ChallengeMessage challenge_bytes{};
  Challenge challenge{};
  if (!receive_within(fd, challenge_bytes) || !tcp::decode_challenge(challenge_bytes, challenge).empty())
    return challenge;
  tcp::Hello hello;
  hello.listener_nonce = forgery.right_nonce ? listener.nonce : listener.nonce ^ 1;
  hello.dialer_rank = forgery.dialer;
  hello.listener_rank = owner;
  hello.stream = 0;
  hello.streams = 1;
  hello.dialer_challenge = fresh_challenge();
  send_ignoring_errors(fd, tcp::encode_hello(hello, forgery.replayed_challenge.value_or(challenge), forgery.secret));
  return challenge;
}

// ---------------------------------------------------------------- shm: an abstract unix socket

std::optional<ListeningEndpoint> shm_listener(std::span<const std::byte> address, int owner) {
  const std::string name = shm::decode_address(address, -1, owner).socket_name();
  ListeningEndpoint endpoint;
  auto* unix_address = reinterpret_cast<sockaddr_un*>(&endpoint.address);
  unix_address->sun_family = AF_UNIX;
  const size_t bytes = std::min(name.size(), sizeof(unix_address->sun_path));
  std::memcpy(unix_address->sun_path, name.data(), bytes);
  endpoint.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + bytes);
  endpoint.type = SOCK_SEQPACKET;
  endpoint.text = name;
  endpoint.text[0] = '@';  // as /proc/net/unix prints an abstract name
  return endpoint;
}

// The hello of transport/shm/engine.cc with a doorbell of our own; when
// the listener answers with its ack, the confirm too (a duplicate of a
// connected rank is refused only then).
Challenge shm_hello(int fd, std::span<const std::byte> address, int owner, const Forgery& forgery) {
  const shm::ShmAddress listener = shm::decode_address(address, -1, owner);
  std::vector<std::byte> message;
  std::vector<Fd> fds;
  Challenge challenge{};
  shm::SideKind kind{};
  if (!shm::wait_readable(fd, Deadline::after(std::chrono::seconds(2))) ||
      shm::receive_side(fd, message, fds, 0) <= 0 || !shm::check_side_message(message, kind).empty() ||
      kind != shm::SideKind::challenge || !shm::decode_challenge(message, challenge).empty())
    return challenge;
  shm::Hello hello;
  hello.listener_nonce = forgery.right_nonce ? listener.nonce : listener.nonce ^ 1;
  hello.dialer_rank = forgery.dialer;
  hello.listener_rank = owner;
  hello.dialer_challenge = fresh_challenge();
  std::vector<std::byte> hello_message = shm::encode_hello(hello);
  shm::sign_side_message(hello_message, forgery.secret, shm::kShmHelloPurpose,
                         {forgery.replayed_challenge.value_or(challenge)});
  const Fd doorbell(::eventfd(0, EFD_CLOEXEC));
  const int passed = doorbell.get();
  if (shm::send_side(fd, hello_message, std::span<const int>(&passed, 1)) != 0) return challenge;
  if (!shm::wait_readable(fd, Deadline::after(std::chrono::seconds(2)))) return challenge;
  if (shm::receive_side(fd, message, fds, 2) <= 0) return challenge;
  shm::send_side(fd, shm::encode_confirm({}));
  return challenge;
}

#if CHORUS_HAVE_CUDA
// cuda_ipc admits connections through the shm listener it wraps.
std::optional<ListeningEndpoint> cuda_ipc_listener(std::span<const std::byte> address, int owner) {
  const auto inner = cuda_ipc::inner_address(address);
  return inner ? shm_listener(*inner, owner) : std::nullopt;
}

Challenge cuda_ipc_hello(int fd, std::span<const std::byte> address, int owner, const Forgery& forgery) {
  const auto inner = cuda_ipc::inner_address(address);
  return inner ? shm_hello(fd, *inner, owner, forgery) : Challenge{};
}
#endif

const StrangerHooks hooks[] = {
    {"tcp", tcp_listener, tcp_hello},
    {"shm", shm_listener, shm_hello},
#if CHORUS_HAVE_CUDA
    {"cuda_ipc", cuda_ipc_listener, cuda_ipc_hello},
#endif
    // Its listener speaks rdma_cm, not a socket: test/ibverbs/ sends it
    // strangers' connection requests and proofs instead.
    {"ibverbs", nullptr, nullptr},
};

}  // namespace

const StrangerHooks* stranger_hooks(std::string_view transport) {
  for (const StrangerHooks& entry : hooks)
    if (entry.transport == transport) return &entry;
  return nullptr;
}

int connect_stranger(const ListeningEndpoint& endpoint) {
  const int fd = ::socket(endpoint.address.ss_family, endpoint.type | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&endpoint.address), endpoint.length) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool closed_by_listener(int fd, std::chrono::milliseconds limit) {
  const auto give_up = Clock::now() + limit;
  char buffer[4096];
  while (Clock::now() < give_up) {
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(give_up - Clock::now()).count();
    if (left <= 0) break;  // a zero timeout would mean none
    timeval timeout{static_cast<time_t>(left / 1000000), static_cast<suseconds_t>(left % 1000000)};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    if (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return false;
  }
  return false;
}

}  // namespace chorus::transport::testing
