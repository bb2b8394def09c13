// One rank of a real-socket job with several streams per pair of ranks
// (started by test_streams through test/integration's RankJob):
//   stripe N   connects with N streams and runs, bit-exactly, the collectives
//              whose messages cross the striping threshold (algorithms/execution/striping.h):
//              just under it, at it, just over it, large, odd byte counts, and
//              uneven v-counts
//   mismatch   checks that bad stream counts are refused before connecting,
//              then connects with 2 streams on rank 1 and 1 elsewhere, which
//              every rank must refuse at once, naming both counts
// and prints one line the driver parses:
//   RESULT rank=1 status=ok cases=31 ms=12 what=...
#include <chorus/chorus.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "algorithms/execution/striping.h"
#include "base/log.h"
#include "oracle/collective_cases.h"

namespace {

using namespace chorus;
using namespace chorus::oracle;
using algorithms::Collective;
using Clock = std::chrono::steady_clock;

int report(int rank, bool ok, size_t cases, long long ms, const std::string& what) {
  std::printf("RESULT rank=%d status=%s cases=%zu ms=%lld what=%s\n", rank, ok ? "ok" : "fail", cases, ms,
              what.c_str());
  std::fflush(stdout);
  return ok ? 0 : 1;
}

// Elements of float32 whose bytes sit at the threshold.
constexpr size_t kAt = algorithms::kStripeMinBytes / 4;

std::vector<Case> striping_cases(int rank, int size) {
  const auto ranks = static_cast<size_t>(size);
  std::vector<Case> cases;
  auto add = [&](Collective collective, const char* algorithm, size_t count, DataType type = DataType::float32,
                 ReduceOp op = ReduceOp::sum, int root = 0) -> Case& {
    Case test;
    test.call = algorithms::make_call(collective, rank, size, count, type, op, root, false);
    test.algorithm = algorithm;
    cases.push_back(test);
    return cases.back();
  };
  // Ring allreduce sends one block of count/size per step (cut into 512 KiB
  // segments): blocks just under, at and over the threshold, then large.
  for (size_t count : {ranks * kAt - ranks, ranks * kAt, ranks * kAt + 1, ranks * (size_t{3} << 20) + 5})
    add(Collective::allreduce, "ring", count);
  add(Collective::allreduce, "ring", ranks * 262147, DataType::uint8, ReduceOp::max);  // odd byte counts
  add(Collective::allreduce, "ring", 2 * kAt + 11).async = true;
  for (size_t count : {kAt - 1, 2 * kAt, size_t{1} << 20})
    add(Collective::allreduce, "halving_doubling", count, DataType::int32, ReduceOp::sum);
  add(Collective::allreduce, "halving_doubling", 3 * kAt + 1).call.in_place = true;
  // Chain broadcast sends the whole buffer in segments.
  for (size_t count : {kAt - 1, kAt, kAt + 1, (size_t{1} << 20) + 3})
    add(Collective::broadcast, "chain", count, DataType::float32, ReduceOp::sum, size - 1);
  add(Collective::broadcast, "chain", 3 * kAt * 4 + 7, DataType::int8, ReduceOp::sum, 0);
  // Ring allgather forwards one rank's block per step.
  for (size_t count : {kAt - 1, kAt, kAt + 3, 5 * kAt}) add(Collective::allgather, "ring", count);
  add(Collective::allgather, "ring", 4 * kAt + 1, DataType::int8).call.in_place = true;
  Case& allgatherv = add(Collective::allgather, "ring", 0);
  allgatherv.call.counts.assign(ranks, 0);
  for (size_t r = 0; r < ranks; ++r) allgatherv.call.counts[r] = r % 3 == 1 ? 0 : kAt + 1000 * r + r % 2;
  // Pairwise alltoall sends one block per peer; alltoallv blocks of 0, s+1, 2(s+1).
  for (size_t count : {kAt - 1, kAt, 3 * kAt + 5}) add(Collective::alltoall, "pairwise", count);
  for (size_t scale : {kAt - 1, 2 * kAt + 12}) {
    Case& alltoallv = add(Collective::alltoall, "pairwise", scale);
    alltoallv.call.send_counts = {1};  // marks alltoallv (collective_cases.h)
    alltoallv.call.recv_counts = {1};
  }
  // Ring reduce-scatter with uneven blocks, one of them empty.
  Case& reduce_scatterv = add(Collective::reduce_scatter, "ring", 0);
  reduce_scatterv.call.counts.assign(ranks, 0);
  for (size_t r = 0; r < ranks; ++r) reduce_scatterv.call.counts[r] = r == 0 ? 0 : kAt * r + 17;
  return cases;
}

int run_stripes(int streams) {
  ConnectOptions options;
  options.timeout = std::chrono::milliseconds(30000);
  options.streams = streams;
  // Streams are TCP's: on one host every pair would otherwise take shared memory.
  options.transports = {"tcp"};
  const auto started = Clock::now();
  std::shared_ptr<Context> context = connect_from_env(options);
  const int rank = context->rank();
  auto elapsed = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  };
  for (int peer = 0; peer < context->size(); ++peer) {
    if (peer == rank) continue;
    const PeerLink link = context->link_to(peer);
    if (link.transport != "tcp" || link.streams != streams)
      return report(rank, false, 0, elapsed(),
                    cat("rank ", peer, " is served by ", link.transport, " with ", link.streams, " streams"));
  }
  size_t run = 0;
  for (const Case& test : striping_cases(rank, context->size())) {
    std::string failure = run_case(*context, test);
    if (!failure.empty()) return report(rank, false, run, elapsed(), cat(describe(test), ": ", failure));
    ++run;
  }
  barrier(*context);
  return report(rank, true, run, elapsed(), cat(streams, " streams"));
}

// Fails every use: options that are refused must be refused before the bootstrap is touched.
class UnusableBootstrap final : public Bootstrap {
 public:
  UnusableBootstrap(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte>) override {
    throw std::logic_error("the bootstrap was used");
  }
  void barrier() override { throw std::logic_error("the bootstrap was used"); }

 private:
  int rank_, size_;
};

// "" when connecting with these options (and CHORUS_STREAMS=env, if given)
// throws InvalidArgument naming the rank and `value`.
std::string refused(int rank, std::optional<int> streams, const char* env, const std::string& value) {
  UnusableBootstrap bootstrap(rank, 3);
  ConnectOptions options;
  options.streams = streams;
  if (env) ::setenv("CHORUS_STREAMS", env, 1);
  std::string problem;
  try {
    connect(bootstrap, options);
    problem = "connected";
  } catch (const InvalidArgument& error) {
    const std::string text = error.what();
    if (text.find(cat("rank ", rank)) == std::string::npos || text.find(value) == std::string::npos)
      problem = cat("the message does not name rank ", rank, " and ", value, ": ", text);
  } catch (const std::exception& error) {
    problem = cat("wrong error: ", error.what());
  }
  ::unsetenv("CHORUS_STREAMS");
  return problem.empty() ? "" : cat("streams ", streams ? std::to_string(*streams) : "unset", " env ",
                                    env ? env : "unset", ": ", problem);
}

int run_mismatch(int rank) {
  for (const std::string& problem :
       {refused(rank, 0, nullptr, "= 0"), refused(rank, 17, nullptr, "= 17"), refused(rank, -1, "2", "= -1"),
        refused(rank, std::nullopt, "x", "CHORUS_STREAMS='x'"), refused(rank, std::nullopt, "0", "'0'"),
        refused(rank, std::nullopt, "2 ", "'2 '")})
    if (!problem.empty()) return report(rank, false, 0, 0, problem);

  const int streams = rank == 1 ? 2 : 1;
  ConnectOptions options;
  options.timeout = std::chrono::milliseconds(30000);
  options.streams = streams;
  // Streams are TCP's: on one host every pair would otherwise take shared memory.
  options.transports = {"tcp"};
  const auto started = Clock::now();
  auto elapsed = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  };
  try {
    connect_from_env(options);
  } catch (const InvalidArgument& error) {
    const std::string text = error.what();
    const bool names_both = rank == 1 ? text.find("rank 1 uses 2 streams") != std::string::npos &&
                                            text.find("rank 0 uses 1") != std::string::npos
                                      : text.find(cat("rank ", rank, " uses 1 stream per peer")) != std::string::npos &&
                                            text.find("rank 1 uses 2") != std::string::npos;
    return report(rank, names_both, 6, elapsed(), text);
  } catch (const std::exception& error) {
    return report(rank, false, 6, elapsed(), cat("wrong error: ", error.what()));
  }
  return report(rank, false, 6, elapsed(), "connected with mismatched stream counts");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  try {
    if (scenario == "stripe" && argc > 2) return run_stripes(std::atoi(argv[2]));
    if (scenario == "mismatch") return run_mismatch(std::atoi(std::getenv("CHORUS_RANK")));
  } catch (const std::exception& error) {
    const char* rank = std::getenv("CHORUS_RANK");
    return report(rank ? std::atoi(rank) : -1, false, 0, 0, cat("unexpected error: ", error.what()));
  }
  std::fprintf(stderr, "usage: streams_rank stripe N | mismatch\n");
  return 2;
}
