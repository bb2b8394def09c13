// Algorithm selection and the CHORUS_ALGO override.
#include "algorithms/selection/selection.h"

#include <limits>
#include <string>

#include "algorithms/execution/communicator.h"
#include "algorithms/execution/plan_cache.h"
#include "algorithms/selection/plan_candidate.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

const Collective known_collectives[] = {Collective::allreduce, Collective::broadcast,      Collective::barrier,
                                        Collective::reduce,    Collective::reduce_scatter, Collective::allgather,
                                        Collective::gather,    Collective::scatter,        Collective::alltoall};

// Only for algorithms whose segments follow the model; the others always
// use the default tuning.
std::string describe_segments(const Algorithm& algorithm, const Call& call, const CostModel& model) {
  if (!algorithm.tuned_by_model()) return {};
  return cat(", segments of ", plan_tuning(algorithm, call, model).segment_bytes, " bytes");
}

}  // namespace

std::map<Collective, std::string> parse_algorithm_overrides(std::string_view text) {
  std::map<Collective, std::string> overrides;
  while (!trim(text).empty()) {
    size_t comma = text.find(',');
    std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    size_t colon = item.find(':');
    if (colon == std::string_view::npos)
      throw InvalidArgument(cat("expected collective:algorithm (e.g. allreduce:ring), got '", item, "'"));
    std::string_view collective_name = trim(item.substr(0, colon));
    std::string_view algorithm_name = trim(item.substr(colon + 1));
    const Collective* collective = nullptr;
    for (const Collective& candidate : known_collectives)
      if (to_string(candidate) == collective_name) collective = &candidate;
    if (!collective)
      throw InvalidArgument(cat("unknown collective '", collective_name, "' in '", item,
                                "' (valid: allreduce, broadcast, barrier, reduce, reduce_scatter, allgather, gather, "
                                "scatter, alltoall)"));
    if (find_candidate(*collective, algorithm_name) == nullptr)
      throw InvalidArgument(cat("unknown ", collective_name, " algorithm '", algorithm_name,
                                "' (valid: ", candidate_names(*collective), ")"));
    if (!overrides.emplace(*collective, std::string(algorithm_name)).second)
      throw InvalidArgument(cat("collective '", collective_name, "' named twice"));
  }
  return overrides;
}

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

bool serves(const Candidate& candidate, const Communicator& communicator, const Call& call) {
  return (!candidate.collective || *candidate.collective == call.collective) &&
         candidate.serves(candidate, communicator, call);
}

// The cheapest candidate serving the call and its cost (wrappers with their
// inner candidate's), or null; nothing is built.
std::pair<const Candidate*, double> cheapest(const Communicator& communicator, const Call& call) {
  const Candidate* best = nullptr;
  double best_cost = kNever;
  for (const Candidate* candidate : all_candidates()) {
    if (!serves(*candidate, communicator, call)) continue;
    double cost = candidate->cost_seconds(*candidate, communicator, call);
    if (candidate->role == CandidateRole::wraps) cost += cheapest(communicator, candidate->inner_call(call)).second;
    if (cost < best_cost) {
      best = candidate;
      best_cost = cost;
    }
  }
  return {best, best_cost};
}

std::shared_ptr<const Choice> build(const Candidate& candidate, const Communicator& communicator, const Call& call,
                                    std::shared_ptr<const Choice> inner);

// The cheapest candidate built, or null.
std::shared_ptr<const Choice> build_cheapest(const Communicator& communicator, const Call& call) {
  const Candidate* best = cheapest(communicator, call).first;
  if (!best) return nullptr;
  std::shared_ptr<const Choice> inner;
  if (best->role == CandidateRole::wraps) inner = build_cheapest(communicator, best->inner_call(call));
  return build(*best, communicator, call, std::move(inner));
}

std::shared_ptr<const Choice> build(const Candidate& candidate, const Communicator& communicator, const Call& call,
                                    std::shared_ptr<const Choice> inner) {
  auto choice = std::make_shared<Choice>();
  choice->candidate = &candidate;
  choice->cost_seconds = candidate.cost_seconds(candidate, communicator, call) + (inner ? inner->cost_seconds : 0);
  choice->inner = std::move(inner);
  if (candidate.plan) {
    const CostModel model = cost_model_for(communicator, call.memory);
    choice->prepared =
        std::make_shared<const PreparedPlan>(candidate.plan->build(call, plan_tuning(*candidate.plan, call, model)));
  }
  return choice;
}

// The candidate named `name` serving the call, itself or inside a wrapper
// that serves it; null where none does.
std::shared_ptr<const Choice> build_named(const Communicator& communicator, const Call& call, std::string_view name) {
  const Candidate* named = find_candidate(call.collective, name);
  if (named && serves(*named, communicator, call)) {
    std::shared_ptr<const Choice> inner;
    if (named->role == CandidateRole::wraps) {
      inner = build_cheapest(communicator, named->inner_call(call));
      if (!inner) return nullptr;
    }
    return build(*named, communicator, call, std::move(inner));
  }
  for (const Candidate* wrapper : all_candidates()) {
    if (wrapper->role != CandidateRole::wraps || !serves(*wrapper, communicator, call)) continue;
    if (auto inner = build_named(communicator, wrapper->inner_call(call), name))
      return build(*wrapper, communicator, call, std::move(inner));
  }
  return nullptr;
}

std::string describe_choice(const Choice& choice) {
  std::string text(choice.candidate->name);
  if (choice.inner) text += cat(" of ", describe_choice(*choice.inner));
  return text;
}

}  // namespace

std::shared_ptr<const Choice> choose(const Communicator& communicator, const Call& call, std::string_view requested) {
  std::string_view name = requested;
  std::string_view origin = "requested";
  if (requested == "auto") {
    const auto& overrides = communicator.settings().algorithm_overrides;
    if (auto override = overrides.find(call.collective); override != overrides.end()) {
      name = override->second;
      origin = "CHORUS_ALGO";
    }
  }
  if (name == "auto") {
    std::shared_ptr<const Choice> best = build_cheapest(communicator, call);
    if (!best)
      throw InvalidArgument(cat("rank ", call.rank, ": no ", to_string(call.collective), " algorithm can run ",
                                describe_signature(call_signature(call)), " on ", to_string(call.memory),
                                " memory over ", call.size, " ranks (known: ", candidate_names(call.collective),
                                ")"));
    CHORUS_LOG(debug, call.rank, to_string(call.collective), ": auto chose ", describe_choice(*best), " for ",
               call.bytes(), " bytes on ", call.size, " ranks, predicted ", best->cost_seconds * 1e6, " us");
    return best;
  }
  const Candidate* named = find_candidate(call.collective, name);
  if (!named)
    throw InvalidArgument(cat("rank ", call.rank, ": unknown ", to_string(call.collective), " algorithm '", name,
                              "' (", origin, "; valid: ", candidate_names(call.collective), ")"));
  std::shared_ptr<const Choice> choice = build_named(communicator, call, name);
  if (!choice) {
    if (named->why_not) throw InvalidArgument(named->why_not(*named, communicator, call));
    throw InvalidArgument(cat("rank ", call.rank, ": ", to_string(call.collective), " algorithm '", name,
                              "' cannot run ", describe_signature(call_signature(call)), " on ", call.size,
                              " ranks (valid: ", candidate_names(call.collective), ")"));
  }
  CHORUS_LOG(debug, call.rank, to_string(call.collective), ": using ", describe_choice(*choice), " (", origin,
             "), predicted ", choice->cost_seconds * 1e6, " us");
  return choice;
}

const Algorithm& select_algorithm(const Call& call, std::string_view requested, const CostModel& model,
                                  const std::map<Collective, std::string>& overrides) {
  std::string_view name = requested;
  std::string_view origin = "requested";
  if (requested == "auto") {
    auto override = overrides.find(call.collective);
    if (override != overrides.end()) {
      name = override->second;
      origin = "CHORUS_ALGO";
    }
  }

  if (name != "auto") {
    const Algorithm* algorithm = find_algorithm(call.collective, name);
    if (!algorithm)
      throw InvalidArgument(cat("rank ", call.rank, ": unknown ", to_string(call.collective), " algorithm '", name,
                                "' (", origin, "; valid: ", algorithm_names(call.collective), ")"));
    if (!algorithm->supports(call))
      throw InvalidArgument(cat("rank ", call.rank, ": ", to_string(call.collective), " algorithm '", name,
                                "' cannot run ", describe_signature(call_signature(call)), " on ", call.size,
                                " ranks (valid: ", algorithm_names(call.collective), ")"));
    CHORUS_LOG(debug, call.rank, to_string(call.collective), ": using ", name, " (", origin, "), predicted ",
               algorithm->cost_seconds(call, model) * 1e6, " us", describe_segments(*algorithm, call, model));
    return *algorithm;
  }

  const Algorithm* best = nullptr;
  double best_cost = 0;
  for (const Algorithm& algorithm : all_algorithms()) {
    if (algorithm.collective != call.collective || !algorithm.supports(call)) continue;
    double cost = algorithm.cost_seconds(call, model);
    if (!best || cost < best_cost) {
      best = &algorithm;
      best_cost = cost;
    }
  }
  if (!best)
    throw InvalidArgument(cat("rank ", call.rank, ": no ", to_string(call.collective), " algorithm can run ",
                              describe_signature(call_signature(call)), " on ", call.size,
                              " ranks (known: ", algorithm_names(call.collective), ")"));
  CHORUS_LOG(debug, call.rank, to_string(call.collective), ": auto chose ", best->name, " for ", call.bytes(),
             " bytes on ", call.size, " ranks, predicted ", best_cost * 1e6, " us",
             describe_segments(*best, call, model));
  return *best;
}

}  // namespace chorus::algorithms
