// The shared-memory device's listener side: accepting dialers, their
// handshake (challenge, hello, ack, confirmation: engine.h), and the
// handshakes that expire.
#include "transport/shm/engine.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "base/error.h"
#include "transport/epoll_token.h"
#include "transport/nonce.h"

namespace chorus::transport::shm {

// ---------------------------------------------------------------- admitting dialers

void Engine::accept_all() {
  while (true) {
    const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        CHORUS_LOG(warn, rank(), "shm: accept failed: ", errno_text(errno));
      return;
    }
    Fd accepted(fd);
    if (failed()) continue;  // closing it tells the dialer at once
    auto incoming = std::make_unique<Incoming>();
    // Known from the start, so even a rejection before any hello names the
    // process behind it (the kernel's, not the dialer's word).
    if (!peer_credentials(fd, incoming->credentials)) incoming->credentials = Credentials{};
    // The challenge goes first: the dialer's hello proves the secret over it.
    if (int error = send_side(fd, encode_challenge(incoming->challenge))) {
      CHORUS_LOG(debug, rank(), "shm: cannot send a handshake challenge: ", errno_text(error));
      continue;
    }
    const uint64_t id = next_handshake_id_++;
    if (!loop_.watch(fd, epoll_token(TokenKind::handshake, id))) continue;
    incoming->fd = std::move(accepted);
    incoming->give_up_at = Clock::now() + kHandshakeTimeout;
    handshakes_[id] = std::move(incoming);
  }
}

void Engine::on_handshake_readable(uint64_t id) {
  auto found = handshakes_.find(id);
  if (found == handshakes_.end()) return;
  Incoming& incoming = *found->second;
  std::vector<std::byte> message;
  std::vector<Fd> fds;
  const ssize_t received = receive_side(incoming.fd.get(), message, fds, incoming.hello_done ? 0 : 1);
  if (received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (received == 0 && !incoming.hello_done) {
    // Closed before its hello: a waiting rank knocking (transport/knock.h).
    CHORUS_LOG(debug, rank(), "shm: a connection closed before its hello (a knock)");
    loop_.unwatch(incoming.fd.get());
    handshakes_.erase(found);
    return;
  }
  if (received <= 0) return reject(id, received == 0 ? "the dialer closed the connection" : errno_text(errno));
  SideKind kind{};
  std::string why = check_side_message(message, kind);
  if (why.empty() && !incoming.hello_done) {
    why = kind == SideKind::hello ? on_hello(incoming, message, fds) : "the first message is not a hello";
    if (why.empty()) incoming.hello_done = true;
  } else if (why.empty()) {
    Confirm confirm;
    why = incoming.awaiting_published_pid ? "a message before this rank's ack"
          : kind == SideKind::confirm     ? decode_confirm(message, confirm)
                                          : "the second message is not a confirm";
    if (why.empty()) {
      loop_.unwatch(incoming.fd.get());
      const int dialer = incoming.hello.dialer_rank;
      CHORUS_LOG(debug, rank(), "shm: admitted peer rank ", dialer, " (pid ", incoming.credentials.pid, ")");
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (failure_) {
          why = "this rank has aborted";
        } else if (admitted_.count(dialer) || by_peer_[static_cast<size_t>(dialer)].load()) {
          why = cat("rank ", dialer, " is already connected");
        } else {
          Admitted admitted;
          admitted.side = std::move(incoming.fd);
          admitted.credentials = incoming.credentials;
          admitted.doorbell = std::move(incoming.dialer_doorbell);
          admitted.segment = std::move(incoming.segment);
          admitted.dialer_pulls = confirm.dialer_pulls != 0;
          admitted.listener_pulls = incoming.listener_pulls;
          admitted_[dialer] = std::move(admitted);
        }
      }
      if (why.empty()) {
        handshakes_.erase(found);
        changed_.notify_all();
        return;
      }
    }
  }
  if (!why.empty()) reject(id, why);
}

std::string Engine::on_hello(Incoming& incoming, std::span<const std::byte> message, std::vector<Fd>& fds) {
  Hello& hello = incoming.hello;
  std::span<const std::byte> body;
  // Nothing it claims counts before it proves the secret over our fresh challenge.
  std::string why = verify_side_message(message, options_.secret, kShmHelloPurpose, {incoming.challenge}, body);
  if (why.empty()) why = decode_hello(body, hello);
  if (!why.empty()) return why;
  incoming.hello_message.assign(message.begin(), message.end());
  if (hello.listener_nonce != address_.nonce) return "a hello without this rank's nonce (another job, or a stale one)";
  if (hello.listener_rank != rank()) return cat("a hello for rank ", hello.listener_rank);
  if (hello.dialer_rank <= rank() || hello.dialer_rank >= options_.size)
    return cat("a hello from rank ", hello.dialer_rank, ", which must not dial rank ", rank());
  if (fds.size() != 1) return cat("a hello with ", fds.size(), " descriptors instead of 1");
  if (!peer_credentials(incoming.fd.get(), incoming.credentials)) return cat("no credentials: ", errno_text(errno));
  if (incoming.credentials.uid != address_.uid)
    return cat("a dialer of uid ", incoming.credentials.uid, " (this rank runs as ", address_.uid, ")");
  incoming.dialer_doorbell = std::move(fds[0]);
  if (!published_pid(hello.dialer_rank)) {
    // The dialer saw our address before we saw its: answered once we have.
    incoming.awaiting_published_pid = true;
    return "";
  }
  return answer_hello(incoming);
}

// Nothing of this rank's (its segment, its doorbell) leaves before the
// kernel's word on who dialled (SO_PEERCRED) matches what the claimed rank
// published; connect() checks the same again once admitted.
std::string Engine::answer_hello(Incoming& incoming) {
  incoming.awaiting_published_pid = false;
  const Hello& hello = incoming.hello;
  const std::optional<uint32_t> expected = published_pid(hello.dialer_rank);
  if (!expected || static_cast<uint32_t>(incoming.credentials.pid) != *expected)
    return cat("a dialer of pid ", incoming.credentials.pid, " says it is rank ", hello.dialer_rank,
               ", which published pid ", expected ? std::to_string(*expected) : std::string("nothing"));
  try {
    incoming.segment = Segment::create(options_.ring_bytes, rank());
  } catch (const Error& error) {
    return error.what();
  }
  incoming.listener_pulls = probe(incoming.credentials.pid, hello.probe_address, hello.probe_value);
  Ack ack;
  ack.listener_rank = rank();
  ack.dialer_rank = hello.dialer_rank;
  ack.ring_bytes = options_.ring_bytes;
  ack.probe_address = reinterpret_cast<uint64_t>(&probe_value_);
  ack.probe_value = probe_value_;
  ack.listener_pulls = incoming.listener_pulls ? 1 : 0;
  std::vector<std::byte> ack_message = encode_ack(ack);
  sign_side_message(ack_message, options_.secret, kShmAckPurpose, {incoming.challenge, incoming.hello_message});
  const int passed[2] = {incoming.segment.fd(), loop_.wake_fd()};
  if (int error = send_side(incoming.fd.get(), ack_message, passed))
    return cat("cannot send the ack: ", errno_text(error));
  return "";
}

void Engine::reject(uint64_t id, const std::string& why) {
  auto found = handshakes_.find(id);
  if (found == handshakes_.end()) return;
  const pid_t pid = found->second->credentials.pid;
  if (rejections_.admit(cat("pid ", pid)))
    CHORUS_LOG(warn, rank(), "shm: dropped an incoming shared-memory connection (pid ", pid, "): ", why);
  else
    CHORUS_LOG(debug, rank(), "shm: dropped an incoming shared-memory connection (pid ", pid, "): ", why);
  if (std::optional<std::string> summary = rejections_.summary())
    CHORUS_LOG(warn, rank(), "shm: ", *summary);
  loop_.unwatch(found->second->fd.get());
  handshakes_.erase(found);
}

void Engine::answer_awaiting_hellos() {
  std::vector<std::pair<uint64_t, std::string>> refused;
  for (auto& [id, incoming] : handshakes_) {
    if (!incoming->awaiting_published_pid || !published_pid(incoming->hello.dialer_rank)) continue;
    if (std::string why = answer_hello(*incoming); !why.empty()) refused.emplace_back(id, std::move(why));
  }
  for (const auto& [id, why] : refused) reject(id, why);
}

void Engine::expire_handshakes() {
  const auto now = Clock::now();
  std::vector<uint64_t> expired;
  for (const auto& [id, incoming] : handshakes_)
    if (incoming->give_up_at <= now) expired.push_back(id);
  for (uint64_t id : expired) reject(id, cat("no complete handshake within ", kHandshakeTimeout.count(), " s"));
}

int Engine::wait_timeout_ms() const {
  if (handshakes_.empty()) return -1;
  auto earliest = Clock::time_point::max();
  // A hello waiting for check_peer is looked at again every few ms (check_peer
  // runs on the caller's thread right after the address exchange).
  constexpr auto kPublishedPoll = std::chrono::milliseconds(2);
  for (const auto& [id, incoming] : handshakes_)
    earliest = std::min(earliest, incoming->awaiting_published_pid ? Clock::now() + kPublishedPoll
                                                                    : incoming->give_up_at);
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(earliest - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left + 1, 0, 60'000));
}

}  // namespace chorus::transport::shm
