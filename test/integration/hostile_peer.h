// A stranger on the machine, for the hostile-bytes test: finds the TCP ports
// and unix sockets a process listens on (its socket inodes in /proc/<pid>/fd
// matched against the listening entries of /proc/net/tcp, tcp6 and unix)
// and connects to them with garbage, truncated or forged-but-plausible
// handshakes and frames.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace chorus::integration {

struct ListeningEndpoint {
  sockaddr_storage address{};  // where to connect (a wildcard bind becomes loopback)
  socklen_t length = 0;
  int type = SOCK_STREAM;      // SOCK_SEQPACKET for the shared-memory listeners
  std::string text;            // "127.0.0.1:41234", "@chorus-shm-..." for messages
};

std::vector<ListeningEndpoint> listening_endpoints(pid_t pid);

struct AttackOutcome {
  bool connected = false;
  // A connection left idle halfway through a handshake, for the caller to
  // close later; -1 for the kinds that hang up themselves.
  int open_fd = -1;
};

// One connection's worth of hostile traffic; `kind` picks which (any int,
// taken modulo the number of kinds). `job_size` makes forged ranks plausible.
AttackOutcome attack_once(const ListeningEndpoint& target, int kind, int job_size, std::mt19937_64& random);
int attack_kinds();

}  // namespace chorus::integration
