// Binomial-tree broadcast as a Plan.
//
// Ranks are renumbered relative to the root (v = rank - root mod P). In round
// j every rank v < 2^j that already has the data sends it to v + 2^j, so the
// tree is complete after ceil(log2 P) rounds. Equivalently, v receives from
// v with its highest set bit cleared and sends to v + 2^j for every j above
// its highest bit; children are served in round order, the child with the
// largest subtree first.
#include "algorithms/plans/broadcast/binomial_broadcast.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

namespace {

bool binomial_broadcast_supports(const Call& call) {
  return call.collective == Collective::broadcast && call.root >= 0 && call.root < call.size;
}

double binomial_broadcast_cost(const Call& call, const CostModel& model) {
  const double bytes = static_cast<double>(call.bytes());
  const double critical = ceil_log2(call.size) * lone_message_seconds(model, bytes);
  // Every rank but the root receives the whole buffer once.
  const double messages = call.size - 1;
  return bounded_by_shared_cores(model, call.size, critical, messages, messages * bytes);
}

Plan binomial_broadcast_plan(const Call& call, const PlanTuning& tuning) {
  Plan plan;
  plan.one_way = true;
  const int size = call.size;
  if (size == 1 || call.count == 0) return plan;

  const size_t element_bytes = element_size(call.type);
  const size_t segment_elements = std::max<size_t>(1, tuning.segment_bytes / element_bytes);
  const size_t segments = (call.count + segment_elements - 1) / segment_elements;
  if (segments > std::numeric_limits<uint32_t>::max())
    throw InvalidArgument(cat("rank ", call.rank, ": broadcast of ", call.count, " elements with segments of ",
                              tuning.segment_bytes, " bytes needs more than 2^32 messages; use larger segments"));

  const long long relative = ((static_cast<long long>(call.rank) - call.root) % size + size) % size;
  auto absolute = [&](long long v) { return static_cast<int>((v + call.root) % size); };

  int highest_bit = -1;
  for (int bit = 0; (1LL << bit) <= relative; ++bit)
    if (relative & (1LL << bit)) highest_bit = bit;
  const int parent = relative == 0 ? -1 : absolute(relative - (1LL << highest_bit));
  std::vector<int> children;
  for (int bit = highest_bit + 1; relative + (1LL << bit) < size; ++bit) children.push_back(absolute(relative + (1LL << bit)));

  for (size_t s = 0; s < segments; ++s) {
    const size_t first = s * segment_elements;
    const size_t elements = std::min(segment_elements, call.count - first);
    const Region region{BufferKind::output, first * element_bytes, elements * element_bytes};
    const uint32_t slot = static_cast<uint32_t>(s);
    StepId received = parent < 0 ? no_step : plan.recv(parent, slot, region);
    for (int child : children) plan.send(region, child, slot, {received});
  }
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions binomial_broadcast{binomial_broadcast_supports, binomial_broadcast_cost,
                                                binomial_broadcast_plan};

}  // namespace chorus::algorithms
