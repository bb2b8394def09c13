// Who is at the other end of a TCP connection, when that end is on this
// host: the job's proof where it has no secret.
//
// Without a secret the handshakes' proofs only show that both ends speak
// chorus, so on a shared host any process could read the store's join
// records, write its keys, or claim a rank's seat. The kernel knows better
// than any bytes a peer sends: every TCP socket has an owner (the user that
// made it), and sock_diag (the interface `ss` reads) answers, for one
// connection's four addresses, with the owner of the socket at the other
// end when that end is in this network namespace. SO_PEERCRED would say the
// same for a unix socket, but TCP sockets carry no peer credentials.
//
// The rule (same_user_refusal): a job without a secret admits on every
// listener, and trusts on every dial, only an end owned by the user it runs
// as. An end the kernel finds but cannot name an owner for (a socket its
// process already closed: a time-wait record has no owner) is refused, as is
// a loopback end it cannot find at all (loopback never leaves this host). An
// end it does not find on a routable address is on another host (or another
// network namespace): that is what the secret is for, and connect() warns
// when a job without one is reachable from other hosts.
//
// Another process of the same user passes: it could read the ranks' memory
// and environment anyway (ptrace, /proc), so no check inside the host can
// keep it out; a job that must refuse it sets a secret (docs/security.md).
#pragma once

#include <sys/types.h>

#include <string>

namespace chorus {

struct SocketOwner {
  enum class Where {
    this_host,     // found here; `uid` owns it
    closed,        // found here without an owner: its process let it go
    other_host,    // not found, and its address is not loopback
    not_found,     // a loopback address the kernel has no socket for
    unknown,       // no answer (sock_diag unavailable, not a TCP socket): `error` says why
  };
  Where where = Where::unknown;
  uid_t uid = 0;
  std::string error;
};

// The owner of the socket at the other end of connected TCP socket `fd`.
SocketOwner tcp_peer_owner(int fd);

// Why the other end of `fd` may not take part in a job without a secret
// (naming its user and ours), or "" when it may: it is ours, or on another
// host. `what` names the other end in the text ("the dialer", "the store").
std::string same_user_refusal(int fd, const std::string& what);

}  // namespace chorus
