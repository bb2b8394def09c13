// Algorithm selection and the CHORUS_ALGO override.
#include "algorithms/selection.h"

#include <string>

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
    if (find_algorithm(*collective, algorithm_name) == nullptr)
      throw InvalidArgument(cat("unknown ", collective_name, " algorithm '", algorithm_name,
                                "' (valid: ", algorithm_names(*collective), ")"));
    if (!overrides.emplace(*collective, std::string(algorithm_name)).second)
      throw InvalidArgument(cat("collective '", collective_name, "' named twice"));
  }
  return overrides;
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
