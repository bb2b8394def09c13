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
#include "transport/tcp/frame.h"

namespace chorus::transport::tcp {
namespace {

constexpr uint32_t kHelloMagic = 0x53484843;  // "CHHS"
constexpr uint32_t kAckMagic = 0x4b414843;    // "CHAK"
constexpr uint8_t kAckAccepted = 1;

std::array<std::byte, kHelloBytes> encode_hello(const Hello& hello) {
  std::array<std::byte, kHelloBytes> out{};
  store_le(out.data() + 0, kHelloMagic, 4);
  store_le(out.data() + 4, kWireVersion, 2);
  store_le(out.data() + 6, static_cast<uint8_t>(hello.stream), 1);
  store_le(out.data() + 7, static_cast<uint8_t>(hello.streams), 1);
  store_le(out.data() + 8, hello.listener_nonce, 8);
  store_le(out.data() + 16, static_cast<uint32_t>(hello.dialer_rank), 4);
  store_le(out.data() + 20, static_cast<uint32_t>(hello.listener_rank), 4);
  return out;
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

bool retryable(int error) { return error == ECONNREFUSED || error == ETIMEDOUT || error == EINTR; }

class Dialer {
 public:
  Dialer(const ListenerAddress& peer, int my_rank, int stream, int streams, Deadline deadline)
      : peer_(peer), my_rank_(my_rank), stream_(stream), streams_(streams), deadline_(deadline),
        started_(Clock::now()) {}

  Fd run() {
    auto backoff = std::chrono::milliseconds(5);
    while (true) {
      Fd fd = attempt_connect();
      if (fd.valid()) {
        exchange_hello(fd.get());
        return fd;
      }
      if (!retryable(last_error_))
        throw IoError(cat("rank ", my_rank_, ": cannot connect to ", label(), ": ",
                          errno_text(last_error_)),
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
    auto hello = encode_hello({peer_.nonce, my_rank_, peer_.rank, stream_, streams_});
    size_t sent = 0;
    while (sent < hello.size()) {
      ssize_t n = ::send(fd, hello.data() + sent, hello.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (errno == EAGAIN || errno == EINTR) {
        if (!wait_ready(fd, POLLOUT, deadline_)) timed_out("sending the handshake to");
      } else {
        throw IoError(cat("rank ", my_rank_, ": handshake with ", label(), " failed: ",
                          errno_text(errno)),
                      peer_.rank);
      }
    }
    std::array<std::byte, kAckBytes> ack{};
    size_t received = 0;
    while (received < ack.size()) {
      ssize_t n = ::recv(fd, ack.data() + received, ack.size() - received, 0);
      if (n > 0) {
        received += static_cast<size_t>(n);
      } else if (n == 0) {
        throw IoError(cat("rank ", my_rank_, ": ", label(),
                          " closed the connection during the handshake (it rejected our hello: "
                          "is the address from another job or a stale run?)"),
                      peer_.rank);
      } else if (errno == EAGAIN || errno == EINTR) {
        if (!wait_ready(fd, POLLIN, deadline_)) timed_out("waiting for the handshake reply of");
      } else {
        throw IoError(cat("rank ", my_rank_, ": handshake with ", label(), " failed: ",
                          errno_text(errno)),
                      peer_.rank);
      }
    }
    bool valid = load_le(ack.data(), 4) == kAckMagic && load_le(ack.data() + 4, 2) == kWireVersion &&
                 load_le(ack.data() + 6, 1) == kAckAccepted &&
                 static_cast<int>(load_le(ack.data() + 7, 1)) == stream_ &&
                 static_cast<int>(load_le(ack.data() + 8, 4)) == peer_.rank &&
                 static_cast<int>(load_le(ack.data() + 12, 4)) == my_rank_;
    if (!valid)
      throw IoError(cat("rank ", my_rank_, ": ", label(),
                        " answered the handshake with an invalid reply (not a chorus peer of this job?)"),
                    peer_.rank);
  }

  const ListenerAddress& peer_;
  int my_rank_;
  int stream_;
  int streams_;
  Deadline deadline_;
  Clock::time_point started_;
  int last_error_ = 0;
};

}  // namespace

std::string check_hello(const std::array<std::byte, kHelloBytes>& bytes, uint64_t my_nonce,
                        int my_rank, int size, int my_streams, Hello& hello) {
  if (load_le(bytes.data(), 4) != kHelloMagic) return "not a chorus hello (bad magic)";
  if (load_le(bytes.data() + 4, 2) != kWireVersion)
    return cat("unsupported wire version ", load_le(bytes.data() + 4, 2));
  hello.stream = static_cast<int>(load_le(bytes.data() + 6, 1));
  hello.streams = static_cast<int>(load_le(bytes.data() + 7, 1));
  hello.listener_nonce = load_le(bytes.data() + 8, 8);
  hello.dialer_rank = static_cast<int>(static_cast<int32_t>(load_le(bytes.data() + 16, 4)));
  hello.listener_rank = static_cast<int>(static_cast<int32_t>(load_le(bytes.data() + 20, 4)));
  if (hello.listener_nonce != my_nonce)
    return "wrong nonce (a stale address from another run or another job)";
  if (hello.listener_rank != my_rank) return cat("it expected to reach rank ", hello.listener_rank);
  if (hello.dialer_rank <= my_rank || hello.dialer_rank >= size)
    return cat("dialer rank ", hello.dialer_rank, " is not a higher rank of this job of size ", size);
  if (hello.streams != my_streams)
    return cat("dialer rank ", hello.dialer_rank, " uses ", hello.streams, " streams per peer, rank ", my_rank,
               " uses ", my_streams);
  if (hello.stream >= my_streams) return cat("stream ", hello.stream, " of ", my_streams, " does not exist");
  return "";
}

std::array<std::byte, kAckBytes> encode_ack(int listener_rank, int dialer_rank, int stream) {
  std::array<std::byte, kAckBytes> out{};
  store_le(out.data() + 0, kAckMagic, 4);
  store_le(out.data() + 4, kWireVersion, 2);
  store_le(out.data() + 6, kAckAccepted, 1);
  store_le(out.data() + 7, static_cast<uint8_t>(stream), 1);
  store_le(out.data() + 8, static_cast<uint32_t>(listener_rank), 4);
  store_le(out.data() + 12, static_cast<uint32_t>(dialer_rank), 4);
  return out;
}

Fd dial_peer(const ListenerAddress& peer, int my_rank, int stream, int streams, Deadline deadline) {
  return Dialer(peer, my_rank, stream, streams, deadline).run();
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
