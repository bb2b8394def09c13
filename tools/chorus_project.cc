// chorus-project: projected time and bus bandwidth of every algorithm of a
// collective on a model network of any size, and what `auto` would choose
// there (docs/scale.md):
//
//   chorus-project --hosts 1024 --ranks-per-host 8 --local alpha_us=2,gbps=20
//       --remote alpha_us=5,gbps=12.5 --oversubscription 4 --op allreduce --sizes 8,1K,1M,1G
//
// Each time is labelled with how it was found: "simulated" (every rank's
// Plan run on the model), "symmetric" (host 0's Plans, standing for every
// host) or "formula" (the algorithm's cost formula, for jobs too large to
// simulate and Plans that are not the same on every host).
#include <cstdio>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include "algorithms/selection/registry.h"
#include "algorithms/selection/selection.h"
#include "base/error.h"
#include "base/link_model.h"
#include "base/log.h"
#include "base/version.h"
#include "simulation/projection.h"
#include "tools/flag_checks.h"

namespace {

using namespace chorus;
using namespace chorus::algorithms;

const Collective projectable[] = {Collective::allreduce, Collective::broadcast, Collective::reduce,
                                  Collective::reduce_scatter, Collective::allgather, Collective::gather,
                                  Collective::scatter, Collective::alltoall};

Collective parse_collective(const std::string& name) {
  std::string names;
  for (Collective collective : projectable) {
    if (to_string(collective) == name) return collective;
    names += cat(names.empty() ? "" : ", ", to_string(collective));
  }
  throw InvalidArgument(cat("--op: unknown collective '", name, "' (valid: ", names, ")"));
}

// "8,1K,64K,1M" with K, M, G, T = 2^10, 2^20, 2^30, 2^40.
std::vector<size_t> parse_sizes(const std::string& text) {
  std::vector<size_t> sizes;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t comma = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, comma - begin);
    begin = comma + 1;
    std::string why;
    const std::optional<size_t> value = tools::parse_byte_size(item, why);
    if (!value) throw InvalidArgument(cat("--sizes: ", why));
    if (*value == 0) throw InvalidArgument("--sizes: a size must be at least 1 byte");
    sizes.push_back(*value);
  }
  return sizes;
}

// The least memory the model takes per rank: its rank and host tables,
// copied a few times over (about 150 bytes a rank was measured at 10M
// ranks), so a job no host could model is refused before it is built.
constexpr size_t kModelBytesPerRank = 64;

bool blocks_per_rank(Collective collective) {
  return collective == Collective::allgather || collective == Collective::reduce_scatter ||
         collective == Collective::gather || collective == Collective::scatter || collective == Collective::alltoall;
}

// nccl-tests' bus bandwidth factors, as chorus-bench prints them.
double bus_factor(Collective collective, int ranks) {
  const double n = ranks;
  if (ranks <= 1) return 0;
  if (collective == Collective::allreduce) return 2 * (n - 1) / n;
  if (blocks_per_rank(collective)) return (n - 1) / n;
  return 1;
}

ProjectionMethod parse_method(const std::string& name) {
  for (ProjectionMethod method : {ProjectionMethod::automatic, ProjectionMethod::simulated,
                                  ProjectionMethod::symmetric, ProjectionMethod::formula})
    if (to_string(method) == name) return method;
  throw InvalidArgument(cat("--method: expected automatic, simulated, symmetric or formula, got '", name, "'"));
}

std::string fixed(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

struct Row {
  const Algorithm* algorithm = nullptr;
  Projection projection;
  std::string failure;  // why there is no projection
};

std::string method_label(const Projection& projection) {
  if (projection.method == ProjectionMethod::symmetric)
    return cat("symmetric (", to_string(projection.symmetry), ")");
  return std::string(to_string(projection.method));
}

struct Settings {
  NetworkModel network;
  Collective collective = Collective::allreduce;
  std::vector<size_t> sizes;
  std::vector<const Algorithm*> algorithms;
  ProjectionOptions options;
  bool csv = false;
};

void project_size(const Settings& settings, size_t bytes) {
  const NetworkModel& network = settings.network;
  const size_t elements = bytes / element_size(DataType::float32);
  const size_t count = blocks_per_rank(settings.collective) ? elements / static_cast<size_t>(network.ranks()) : elements;
  if (count == 0) {
    if (!settings.csv) std::printf("%14zu  (too small: less than one float32 per rank)\n", bytes);
    return;
  }
  const Call call = model_call(settings.collective, count, network);
  const size_t total_bytes = blocks_per_rank(settings.collective) ? count * 4 * static_cast<size_t>(network.ranks())
                                                                  : count * 4;
  std::vector<Row> rows;
  const Row* best = nullptr;
  for (const Algorithm* algorithm : settings.algorithms) {
    if (!algorithm->supports(call)) continue;
    Row row{algorithm, {}, {}};
    try {
      row.projection = project(*algorithm, call, network, settings.options);
    } catch (const Error& error) {
      row.failure = error.what();
    }
    rows.push_back(row);
  }
  for (const Row& row : rows)
    if (row.failure.empty() && (!best || row.projection.seconds < best->projection.seconds)) best = &row;
  const Algorithm& chosen = select_algorithm(call, "auto", network.cost_model(), {});
  const Row* chosen_row = nullptr;
  for (const Row& row : rows)
    if (row.algorithm == &chosen) chosen_row = &row;

  const double factor = bus_factor(settings.collective, network.ranks());
  for (const Row& row : rows) {
    const double seconds = row.projection.seconds;
    const double busbw = seconds > 0 ? static_cast<double>(total_bytes) / seconds * factor * 1e-9 : 0;
    std::string mark = &row == best ? "best" : "";
    if (row.algorithm == &chosen) mark += mark.empty() ? "auto" : "+auto";
    if (settings.csv) {
      std::printf("%zu,%.*s,%.9g,%.6g,%s,%s\n", total_bytes, static_cast<int>(row.algorithm->name.size()),
                  row.algorithm->name.data(), seconds, busbw,
                  row.failure.empty() ? std::string(to_string(row.projection.method)).c_str() : "failed", mark.c_str());
    } else if (!row.failure.empty()) {
      std::printf("%14zu  %-20.*s  failed: %s\n", total_bytes, static_cast<int>(row.algorithm->name.size()),
                  row.algorithm->name.data(), row.failure.c_str());
    } else {
      std::printf("%14zu  %-20.*s %14.2f %12.3f  %-20s %s\n", total_bytes,
                  static_cast<int>(row.algorithm->name.size()), row.algorithm->name.data(), seconds * 1e6, busbw,
                  method_label(row.projection).c_str(), mark.c_str());
    }
  }
  if (settings.csv || !best) return;
  const double predicted = chosen.cost_seconds(call, network.cost_model());
  std::string verdict = "not among the projected algorithms";
  if (chosen_row && chosen_row->failure.empty())
    verdict = cat("projected ", fixed(chosen_row->projection.seconds * 1e6), " us, ",
                  fixed(chosen_row->projection.seconds / best->projection.seconds), "x the best (",
                  best->algorithm->name, ")");
  std::printf("%14zu  auto chooses %.*s (its formula says %.2f us): %s\n", total_bytes,
              static_cast<int>(chosen.name.size()), chosen.name.data(), predicted * 1e6, verdict.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chorus-project: projected time and bus bandwidth of each algorithm of a collective on a model "
               "network (hosts x ranks per host, per-level alpha/beta, an optionally oversubscribed core), and "
               "the algorithm auto would choose (docs/scale.md)"};
  app.set_version_flag("--version", std::string("chorus-project ") + chorus::version());
  Settings settings;
  int hosts = 0, ranks_per_host = 1;
  std::string local_text, remote_text, op = "allreduce", sizes_text = "8,1K,64K,1M,16M,256M", algos = "all";
  std::string method = "automatic";
  double gamma_gbps = 1e-9 / settings.network.gamma_seconds_per_byte;
  double oversubscription = 1;
  double step_us = algorithms::kExecutorStepSeconds * 1e6;
  app.add_option("--hosts", hosts, "Hosts in the model network")
      ->required()
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  app.add_option("--ranks-per-host", ranks_per_host, "Ranks on each host")
      ->capture_default_str()
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  app.add_option("--local", local_text, "Link between ranks of one host: alpha_us=..,gbps=.. (GB/s) (default: alpha_us=2,gbps=20)");
  app.add_option("--remote", remote_text,
                 "Each host's uplink and downlink, shared by its ranks: alpha_us=..,gbps=.. (default: alpha_us=5,gbps=12.5)");
  app.add_option("--gamma-gbps", gamma_gbps, "Reduction speed of one rank, GB/s")->capture_default_str();
  app.add_option("--step-us", step_us, "The executor's own work per message on top of a link's alpha, us (what "
                                       "auto assumes: algorithms/model/cost_model.h)")->capture_default_str();
  app.add_option("--oversubscription", oversubscription,
                 "The core carries hosts x uplink / this (1: full bisection)")
      ->capture_default_str()
      ->check(tools::FiniteRange(1, 1e12));
  app.add_option("--op", op, "Collective: allreduce, broadcast, reduce, reduce_scatter, allgather, gather, scatter, "
                             "alltoall")->capture_default_str();
  app.add_option("--sizes", sizes_text, "Buffer sizes in bytes, K/M/G = 2^10/2^20/2^30 (the whole buffer, as "
                                        "chorus-bench counts it)")->capture_default_str();
  app.add_option("--algo", algos, "all, or comma-separated algorithm names")->capture_default_str();
  app.add_option("--method", method, "automatic, simulated, symmetric or formula")->capture_default_str();
  app.add_option("--step-budget", settings.options.step_budget,
                 "Most Plan steps one simulation may hold before falling back")
      ->capture_default_str()
      ->check(tools::DecimalDigits())
      ->check(CLI::Range(size_t{1}, std::numeric_limits<size_t>::max()));
  app.add_flag("--csv", settings.csv, "Rows as bytes,algorithm,seconds,busbw_gbps,method,mark");
  CLI11_PARSE(app, argc, argv);

  try {
    if (const std::string problem = tools::log_setting_problem(); !problem.empty()) throw InvalidArgument(problem);
    const long long ranks = static_cast<long long>(hosts) * ranks_per_host;
    if (ranks > std::numeric_limits<int>::max())
      throw InvalidArgument(cat("--hosts ", hosts, " x --ranks-per-host ", ranks_per_host, " is ", ranks,
                                " ranks, more than a job can hold (", std::numeric_limits<int>::max(), ")"));
    const std::string memory = tools::memory_shortfall(
        cat("--hosts ", hosts, " x --ranks-per-host ", ranks_per_host, " (", ranks, " ranks to model)"),
        tools::saturating_multiply(static_cast<size_t>(ranks), kModelBytesPerRank), 0);
    if (!memory.empty()) throw InvalidArgument(memory);
    NetworkModel& network = settings.network;
    network.hosts = hosts;
    network.ranks_per_host = ranks_per_host;
    for (auto [flag, text, link] : {std::tuple{"--local", &local_text, &network.local},
                                    std::tuple{"--remote", &remote_text, &network.remote}}) {
      try {
        if (!text->empty()) *link = parse_link_model(*text, *link);
      } catch (const InvalidArgument& error) {
        throw InvalidArgument(cat(flag, " ", *text, ": ", error.what()));
      }
    }
    if (!(gamma_gbps > 0) || gamma_gbps > 1e12) throw InvalidArgument("--gamma-gbps must be a positive number");
    network.gamma_seconds_per_byte = 1e-9 / gamma_gbps;
    network.oversubscription = oversubscription;
    if (!(step_us >= 0) || step_us > 1e9) throw InvalidArgument("--step-us must be a non-negative number");
    network.step_seconds = step_us * 1e-6;
    network.validate();
    settings.collective = parse_collective(op);
    settings.sizes = parse_sizes(sizes_text);
    settings.options.method = parse_method(method);
    if (algos == "all") {
      for (const Algorithm& algorithm : all_algorithms())
        if (algorithm.collective == settings.collective) settings.algorithms.push_back(&algorithm);
    } else {
      size_t begin = 0;
      while (begin <= algos.size()) {
        const size_t comma = std::min(algos.find(',', begin), algos.size());
        const std::string name = algos.substr(begin, comma - begin);
        begin = comma + 1;
        const Algorithm* algorithm = find_algorithm(settings.collective, name);
        if (!algorithm)
          throw InvalidArgument(cat("--algo: no ", op, " algorithm '", name, "' (valid: ",
                                    algorithm_names(settings.collective), ")"));
        settings.algorithms.push_back(algorithm);
      }
    }
    if (settings.csv) {
      std::printf("bytes,algorithm,seconds,busbw_gbps,method,mark\n");
    } else {
      std::printf("# chorus-project: %s, %d ranks (%s)\n", op.c_str(), network.ranks(), network.describe().c_str());
      std::printf("#      size(B)  %-20s %14s %12s  %-20s %s\n", "algorithm", "time(us)", "busbw(GB/s)", "method",
                  "mark");
    }
    for (size_t bytes : settings.sizes) project_size(settings, bytes);
  } catch (const InvalidArgument& error) {
    std::fprintf(stderr, "chorus-project: error: %s\n", error.what());
    return 2;
  } catch (const std::bad_alloc&) {
    // The estimate above is a floor: a model past this host's memory still ends with the flags to change.
    std::fprintf(stderr, "chorus-project: error: --hosts %d x --ranks-per-host %d: this host ran out of memory "
                         "modelling so many ranks\n", hosts, ranks_per_host);
    return 2;
  }
  return 0;
}
