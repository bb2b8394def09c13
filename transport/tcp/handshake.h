// The connection handshake, three messages before any frame:
//   listener -> dialer: a challenge {magic, version, 16 fresh random bytes};
//   dialer -> listener: a hello {magic, version, stream, streams, listener
//     nonce, dialer rank, listener rank, the dialer's own challenge} and a
//     proof: HMAC(job secret, "tcp hello", listener challenge, hello);
//   listener -> dialer: an ack {magic, version, stream, ranks} and a proof
//     over both challenges, the hello and the ack.
// The higher rank dials the lower. The listener checks the proof before any
// field and the fields before admitting; the dialer checks the ack's proof
// in turn, so both sides know the other holds the job secret
// (base/job_secret.h) and a recorded handshake replays on no other
// connection. With TLS (base/tls.h) a TLS handshake follows on the same
// socket, the dialer as client, and frames travel inside it; the
// listener admits the socket only once that handshake is done too. Only then does the socket carry frames, so a stray or hostile
// connection never reaches user memory. The stream says which of the
// connections between the two ranks this one is.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/deadline.h"
#include "base/job_secret.h"
#include "base/tls.h"
#include "transport/tcp/address.h"
#include "transport/tcp/socket.h"

namespace chorus::transport::tcp {

struct Hello {
  uint64_t listener_nonce = 0;
  int dialer_rank = -1;
  int listener_rank = -1;
  int stream = 0;   // 0..streams-1
  int streams = 1;  // the dialer's connections per peer
  Challenge dialer_challenge{};
};

inline constexpr size_t kChallengeMessageBytes = 8 + kChallengeBytes;
inline constexpr size_t kHelloFieldBytes = 24 + kChallengeBytes;
inline constexpr size_t kHelloBytes = kHelloFieldBytes + kProofBytes;
inline constexpr size_t kAckFieldBytes = 16;
inline constexpr size_t kAckBytes = kAckFieldBytes + kProofBytes;

using ChallengeMessage = std::array<std::byte, kChallengeMessageBytes>;
using HelloMessage = std::array<std::byte, kHelloBytes>;
using AckMessage = std::array<std::byte, kAckBytes>;

// What a listener expects of a hello.
struct HelloExpectations {
  uint64_t nonce = 0;  // published in this rank's address
  int rank = -1;
  int size = 1;
  int streams = 1;
};

ChallengeMessage encode_challenge(const Challenge& challenge);
// Why a challenge message is not one (empty when it is).
std::string decode_challenge(const ChallengeMessage& bytes, Challenge& challenge);
HelloMessage encode_hello(const Hello& hello, const Challenge& listener_challenge, const JobSecret& secret);

// Why a hello may not be admitted (empty when it may): bad magic/version, a
// proof that does not match the job secret and this connection's challenge,
// wrong nonce, a listener rank other than ours, a dialer rank that is not a
// higher rank of this job, a stream count other than ours or a stream outside it.
std::string check_hello(const HelloMessage& bytes, const HelloExpectations& expected,
                        const Challenge& my_challenge, const JobSecret& secret, Hello& hello);
AckMessage encode_ack(const HelloMessage& hello, const Challenge& listener_challenge, const JobSecret& secret,
                      int listener_rank, int dialer_rank, int stream);
// Why an ack is not the listener's answer to this hello (empty when it is).
std::string check_ack(const AckMessage& ack, const HelloMessage& hello, const Challenge& listener_challenge,
                      const JobSecret& secret, int listener_rank, int dialer_rank, int stream);

// Dialer side, blocking on the caller's thread: connects (retrying refused and
// timed-out attempts with a short backoff until the deadline), reads the
// challenge, sends the hello for `stream` of `streams`, checks the ack, and
// with `tls` runs the TLS handshake as the client. Returns a non-blocking,
// TCP_NODELAY socket. Throws TimeoutError or IoError naming the peer rank
// and address.
AdmittedSocket dial_peer(const ListenerAddress& peer, int my_rank, int stream, int streams, const JobSecret& secret,
                         const TlsContext* tls, Deadline deadline);

// Listener side: an accepted socket that was sent its challenge and whose
// hello is still arriving. The progress thread feeds it on readiness so a
// slow or silent client never blocks it.
class IncomingHandshake {
 public:
  IncomingHandshake(Fd fd, SocketAddress from, Clock::time_point give_up_at)
      : fd_(std::move(fd)), from_(from), give_up_at_(give_up_at), challenge_(fresh_challenge()) {}

  enum class Status { waiting, received, failed };
  // Reads what has arrived. On failed, failure() says why.
  Status read_available();
  // After the ack went out, with TLS: one step of the server's TLS handshake.
  // TlsSession::Step::failed leaves why in failure().
  TlsSession::Step continue_tls(const TlsContext& tls);
  bool tls_started() const { return tls_ != nullptr; }
  // Once the TLS handshake is done (TlsSession::send_confirmation).
  bool send_tls_confirmation() { return tls_ && tls_->send_confirmation(); }
  // The hello the listener accepted (kept while TLS runs).
  void set_accepted(const Hello& hello) { accepted_ = hello; }
  const Hello& accepted() const { return accepted_; }
  const HelloMessage& bytes() const { return bytes_; }
  const Challenge& challenge() const { return challenge_; }
  const std::string& failure() const { return failure_; }
  const SocketAddress& from() const { return from_; }
  Clock::time_point give_up_at() const { return give_up_at_; }
  int fd() const { return fd_.get(); }
  AdmittedSocket release() { return {std::move(fd_), std::move(tls_)}; }

 private:
  Fd fd_;
  SocketAddress from_;
  Clock::time_point give_up_at_;
  Challenge challenge_;
  HelloMessage bytes_{};
  size_t received_ = 0;
  std::string failure_;
  Hello accepted_;
  std::unique_ptr<TlsSession> tls_;  // declared after fd_: destroyed before the socket closes
};

}  // namespace chorus::transport::tcp
