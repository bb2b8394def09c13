// Both halves of the connection handshake: the dialer's blocking dial with
// retries, and the listener's incremental read of a hello.
#include "transport/tcp/handshake.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/socket_owner.h"
#include "transport/tcp/frame.h"

namespace chorus::transport::tcp {
namespace {

constexpr uint32_t kChallengeMagic = 0x43484843;  // "CHHC"
constexpr uint32_t kHelloMagic = 0x53484843;      // "CHHS"
constexpr uint32_t kAckMagic = 0x4b414843;        // "CHAK"
constexpr uint8_t kAckAccepted = 1;

constexpr std::string_view kHelloPurpose = "chorus tcp hello";
constexpr std::string_view kAckPurpose = "chorus tcp ack";

std::span<const std::byte> hello_fields(const HelloMessage& hello) {
  return std::span(hello).first(kHelloFieldBytes);
}

// Waits until fd is ready for `events` or the deadline passes; false on timeout.
bool wait_ready(int fd, short events, Deadline deadline) {
  while (true) {
    auto remaining = deadline.remaining().count();
    if (remaining <= 0 && deadline.expired()) return false;
    pollfd entry{fd, events, 0};
    int timeout = static_cast<int>(std::min<long long>(std::max<long long>(remaining, 1), INT_MAX));
    int ready = ::poll(&entry, 1, timeout);
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return true;  // let the following call report the error
  }
}

constexpr std::chrono::milliseconds kRefusedMeansGone{1000};

bool retryable(int error) { return error == ECONNREFUSED || error == ETIMEDOUT || error == EINTR; }

class Dialer {
 public:
  Dialer(const ListenerAddress& peer, int my_rank, int stream, int streams, const JobSecret& secret,
         const TlsContext* tls, Deadline deadline)
      : peer_(peer), my_rank_(my_rank), stream_(stream), streams_(streams), secret_(secret), tls_(tls),
        deadline_(deadline), started_(Clock::now()) {}

  AdmittedSocket run() {
    auto backoff = std::chrono::milliseconds(5);
    while (true) {
      Fd fd = attempt_connect();
      if (fd.valid()) {
        exchange_hello(fd.get());
        AdmittedSocket admitted{std::move(fd), nullptr};
        if (tls_) start_tls(admitted);
        return admitted;
      }
      if (!retryable(last_error_))
        throw IoError(cat("rank ", my_rank_, ": cannot connect to ", label(), ": ",
                          errno_text(last_error_)),
                      peer_.rank);
      // The address was published after its listener opened, so a refusal
      // that lasts means the rank is gone (exited, or closed its Context),
      // which on demand (transport/mesh.h) a dial may find long after connect.
      if (last_error_ == ECONNREFUSED && Clock::now() - started_ >= kRefusedMeansGone)
        throw PeerLostError(cat("rank ", my_rank_, ": ", label(), " is gone: its listener has refused connections "
                                "for ", kRefusedMeansGone.count(), " ms (the process exited or closed its Context)"),
                            peer_.rank);
      if (deadline_.expired() || deadline_.remaining() < backoff) timed_out("connecting to");
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
    }
  }

 private:
  std::string label() const {
    return cat("peer rank ", peer_.rank, " (", peer_.socket.to_string(),
               stream_ > 0 ? cat(", stream ", stream_) : std::string(), ")");
  }

  [[noreturn]] void timed_out(const char* doing) {
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_);
    std::string last = last_error_ ? cat(" (last error: ", errno_text(last_error_), ")") : "";
    throw TimeoutError(cat("rank ", my_rank_, ": timed out after ", waited.count(), " ms ", doing,
                           " ", label(), last));
  }

  // A connected socket, or an invalid one with last_error_ set.
  Fd attempt_connect() {
    Fd fd(::socket(peer_.socket.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid())
      throw IoError(cat("rank ", my_rank_, ": cannot create a socket to dial ", label(), ": ",
                        errno_text(errno)),
                    peer_.rank);
    if (::connect(fd.get(), peer_.socket.get(), peer_.socket.length()) == 0) return fd;
    if (errno != EINPROGRESS) {
      last_error_ = errno;
      return Fd();
    }
    if (!wait_ready(fd.get(), POLLOUT, deadline_)) {
      last_error_ = ETIMEDOUT;
      timed_out("connecting to");
    }
    int error = 0;
    socklen_t length = sizeof(error);
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) {
      last_error_ = error;
      return Fd();
    }
    return fd;
  }

  void exchange_hello(int fd) {
    set_no_delay(fd);
    ChallengeMessage challenge_bytes{};
    receive_exactly(fd, challenge_bytes, "the handshake challenge of");
    Challenge listener_challenge{};
    if (std::string why = decode_challenge(challenge_bytes, listener_challenge); !why.empty())
      throw IoError(cat("rank ", my_rank_, ": ", label(), " sent an invalid handshake challenge (", why,
                        "): not a chorus rank of this version"),
                    peer_.rank);
    // Without a secret, whoever answers proves nothing by its bytes: the
    // kernel's word on its user does (base/socket_owner.h).
    if (!secret_.configured()) {
      if (std::string why = same_user_refusal(fd, cat("the process listening at ", peer_.socket.to_string()));
          !why.empty())
        throw IoError(cat("rank ", my_rank_, ": will not connect to ", label(), ": ", why), peer_.rank);
    }
    Hello hello{peer_.nonce, my_rank_, peer_.rank, stream_, streams_, fresh_challenge()};
    const HelloMessage hello_bytes = encode_hello(hello, listener_challenge, secret_);
    size_t sent = 0;
    while (sent < hello_bytes.size()) {
      ssize_t n = ::send(fd, hello_bytes.data() + sent, hello_bytes.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (errno == EAGAIN || errno == EINTR) {
        if (!wait_ready(fd, POLLOUT, deadline_)) timed_out("sending the handshake to");
      } else {
        throw IoError(cat("rank ", my_rank_, ": handshake with ", label(), " failed: ", errno_text(errno)),
                      peer_.rank);
      }
    }
    AckMessage ack{};
    receive_exactly(fd, ack, "the handshake reply of");
    if (std::string why = check_ack(ack, hello_bytes, listener_challenge, secret_, peer_.rank, my_rank_, stream_);
        !why.empty())
      throw IoError(cat("rank ", my_rank_, ": ", label(), " answered the handshake with ", why), peer_.rank);
  }

  void start_tls(AdmittedSocket& admitted) {
    admitted.tls = tls_->open(admitted.fd.get(), TlsRole::client);
    std::string why = admitted.tls->handshake_until(deadline_);
    if (why.empty()) why = admitted.tls->await_confirmation(deadline_);
    if (!why.empty()) {
      if (deadline_.expired()) timed_out("in the TLS handshake with");
      throw IoError(cat("rank ", my_rank_, ": the TLS handshake with ", label(), " failed: ", why,
                        " (CHORUS_TLS_CERT='", tls_->files().certificate, "', CHORUS_TLS_CA='",
                        tls_->files().authority, "': are both from the CA every rank uses?)"),
                    peer_.rank);
    }
  }

  template <size_t N>
  void receive_exactly(int fd, std::array<std::byte, N>& out, const char* what) {
    size_t received = 0;
    while (received < out.size()) {
      ssize_t n = ::recv(fd, out.data() + received, out.size() - received, 0);
      if (n > 0) {
        received += static_cast<size_t>(n);
      } else if (n == 0) {
        throw IoError(cat("rank ", my_rank_, ": ", label(), " closed the connection during the handshake (it ",
                          "rejected our hello: a different job secret (CHORUS_SECRET), another user's process with no ",
                          "secret, or an address from another job or a stale run? its log says why)"),
                      peer_.rank);
      } else if (errno == EAGAIN || errno == EINTR) {
        if (!wait_ready(fd, POLLIN, deadline_)) timed_out(cat("waiting for ", what).c_str());
      } else {
        throw IoError(cat("rank ", my_rank_, ": handshake with ", label(), " failed: ", errno_text(errno)),
                      peer_.rank);
      }
    }
  }

  const ListenerAddress& peer_;
  int my_rank_;
  int stream_;
  int streams_;
  const JobSecret& secret_;
  const TlsContext* tls_;
  Deadline deadline_;
  Clock::time_point started_;
  int last_error_ = 0;
};

}  // namespace

ChallengeMessage encode_challenge(const Challenge& challenge) {
  ChallengeMessage out{};
  store_le(out.data() + 0, kChallengeMagic, 4);
  store_le(out.data() + 4, kWireVersion, 2);
  std::copy(challenge.begin(), challenge.end(), out.begin() + 8);
  return out;
}

std::string decode_challenge(const ChallengeMessage& bytes, Challenge& challenge) {
  if (load_le(bytes.data(), 4) != kChallengeMagic) return "bad magic";
  if (load_le(bytes.data() + 4, 2) != kWireVersion) return cat("wire version ", load_le(bytes.data() + 4, 2));
  if (load_le(bytes.data() + 6, 2) != 0) return "nonzero padding";
  std::copy(bytes.begin() + 8, bytes.end(), challenge.begin());
  return "";
}

HelloMessage encode_hello(const Hello& hello, const Challenge& listener_challenge, const JobSecret& secret) {
  HelloMessage out{};
  store_le(out.data() + 0, kHelloMagic, 4);
  store_le(out.data() + 4, kWireVersion, 2);
  store_le(out.data() + 6, static_cast<uint8_t>(hello.stream), 1);
  store_le(out.data() + 7, static_cast<uint8_t>(hello.streams), 1);
  store_le(out.data() + 8, hello.listener_nonce, 8);
  store_le(out.data() + 16, static_cast<uint32_t>(hello.dialer_rank), 4);
  store_le(out.data() + 20, static_cast<uint32_t>(hello.listener_rank), 4);
  std::copy(hello.dialer_challenge.begin(), hello.dialer_challenge.end(), out.begin() + 24);
  const Proof proof = secret.prove(kHelloPurpose, {listener_challenge, hello_fields(out)});
  std::copy(proof.begin(), proof.end(), out.begin() + kHelloFieldBytes);
  return out;
}

std::string check_hello(const HelloMessage& bytes, const HelloExpectations& expected, const Challenge& my_challenge,
                        const JobSecret& secret, Hello& hello) {
  if (load_le(bytes.data(), 4) != kHelloMagic) return "not a chorus hello (bad magic)";
  if (load_le(bytes.data() + 4, 2) != kWireVersion)
    return cat("unsupported wire version ", load_le(bytes.data() + 4, 2));
  // Nothing it claims counts before it proves the secret over our fresh challenge.
  if (!secret.verify(std::span(bytes).subspan(kHelloFieldBytes), kHelloPurpose, {my_challenge, hello_fields(bytes)}))
    return secret.configured() ? "its proof does not match this job's secret (CHORUS_SECRET)"
                               : "its proof does not match (it has a job secret, this rank has none)";
  hello.stream = static_cast<int>(load_le(bytes.data() + 6, 1));
  hello.streams = static_cast<int>(load_le(bytes.data() + 7, 1));
  hello.listener_nonce = load_le(bytes.data() + 8, 8);
  hello.dialer_rank = static_cast<int>(static_cast<int32_t>(load_le(bytes.data() + 16, 4)));
  hello.listener_rank = static_cast<int>(static_cast<int32_t>(load_le(bytes.data() + 20, 4)));
  std::copy(bytes.begin() + 24, bytes.begin() + 24 + kChallengeBytes, hello.dialer_challenge.begin());
  if (hello.listener_nonce != expected.nonce)
    return "wrong nonce (a stale address from another run or another job)";
  if (hello.listener_rank != expected.rank) return cat("it expected to reach rank ", hello.listener_rank);
  if (hello.dialer_rank <= expected.rank || hello.dialer_rank >= expected.size)
    return cat("dialer rank ", hello.dialer_rank, " is not a higher rank of this job of size ", expected.size);
  if (hello.streams != expected.streams)
    return cat("dialer rank ", hello.dialer_rank, " uses ", hello.streams, " streams per peer, rank ", expected.rank,
               " uses ", expected.streams);
  if (hello.stream >= expected.streams)
    return cat("stream ", hello.stream, " of ", expected.streams, " does not exist");
  return "";
}

namespace {

std::array<std::byte, kAckFieldBytes> ack_fields(int listener_rank, int dialer_rank, int stream) {
  std::array<std::byte, kAckFieldBytes> out{};
  store_le(out.data() + 0, kAckMagic, 4);
  store_le(out.data() + 4, kWireVersion, 2);
  store_le(out.data() + 6, kAckAccepted, 1);
  store_le(out.data() + 7, static_cast<uint8_t>(stream), 1);
  store_le(out.data() + 8, static_cast<uint32_t>(listener_rank), 4);
  store_le(out.data() + 12, static_cast<uint32_t>(dialer_rank), 4);
  return out;
}

}  // namespace

AckMessage encode_ack(const HelloMessage& hello, const Challenge& listener_challenge, const JobSecret& secret,
                      int listener_rank, int dialer_rank, int stream) {
  const auto fields = ack_fields(listener_rank, dialer_rank, stream);
  const Proof proof = secret.prove(kAckPurpose, {listener_challenge, hello, fields});
  AckMessage out{};
  std::copy(fields.begin(), fields.end(), out.begin());
  std::copy(proof.begin(), proof.end(), out.begin() + kAckFieldBytes);
  return out;
}

std::string check_ack(const AckMessage& ack, const HelloMessage& hello, const Challenge& listener_challenge,
                      const JobSecret& secret, int listener_rank, int dialer_rank, int stream) {
  const auto fields = ack_fields(listener_rank, dialer_rank, stream);
  if (!std::equal(fields.begin(), fields.end(), ack.begin()))
    return "an invalid reply (not a chorus peer of this job and version?)";
  if (!secret.verify(std::span(ack).subspan(kAckFieldBytes), kAckPurpose, {listener_challenge, hello, fields}))
    return "a proof that does not match this job's secret (is CHORUS_SECRET the same on every rank?)";
  return "";
}

AdmittedSocket dial_peer(const ListenerAddress& peer, int my_rank, int stream, int streams, const JobSecret& secret,
                         const TlsContext* tls, Deadline deadline) {
  return Dialer(peer, my_rank, stream, streams, secret, tls, deadline).run();
}

TlsSession::Step IncomingHandshake::continue_tls(const TlsContext& tls) {
  if (!tls_) tls_ = tls.open(fd_.get(), TlsRole::server);
  const TlsSession::Step step = tls_->handshake();
  if (step == TlsSession::Step::failed) failure_ = tls_->error();
  return step;
}

IncomingHandshake::Status IncomingHandshake::read_available() {
  while (received_ < bytes_.size()) {
    ssize_t n = ::recv(fd_.get(), bytes_.data() + received_, bytes_.size() - received_, 0);
    if (n > 0) {
      received_ += static_cast<size_t>(n);
    } else if (n == 0) {
      failure_ = cat("closed after ", received_, " of ", kHelloBytes, " hello bytes");
      return Status::failed;
    } else if (errno == EAGAIN || errno == EINTR) {
      return Status::waiting;
    } else {
      failure_ = errno_text(errno);
      return Status::failed;
    }
  }
  return Status::received;
}

}  // namespace chorus::transport::tcp
