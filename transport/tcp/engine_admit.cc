// The TCP device's listener side: accepting dialers, their handshake (the
// challenge, the hello proving the job secret, TLS where configured:
// handshake.h), admitting them for connect() or rejecting them, and the
// handshakes that expire.
#include "transport/tcp/engine.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>

#include "base/error.h"
#include "base/socket_owner.h"
#include "transport/epoll_token.h"
#include "transport/tcp/abort_frame.h"

namespace chorus::transport::tcp {

void Engine::accept_all() {
  while (true) {
    sockaddr_storage from{};
    socklen_t length = sizeof(from);
    int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&from), &length,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        CHORUS_LOG(warn, rank(), "tcp: accept on ", listen_address_.to_string(), " failed: ", errno_text(errno));
      return;
    }
    Fd accepted(fd);
    SocketAddress peer(reinterpret_cast<sockaddr*>(&from), length);
    if (failed()) continue;  // dropping it tells the dialer at once
    set_no_delay(fd);
    auto incoming = std::make_unique<IncomingHandshake>(std::move(accepted), peer, Clock::now() + kHandshakeTimeout);
    // The challenge goes first: a dialer proves the secret over it. A fresh
    // socket's buffer always has room for it.
    const ChallengeMessage challenge = encode_challenge(incoming->challenge());
    if (::send(fd, challenge.data(), challenge.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
        static_cast<ssize_t>(challenge.size())) {
      CHORUS_LOG(debug, rank(), "tcp: cannot send a handshake challenge to ", peer.to_string(), ": ",
                 errno_text(errno));
      continue;
    }
    uint64_t id = next_handshake_id_++;
    if (!loop_.watch(fd, epoll_token(TokenKind::handshake, id))) continue;
    handshakes_[id] = std::move(incoming);
  }
}

void Engine::on_handshake_readable(uint64_t id) {
  auto found = handshakes_.find(id);
  if (found == handshakes_.end()) return;
  IncomingHandshake& incoming = *found->second;
  if (incoming.tls_started()) return continue_tls(id, incoming);
  switch (incoming.read_available()) {
    case IncomingHandshake::Status::waiting:
      return;
    case IncomingHandshake::Status::failed:
      return reject_handshake(id, incoming.failure());
    case IncomingHandshake::Status::received:
      break;
  }
  // Without a secret a hello's proof shows only that the dialer speaks
  // chorus; the kernel's word on its user is the job's proof
  // (base/socket_owner.h). Asked at the hello, not at accept: the dialer
  // waits for our answer, so its socket is open (a knock has closed by then).
  if (!options_.secret.configured()) {
    if (std::string why = same_user_refusal(incoming.fd(), "the dialer"); !why.empty())
      return reject_handshake(id, why);
  }
  Hello hello;
  std::string why = check_hello(incoming.bytes(), {nonce_, rank(), size(), options_.streams}, incoming.challenge(),
                                options_.secret, hello);
  if (why.empty()) why = admission_conflict(hello);
  if (!why.empty()) return reject_handshake(id, why);
  auto ack = encode_ack(incoming.bytes(), incoming.challenge(), options_.secret, rank(), hello.dialer_rank,
                        hello.stream);
  // A fresh socket's buffer always has room for the ack; a short write means it is already broken.
  if (::send(incoming.fd(), ack.data(), ack.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(ack.size()))
    return reject_handshake(id, cat("cannot send the handshake reply: ", errno_text(errno)));
  incoming.set_accepted(hello);
  if (options_.tls) return continue_tls(id, incoming);
  admit(id);
}

void Engine::continue_tls(uint64_t id, IncomingHandshake& incoming) {
  uint32_t interest = EPOLLIN;
  switch (incoming.continue_tls(*options_.tls)) {
    case TlsSession::Step::done:
      return admit(id);
    case TlsSession::Step::failed:
      return reject_handshake(id, incoming.failure());
    case TlsSession::Step::want_write:
      interest = EPOLLOUT;
      break;
    case TlsSession::Step::want_read:
      break;
  }
  if (!loop_.rewatch(incoming.fd(), epoll_token(TokenKind::handshake, id), interest))
    reject_handshake(id, cat("epoll_ctl: ", errno_text(errno)));
}

std::string Engine::admission_conflict(const Hello& hello) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_) return "this rank has aborted";
  if (admitted_.count({hello.dialer_rank, hello.stream}) || by_link_[link(hello.dialer_rank, hello.stream)].load())
    return cat("rank ", hello.dialer_rank, " is already connected on stream ", hello.stream);
  return "";
}

void Engine::admit(uint64_t id) {
  IncomingHandshake& incoming = *handshakes_.at(id);
  const Hello& hello = incoming.accepted();
  // Checked again: another connection may have claimed the link while TLS ran.
  if (std::string why = admission_conflict(hello); !why.empty()) return reject_handshake(id, why);
  if (options_.tls && !incoming.send_tls_confirmation())
    return reject_handshake(id, cat("cannot confirm the TLS handshake: ", errno_text(errno)));
  loop_.unwatch(incoming.fd());
  CHORUS_LOG(debug, rank(), "tcp: admitted peer rank ", hello.dialer_rank, " stream ", hello.stream, " from ",
             incoming.from().to_string(), options_.tls ? " (TLS)" : "");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    admitted_[{hello.dialer_rank, hello.stream}] = incoming.release();
  }
  handshakes_.erase(id);
  changed_.notify_all();
}

void Engine::reject_handshake(uint64_t id, const std::string& why) {
  auto found = handshakes_.find(id);
  if (found == handshakes_.end()) return;
  // A dialer that closed before sending a byte is a waiting rank knocking
  // (transport/knock.h) or a port scan: neither is worth a warning.
  if (why.starts_with("closed after 0 "))
    CHORUS_LOG(debug, rank(), "tcp: a connection from ", found->second->from().to_string(), " closed before its hello");
  else if (rejections_.admit(found->second->from().host_string()))
    CHORUS_LOG(warn, rank(), "tcp: dropped an incoming connection from ", found->second->from().to_string(),
               " on ", listen_address_.to_string(), ": ", why);
  else
    CHORUS_LOG(debug, rank(), "tcp: dropped an incoming connection from ", found->second->from().to_string(),
               " on ", listen_address_.to_string(), ": ", why);
  log_rejection_summary();
  if (found->second->tls_started()) {
    const Hello& hello = found->second->accepted();
    std::lock_guard<std::mutex> lock(mutex_);
    tls_refused_[{hello.dialer_rank, hello.stream}] = why;
    changed_.notify_all();
  }
  loop_.unwatch(found->second->fd());
  handshakes_.erase(found);
}

void Engine::log_rejection_summary() {
  if (std::optional<std::string> summary = rejections_.summary())
    CHORUS_LOG(warn, rank(), "tcp: listener ", listen_address_.to_string(), ": ", *summary);
}

void Engine::expire_handshakes() {
  auto now = Clock::now();
  std::vector<uint64_t> expired;
  for (const auto& [id, incoming] : handshakes_)
    if (incoming->give_up_at() <= now) expired.push_back(id);
  for (uint64_t id : expired)
    reject_handshake(id, cat("no complete ", options_.tls ? "hello and TLS handshake" : "hello", " within ",
                             kHandshakeTimeout.count(), " s"));
}

}  // namespace chorus::transport::tcp
