// The connection handshake. The higher rank dials the lower and sends a hello
// {magic, version, stream, streams, listener nonce, dialer rank, listener
// rank}; the listener checks every field and answers with an ack (echoing the
// stream) the dialer checks in turn. Only then does the socket carry frames,
// so a stray or hostile connection never reaches user memory. The stream says
// which of the connections between the two ranks this one is.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/deadline.h"
#include "transport/tcp/address.h"
#include "transport/tcp/socket.h"

namespace chorus::transport::tcp {

struct Hello {
  uint64_t listener_nonce = 0;
  int dialer_rank = -1;
  int listener_rank = -1;
  int stream = 0;   // 0..streams-1
  int streams = 1;  // the dialer's connections per peer
};

inline constexpr size_t kHelloBytes = 24;
inline constexpr size_t kAckBytes = 16;

// Why a hello may not be admitted (empty when it may): bad magic/version,
// wrong nonce, a listener rank other than ours, a dialer rank that is not a
// higher rank of this job, a stream count other than ours or a stream outside it.
std::string check_hello(const std::array<std::byte, kHelloBytes>& bytes, uint64_t my_nonce,
                        int my_rank, int size, int my_streams, Hello& hello);
std::array<std::byte, kAckBytes> encode_ack(int listener_rank, int dialer_rank, int stream);

// Dialer side, blocking on the caller's thread: connects (retrying refused and
// timed-out attempts with a short backoff until the deadline), sends the
// hello for `stream` of `streams` and checks the ack. Returns a non-blocking,
// TCP_NODELAY socket. Throws TimeoutError or IoError naming the peer rank and address.
Fd dial_peer(const ListenerAddress& peer, int my_rank, int stream, int streams, Deadline deadline);

// Listener side: an accepted socket whose hello is still arriving. The
// progress thread feeds it on readiness so a slow or silent client never
// blocks it.
class IncomingHandshake {
 public:
  IncomingHandshake(Fd fd, SocketAddress from, Clock::time_point give_up_at)
      : fd_(std::move(fd)), from_(from), give_up_at_(give_up_at) {}

  enum class Status { waiting, received, failed };
  // Reads what has arrived. On failed, failure() says why.
  Status read_available();
  const std::array<std::byte, kHelloBytes>& bytes() const { return bytes_; }
  const std::string& failure() const { return failure_; }
  const SocketAddress& from() const { return from_; }
  Clock::time_point give_up_at() const { return give_up_at_; }
  int fd() const { return fd_.get(); }
  Fd release() { return std::move(fd_); }

 private:
  Fd fd_;
  SocketAddress from_;
  Clock::time_point give_up_at_;
  std::array<std::byte, kHelloBytes> bytes_{};
  size_t received_ = 0;
  std::string failure_;
};

}  // namespace chorus::transport::tcp
