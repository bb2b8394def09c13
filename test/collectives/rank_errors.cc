#include "test/collectives/rank_errors.h"

#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "algorithms/selection/registry.h"
#include "base/log.h"
#include "chorus/chorus.h"
#include "rendezvous/file_store.h"
#include "rendezvous/prefix_store.h"

namespace chorus::collective_test {
namespace {

constexpr auto fresh_timeout = std::chrono::milliseconds(20000);

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// A new Context for the same ranks, through the job's store under its own
// prefix (the driver runs these jobs with a file store).
std::shared_ptr<Context> fresh_context(Context& main, const std::string& phase) {
  const std::string url = env("CHORUS_STORE");
  const std::string file_scheme = "file://";
  if (url.rfind(file_scheme, 0) != 0)
    throw InvalidArgument(cat("collective_rank: the error cases need a file:// store, got '", url, "'"));
  auto store = std::make_shared<PrefixStore>(cat(env("CHORUS_JOB_ID"), "/", phase),
                                             std::make_shared<FileStore>(url.substr(file_scheme.size())));
  StoreBootstrap bootstrap(store, main.rank(), main.size(), fresh_timeout);
  ConnectOptions options;
  options.timeout = fresh_timeout;
  return connect(bootstrap, options);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Runs `call` and checks it throws InvalidArgument (or, when a peer made the
// same bad call first and aborted, any error carrying the peer's reason)
// whose text contains every one of `parts`.
std::string expect_rejected(const char* name, const std::function<void()>& call,
                            const std::vector<std::string>& parts, bool peer_reason_allowed) {
  std::string text;
  try {
    call();
    return cat(name, ": succeeded but must fail");
  } catch (const InvalidArgument& error) {
    text = error.what();
  } catch (const TimeoutError& error) {
    return cat(name, ": timed out instead of failing at once: ", error.what());
  } catch (const Error& error) {
    if (!peer_reason_allowed) return cat(name, ": expected InvalidArgument, got: ", error.what());
    text = error.what();
  }
  for (const std::string& part : parts)
    if (!contains(text, part)) return cat(name, ": error text lacks '", part, "': ", text);
  return "";
}

bool power_of_two(int size) { return (size & (size - 1)) == 0; }

std::string unknown_algorithm(Context& context) {
  // Only rank 0 asks for the bad name: the others must hear why at once.
  std::vector<float> data(10, 1.0f);
  CollectiveOptions options;
  if (context.rank() == 0) options.algorithm = "no_such_algorithm";
  return expect_rejected(
      "unknown algorithm", [&] { allreduce(context, std::span(data), ReduceOp::sum, options); },
      {"no_such_algorithm", "valid: ", algorithms::algorithm_names(algorithms::Collective::allreduce)}, true);
}

std::string unsupported_algorithm(algorithms::Collective collective, const char* name,
                                  const std::function<void(const CollectiveOptions&)>& call) {
  CollectiveOptions options;
  options.algorithm = name;
  return expect_rejected(cat(algorithms::to_string(collective), " ", name).c_str(), [&] { call(options); },
                         {name, "cannot run", "valid: ", algorithms::algorithm_names(collective)}, true);
}

std::string size_mismatch(Context& context) {
  if (context.rank() == 0) {
    std::vector<float> data(10, 2.0f);
    try {
      send(context, std::span(data), 1, 99);
    } catch (const Error&) {
      // Rank 1 may have aborted before the send finished: fine either way.
    }
    // Rank 1's MismatchError must reach this rank too, not leave it waiting:
    // in rank 1's words, whether it came straight from rank 1 or was relayed.
    std::vector<float> never(1);
    return expect_rejected("mismatch seen by the sender", [&] { recv(context, std::span(never), 1, 100); },
                           {"rank 1: peer rank 0 sent send of 10 float32 (40 bytes)"}, true);
  }
  if (context.rank() != 1) return "";
  std::vector<float> data(12);
  try {
    recv(context, std::span(data), 0, 99);
    return "receiving 12 floats where 10 were sent succeeded";
  } catch (const MismatchError& error) {
    if (!contains(error.what(), "rank 1") || !contains(error.what(), "48") || !contains(error.what(), "40"))
      return cat("MismatchError does not name the rank and both sizes: ", error.what());
  } catch (const std::exception& error) {
    return cat("expected MismatchError for a size mismatch, got: ", error.what());
  }
  return "";
}

// Local argument errors: InvalidArgument on the calling rank before
// anything moves, even on a Context an earlier error already finished.
std::string bad_arguments(Context& context) {
  std::vector<float> data(4);
  const int rank = context.rank();
  const auto size = static_cast<size_t>(context.size());
  std::vector<float> big(4 * size);
  std::vector<size_t> short_counts(size - 1, 4);
  const std::pair<const char*, std::function<void()>> cases[] = {
      {"send to oneself", [&] { send(context, std::span(data), rank, 1); }},
      {"recv from a rank out of range", [&] { recv(context, std::span(data), context.size(), 1); }},
      {"allgatherv with too few counts",
       [&] { allgatherv(context, data.data(), big.data(), short_counts, DataType::float32); }},
      {"reduce to a root out of range",
       [&] { reduce(context, std::span<const float>(data), std::span(big), ReduceOp::sum, context.size()); }},
      {"allgather output too small", [&] { allgather(context, std::span<const float>(data), std::span(data)); }},
      {"gather with partially overlapping buffers",
       [&] { gather(context, big.data() + 1, big.data(), 4, DataType::float32, rank); }},
  };
  const char* expected_words[] = {"itself", "out of range", "one per rank", "root", "blocks", "overlap"};
  size_t i = 0;
  for (const auto& [name, call] : cases) {
    std::string failure = expect_rejected(name, call, {cat("rank ", rank), expected_words[i++]}, false);
    if (!failure.empty()) return failure;
  }
  return "";
}

}  // namespace

std::string check_errors(Context& main, size_t& checks) {
  using algorithms::Collective;
  using algorithms::find_algorithm;
  std::vector<std::pair<const char*, std::function<std::string(Context&)>>> phases;
  phases.emplace_back("unknown-algorithm", unknown_algorithm);
  if (!power_of_two(main.size()) && find_algorithm(Collective::allgather, "recursive_doubling"))
    phases.emplace_back("unsupported-allgather", [](Context& context) {
      return unsupported_algorithm(Collective::allgather, "recursive_doubling",
                                   [&](const CollectiveOptions& options) {
                                     std::vector<float> in(3), out(3 * static_cast<size_t>(context.size()));
                                     allgather(context, std::span<const float>(in), std::span(out), options);
                                   });
    });
  if (find_algorithm(Collective::alltoall, "bruck"))
    phases.emplace_back("unsupported-alltoallv", [](Context& context) {
      return unsupported_algorithm(Collective::alltoall, "bruck", [&](const CollectiveOptions& options) {
        std::vector<size_t> counts(static_cast<size_t>(context.size()), 2);
        std::vector<float> in(counts.size() * 2), out(counts.size() * 2);
        alltoallv(context, std::span<const float>(in), counts, std::span(out), counts, options);
      });
    });
  if (main.size() >= 2) phases.emplace_back("size-mismatch", size_mismatch);
  phases.emplace_back("bad-arguments", bad_arguments);

  for (auto& [phase, check] : phases) {
    std::string failure;
    try {
      std::shared_ptr<Context> context = fresh_context(main, phase);
      failure = check(*context);
    } catch (const std::exception& error) {
      failure = cat("unexpected error: ", error.what());
    }
    if (!failure.empty()) return cat("rank ", main.rank(), ": ", phase, ": ", failure);
    ++checks;
  }
  return "";
}

}  // namespace chorus::collective_test
