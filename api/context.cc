// Context: the public face of a ContextState, and split.
#include "chorus/context.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "api/collective_checks.h"
#include "algorithms/execution/deferred_root_checks.h"
#include "algorithms/execution/late_root_checks.h"
#include "algorithms/shared_memory/board.h"
#include "api/context_state.h"
#include "base/error.h"
#include "base/log.h"
#include "chorus/collectives.h"

namespace chorus {

namespace detail {

WorkQueue& ContextState::work_queue() {
  std::call_once(work_queue_once, [this] {
    work_queue_ = std::make_unique<WorkQueue>();
    work_queue_ready_.store(work_queue_.get(), std::memory_order_release);
  });
  return *work_queue_;
}

// A disagreement only a sender saw, when no later call came to raise it: it
// is logged and relayed to any rank still in a call (the abort), since a
// destructor cannot throw. Waits as a call would, up to the Context's
// timeout: the neighbour sends its check as it starts the same call.
ContextState::SettleRootChecksAtEnd::~SettleRootChecksAtEnd() {
  if (state.communicator.mesh().failed()) return;
  const Deadline deadline = Deadline::after(state.timeout);
  try {
    // The small broadcasts' on the shared-memory board (board_ring.cc).
    algorithms::settle_board_checks(state.communicator, deadline);
    algorithms::DeferredRootChecks* checks = state.communicator.deferred_root_checks();
    if (checks && !checks->empty())
      checks->settle(state.communicator, deadline, algorithms::DeferredRootChecks::Wait::all);
    // The last rooted call that no later call carried (late_root_checks.h).
    algorithms::LateRootChecks* late = state.communicator.late_root_checks();
    if (late && !state.chain_carried) late->settle_last(state.communicator, state.chained_sequence, deadline);
  } catch (const std::exception& error) {
    CHORUS_LOG(error, state.communicator.rank(), "as the context ends: ", error.what());
  }
  algorithms::LateRootChecks* late = state.communicator.late_root_checks();
  if (late) late->settle_sends(state.communicator, Deadline::after(state.timeout));
}

}  // namespace detail

Context::Context(std::unique_ptr<detail::ContextState> state) : state_(std::move(state)) {}

Context::~Context() = default;

int Context::rank() const { return state_->communicator.rank(); }
int Context::size() const { return state_->communicator.size(); }
int Context::hosts() const { return state_->communicator.topology().hosts(); }

int Context::host_of(int rank) const {
  if (rank < 0 || rank >= size())
    throw InvalidArgument(cat("rank ", this->rank(), ": host_of(", rank, ") in a context of size ", size()));
  return state_->communicator.topology().host_of(rank);
}

int Context::local_rank() const { return state_->communicator.topology().local_rank(rank()); }
int Context::local_size() const { return state_->communicator.topology().local_size(rank()); }

PeerLink Context::link_to(int peer) const {
  if (peer < 0 || peer >= size() || peer == rank())
    throw InvalidArgument(cat("rank ", rank(), ": link_to(", peer, "): not another rank of a context of size ",
                              size()));
  const algorithms::Communicator& communicator = state_->communicator;
  const int mesh_peer = communicator.mesh_rank(peer);
  const bool same_host = communicator.topology().host_of(peer) == communicator.topology().host_of(rank());
  const LinkModel& model = same_host ? communicator.cost_model().local : communicator.cost_model().remote;
  PeerLink link;
  link.transport = std::string(communicator.mesh().transport_of(mesh_peer));
  link.streams = communicator.mesh().streams(mesh_peer);
  link.connected = communicator.mesh().connected(mesh_peer);
  link.alpha_seconds = model.alpha_seconds;
  link.beta_seconds_per_byte = model.beta_seconds_per_byte;
  link.measured = communicator.settings().measured[same_host ? 0 : 1];
  return link;
}

std::chrono::milliseconds Context::timeout() const { return state_->timeout; }
void Context::set_timeout(std::chrono::milliseconds timeout) { state_->timeout = timeout; }

void Context::abort(const std::string& reason) {
  CHORUS_LOG(warn, rank(), "context aborted: ", reason);
  state_->communicator.mesh().abort(std::make_exception_ptr(Aborted(cat("rank ", rank(), ": ", reason))));
}

void Context::throw_if_failed() const {
  const transport::Mesh& mesh = state_->communicator.mesh();
  if (mesh.failed()) std::rethrow_exception(mesh.failure());
}

ContextStatistics Context::statistics() const { return state_->communicator.telemetry().statistics(); }

std::shared_ptr<Context> Context::split(int color, int key) {
  detail::ContextState& state = *state_;
  // The split is itself a collective on this Context: a rank passing a bad
  // color aborts it like any rejected call, so the others learn why at once.
  detail::aborting_on_invalid_argument(*this, [&]() -> Work {
    if (color < 0 && color != kNoColor)
      throw InvalidArgument(cat("rank ", rank(), ": split color ", color, " is negative (use Context::kNoColor, ",
                                kNoColor, ", to take part without joining a group)"));
    return Work();
  });
  throw_if_failed();
  // The allgather below takes this number; the child's group derives from it,
  // so every member computes the same group and no other split does.
  const uint32_t sequence = state.sequence;
  const std::vector<int64_t> mine{color, key};
  std::vector<int64_t> everyone(2 * static_cast<size_t>(size()));
  allgather(*this, std::span<const int64_t>(mine), std::span(everyone));
  if (color == kNoColor) return nullptr;

  std::vector<std::tuple<int64_t, int>> ordered;  // (key, rank) of the ranks of this color
  for (int r = 0; r < size(); ++r)
    if (everyone[2 * static_cast<size_t>(r)] == color) ordered.emplace_back(everyone[2 * static_cast<size_t>(r) + 1], r);
  std::sort(ordered.begin(), ordered.end());
  std::vector<int> members;  // as ranks of this Context
  members.reserve(ordered.size());
  for (const auto& [member_key, r] : ordered) members.push_back(r);

  const algorithms::Communicator& parent = state.communicator;
  algorithms::Communicator communicator =
      parent.subgroup(members, algorithms::child_group(parent.group(), sequence, color));
  auto child = detail::ContextAccess::make(std::make_unique<detail::ContextState>(std::move(communicator), state.timeout));
  CHORUS_LOG(debug, rank(), "split color ", color, " key ", key, ": rank ", child->rank(), " of ", child->size());
  return child;
}

}  // namespace chorus
