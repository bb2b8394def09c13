// How a stranger reaches each transport's listener, for the conformance
// suite's hostile-input check: the one place in the suite that knows a
// transport's wire format. A transport added to the registry adds an entry
// in strangers.cc (one with no `listener` where it has no listener of its own
// that a stranger could reach); without one the check fails, naming it.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "base/job_secret.h"
#include "test/integration/hostile_peer.h"

namespace chorus::transport::testing {

// What a stranger's hello claims and proves.
struct Forgery {
  int dialer = 1;
  bool right_nonce = true;   // the nonce of the published address, else another
  JobSecret secret;          // the secret its proof is made with
  // Prove over this challenge (one recorded on another connection: a
  // replay) instead of the one the listener just sent.
  std::optional<Challenge> replayed_challenge;
};

struct StrangerHooks {
  std::string_view transport;
  // Where the device of rank `owner`, which published `address`, accepts
  // connections; nullopt when it accepts none.
  std::optional<integration::ListeningEndpoint> (*listener)(std::span<const std::byte> address, int owner);
  // On `fd` (connected to that listener), reads the listener's challenge and
  // sends the handshake a rank of the job would, as `forgery` says. Goes as
  // far as the listener lets it without blocking for long; errors are
  // ignored (the listener may hang up). Returns the listener's challenge.
  Challenge (*hello)(int fd, std::span<const std::byte> address, int owner, const Forgery& forgery);
};

// Null when the transport has no entry.
const StrangerHooks* stranger_hooks(std::string_view transport);

// A connection to the endpoint, -1 when it cannot be made.
int connect_stranger(const integration::ListeningEndpoint& endpoint);

// True when the listener closed our connection (end of stream or reset)
// within `limit`; whatever it sent before is read and dropped.
bool closed_by_listener(int fd, std::chrono::milliseconds limit);

}  // namespace chorus::transport::testing
