// run_collective: validate, select, build (or reuse) the Plan, execute, finish.
#include "algorithms/run.h"

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "algorithms/executor.h"
#include "algorithms/local_steps.h"
#include "algorithms/selection.h"
#include "chorus/error.h"
#include "chorus/log.h"
#include "transport/transport.h"

namespace chorus::algorithms {

namespace {

struct PreparedPlan {
  explicit PreparedPlan(Plan built) : plan(std::move(built)), graph(plan) {}
  Plan plan;
  PlanGraph graph;
};

// Training loops repeat the same few calls thousands of times; building a
// ring plan for a large buffer costs far more than looking it up. Plans
// depend only on the call and the algorithm, so one cache serves every
// Context in the process.
class PlanCache {
 public:
  std::shared_ptr<const PreparedPlan> get(const Call& call, const Algorithm& algorithm) {
    const Key key{call.collective, call.rank, call.size, call.count, call.type, call.op,
                  call.collective == Collective::broadcast ? call.root : 0, call.in_place, &algorithm};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto found = plans_.find(key);
      if (found != plans_.end()) return found->second;
    }
    // Built outside the lock: a big plan takes a while and other threads'
    // lookups should not wait for it.
    auto prepared = std::make_shared<const PreparedPlan>(algorithm.build(call, PlanTuning{}));
    std::lock_guard<std::mutex> lock(mutex_);
    // Bounded crudely: a program cycling through many shapes rebuilds, one
    // with a steady shape never does.
    if (plans_.size() >= capacity) plans_.clear();
    plans_.emplace(key, prepared);
    return prepared;
  }

 private:
  using Key = std::tuple<Collective, int, int, size_t, DataType, ReduceOp, int, bool, const Algorithm*>;
  static constexpr size_t capacity = 64;
  std::mutex mutex_;
  std::map<Key, std::shared_ptr<const PreparedPlan>> plans_;
};

PlanCache& plan_cache() {
  static PlanCache cache;
  return cache;
}

void validate(const Context& context, const Call& call, const void* input, const void* output) {
  const int rank = context.rank();
  if (call.rank != rank || call.size != context.size())
    throw InvalidArgument(cat("rank ", rank, ": call describes rank ", call.rank, " of ", call.size,
                              " but the context is rank ", rank, " of ", context.size()));
  if (call.collective == Collective::barrier) return;
  if (call.count > 0 && output == nullptr)
    throw InvalidArgument(cat("rank ", rank, ": ", to_string(call.collective), " of ", call.count,
                              " elements given a null buffer"));
  if (call.collective == Collective::allreduce) {
    validate_reduction(call.type, call.op);
    if (call.count > 0 && !call.in_place && input == nullptr)
      throw InvalidArgument(cat("rank ", rank, ": allreduce of ", call.count, " elements given a null input"));
    if (call.in_place && input != output)
      throw InvalidArgument(cat("rank ", rank, ": allreduce marked in place but input != output"));
  }
  if (call.collective == Collective::broadcast && (call.root < 0 || call.root >= call.size))
    throw InvalidArgument(cat("rank ", rank, ": broadcast root ", call.root, " is not a rank of this ", call.size,
                              "-rank context"));
}

}  // namespace

void run_collective(Context& context, const Call& call, const void* input, void* output,
                    const std::string& algorithm, uint32_t sequence, Deadline deadline) {
  // An out-of-place plan reads the input after writing the output; the same
  // buffer passed twice must take the in-place plan.
  Call effective = call;
  if (call.collective == Collective::allreduce && input == output) effective.in_place = true;
  validate(context, effective, input, output);
  const Algorithm& chosen =
      select_algorithm(effective, algorithm, CostModel::from_link(context.device().link_model()));
  std::shared_ptr<const PreparedPlan> prepared = plan_cache().get(effective, chosen);
  execute(context, prepared->plan, prepared->graph, effective, input, output, sequence, deadline);
  finish_collective(effective, output);
}

}  // namespace chorus::algorithms
