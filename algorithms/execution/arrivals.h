// Who has reached a collective: what a stalled rank reports, in its stall
// warning and in its timeout error. A rank waiting in collective #n asks
// every other member where it is in this Context (a liveness probe that the
// member's transport thread answers, transport/positions.h) and sorts them:
// silent (stopped, stuck, cut off), not arrived (still in an earlier
// collective, or idle since one), or in it / past it. So a rank waiting on
// its ring neighbour names the rank that never called the collective, not
// the neighbour that waits with it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/model/call.h"
#include "algorithms/execution/communicator.h"

namespace chorus::algorithms {

// How long a rank that timed out waits for its peers to answer a liveness probe.
inline constexpr std::chrono::milliseconds kLivenessGrace{1000};
// How long a stalled collective's warning waits for them (the error at the
// timeout names them again, with the longer grace).
inline constexpr std::chrono::milliseconds kStallProbeGrace{250};

// Ranks as the Communicator shows them (Communicator::shown_rank): a helper
// group's members as its Context's ranks.
struct Arrivals {
  std::vector<int> silent;                   // member ranks that did not answer
  std::vector<std::string> missing;          // "rank 2 (finished #11 and has called nothing since)"
  std::vector<int> missing_ranks;            // the same ranks
  std::vector<int> arrived;                  // in #n or past it
  // Members this rank holds no connection to yet (connections on demand,
  // transport/mesh.h): it knocks on their listeners instead
  // (transport/knock.h), which tells whether they are alive (not where),
  // silent (counted with `silent`), aborted or gone.
  std::vector<int> unasked;  // alive, or past the knocks a stall may take
  std::vector<int> aborted;
  std::vector<int> gone;
};

// Asks every other member where it is, waiting up to `grace` for answers.
Arrivals take_arrivals(const Communicator& communicator, uint32_t sequence, std::chrono::milliseconds grace);

// "; rank 2 has not called allreduce #12 (it finished #11 and has called
// nothing since)" and/or "; rank 3 does not answer a liveness probe within
// 1000 ms: ...", or "; every other rank is in it too" when nobody is
// missing. `what` names the collective ("allreduce #12").
std::string describe_arrivals(const Arrivals& arrivals, const std::string& what, std::chrono::milliseconds grace);

}  // namespace chorus::algorithms
