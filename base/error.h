// The one error hierarchy. Every message names the rank that raised it, the
// peer involved (where there is one) and what was expected.
#pragma once

#include <stdexcept>
#include <string>

namespace chorus {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A connection to a peer failed: closed, reset, unreachable. peer_rank() is -1
// when no single peer is to blame (a store or a listening socket).
class IoError : public Error {
 public:
  explicit IoError(const std::string& message, int peer_rank = -1)
      : Error(message), peer_rank_(peer_rank) {}
  int peer_rank() const { return peer_rank_; }

 private:
  int peer_rank_;
};

// The peer's process is gone: its connection ended or was reset without a
// goodbye or an abort (killed, crashed, or exited without closing its
// Context). Other ranks learn it as the same error, naming the same peer.
class PeerLostError : public IoError {
 public:
  using IoError::IoError;
};

class TimeoutError : public Error { public: using Error::Error; };
class InvalidArgument : public Error { public: using Error::Error; };
// Ranks disagree on the collective, its size, type, op or root.
class MismatchError : public Error { public: using Error::Error; };
class Aborted : public Error { public: using Error::Error; };

}  // namespace chorus
