// Knocking on a peer's listener: what a rank waiting for that peer to dial
// it learns without a handshake. Connections on demand (transport/mesh.h)
// make a lower rank wait for a higher one to dial when it first needs the
// pair; if that rank aborted or died meanwhile, no dial ever comes, and no
// connection exists to bring the news. Its listener tells: a rank that
// aborted accepts and closes every connection at once, and one whose
// process or Context is gone refuses them. So the waiter knocks now and
// then and reports the peer by name instead of waiting out its timeout.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <optional>

namespace chorus::transport {

enum class KnockAnswer {
  alive,    // sent its handshake's opening (every listener of ours speaks first)
  silent,   // connected (the kernel accepts for it) but said nothing: stopped or stuck
  closed,   // accepted and closed at once: the rank has aborted
  refused,  // nobody listens there any more: the process or its Context is gone
  unknown,  // no answer to go by (an unreachable address, a socket error)
};

// Connects a socket of `type` (SOCK_STREAM, SOCK_SEQPACKET) to `address`
// and watches it for up to `window`. Never sends a byte, so a live
// listener sees a dialer that closed before its hello. Also how a stalled
// rank asks after a peer it has no connection to (algorithms/execution/arrivals.h).
KnockAnswer knock(const sockaddr* address, socklen_t length, int type, std::chrono::milliseconds window);
inline constexpr std::chrono::milliseconds kKnockWindow{200};

// When a rank waiting for a dial should knock: not in the first 200 ms (a
// dial is usually that quick), then every 500 ms.
class KnockSchedule {
 public:
  bool due(std::chrono::steady_clock::duration waited);

 private:
  std::optional<std::chrono::steady_clock::duration> last_;
};

}  // namespace chorus::transport
