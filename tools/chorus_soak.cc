// chorus-soak: mixed collectives with random sizes, types, ops, roots and
// algorithms, every result checked bit-exactly, for as long as asked:
//
//   chorus-run -n 4 -- chorus-soak --count 100000 --max-bytes 256K
//   chorus-run -n 4 --fake-hosts 2,2 -- chorus-soak --seconds 600 --seed 7
//   CHORUS_TRANSPORT=tcp chorus-run -n 4 -- chorus-soak --count 2000
//
// Every rank derives the same sequence from --seed (tools/soak_ops.h), so no
// rank tells another what comes next. A step is one operation, or a batch of
// two to four issued back to back (the async ones in flight together) and
// then checked; now and then the job splits into sub-groups
// (Context::split) that run some operations on their own for a while.
// Inputs are small integers, so every result is exact whatever the
// reduction order; each rank compares its own output with the one it
// computes locally (oracle/reference_data.h), bit for bit, along with guard
// bytes after every buffer and inputs that must stay untouched. A wrong
// result prints seed, step, collective, type, op, counts, root, algorithm,
// rank and the first differing element, and exits 1 (--keep-going counts
// and goes on). At the end rank 0 prints what ran, summed over the ranks.
#include <chorus/chorus.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "algorithms/selection/registry.h"
#include "base/log.h"
#include "base/version.h"
#include "oracle/collective_cases.h"
#include "oracle/reference_data.h"
#include "tools/flag_checks.h"
#include "tools/soak_ops.h"

namespace {

using namespace chorus;
using namespace chorus::soak;
using Clock = std::chrono::steady_clock;

struct SoakOptions {
  uint64_t seed = 1;
  uint64_t count = 1000;
  double seconds = 0;
  size_t max_bytes = 4 << 20;
  uint64_t report_every = 0;
  // Unset: CHORUS_TIMEOUT, else the library's default (a tool's default
  // never beats the job's setting).
  std::optional<double> timeout_seconds;
  std::string kinds_text = "all";
  double split_chance = 0.02;
  int batch = 4;
  bool keep_going = false;
  bool trace = false;
  // Flip a byte of each rank's first result from this collective on.
  std::optional<uint64_t> inject_wrong;
};

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", bytes, units[unit]);
  return text;
}

// What ran, counted by the rank leading each call (rank 0 of the Context it
// ran on), so the sum over ranks counts every call once; wrong results are
// counted by every rank that saw one. Summed over the ranks at the end.
class Tally {
 public:
  Tally() : values_(size(), 0) {}

  void count(const Operation& operation, bool on_child, bool batched) {
    const auto kind = static_cast<size_t>(operation.kind);
    ++values_[calls_at + kind];
    values_[bytes_at + kind] += operation.payload_bytes;
    if (operation.kind == Kind::sendrecv) {
      ++values_[types_at + static_cast<size_t>(operation.ring.type)];
      if (operation.ring.mode != 0) ++values_[flags_at + async_flag];
    } else {
      const oracle::Case& test = operation.test;
      ++values_[types_at + static_cast<size_t>(test.call.type)];
      ++values_[algorithm_index(test)];
      if (test.async) ++values_[flags_at + async_flag];
      if (test.call.in_place) ++values_[flags_at + in_place_flag];
      if (test.typed) ++values_[flags_at + typed_flag];
    }
    if (on_child) ++values_[flags_at + child_flag];
    if (batched) ++values_[flags_at + batched_flag];
  }
  void wrong() { ++values_[wrong_at]; }
  uint64_t wrong_count() const { return values_[wrong_at]; }
  void injected(bool caught) { ++values_[caught ? caught_at : missed_at]; }
  uint64_t caught_count() const { return values_[caught_at]; }
  uint64_t missed_count() const { return values_[missed_at]; }

  void sum_over_ranks(Context& context) {
    allreduce(context, std::span<uint64_t>(values_), ReduceOp::sum);
  }

  uint64_t calls() const {
    uint64_t total = 0;
    for (size_t kind = 0; kind < kind_count; ++kind) total += values_[calls_at + kind];
    return total;
  }
  uint64_t bytes() const {
    uint64_t total = 0;
    for (size_t kind = 0; kind < kind_count; ++kind) total += values_[bytes_at + kind];
    return total;
  }

  void print() const {
    std::printf("  %-18s %10s %12s\n", "collective", "calls", "payload");
    for (size_t kind = 0; kind < kind_count; ++kind)
      std::printf("  %-18s %10llu %12s\n", std::string(to_string(static_cast<Kind>(kind))).c_str(),
                  static_cast<unsigned long long>(values_[calls_at + kind]),
                  human_bytes(static_cast<double>(values_[bytes_at + kind])).c_str());
    std::printf("  algorithms:");
    const char* separator = "";
    const auto algorithms = algorithms::all_algorithms();
    for (size_t c = 0; c < collectives; ++c) {
      const auto collective = static_cast<algorithms::Collective>(c);
      for (size_t i = 0; i < algorithms.size(); ++i)
        if (algorithms[i].collective == collective && values_[algorithms_at + i] > 0) {
          std::printf("%s %s/%s %llu", separator, std::string(algorithms::to_string(collective)).c_str(),
                      std::string(algorithms[i].name).c_str(),
                      static_cast<unsigned long long>(values_[algorithms_at + i]));
          separator = ",";
        }
      if (values_[autos_at + c] > 0) {
        std::printf("%s %s/auto %llu", separator, std::string(algorithms::to_string(collective)).c_str(),
                    static_cast<unsigned long long>(values_[autos_at + c]));
        separator = ",";
      }
    }
    std::printf("\n  types:");
    for (size_t t = 0; t < type_count; ++t)
      std::printf("%s %s %llu", t == 0 ? "" : ",", std::string(to_string(static_cast<DataType>(t))).c_str(),
                  static_cast<unsigned long long>(values_[types_at + t]));
    std::printf("\n  forms: async %llu, in place %llu, typed (std::span) %llu, on split groups %llu, in multi-call "
                "steps %llu\n",
                static_cast<unsigned long long>(values_[flags_at + async_flag]),
                static_cast<unsigned long long>(values_[flags_at + in_place_flag]),
                static_cast<unsigned long long>(values_[flags_at + typed_flag]),
                static_cast<unsigned long long>(values_[flags_at + child_flag]),
                static_cast<unsigned long long>(values_[flags_at + batched_flag]));
  }

 private:
  static constexpr size_t collectives = static_cast<size_t>(algorithms::Collective::recv) + 1;
  static constexpr size_t type_count = static_cast<size_t>(DataType::float64) + 1;
  enum Flag : size_t { async_flag, in_place_flag, typed_flag, child_flag, batched_flag, flag_count };
  static constexpr size_t calls_at = 0;
  static constexpr size_t bytes_at = calls_at + kind_count;
  static constexpr size_t types_at = bytes_at + kind_count;
  static constexpr size_t flags_at = types_at + type_count;
  static constexpr size_t wrong_at = flags_at + flag_count;
  static constexpr size_t caught_at = wrong_at + 1;  // --inject-wrong
  static constexpr size_t missed_at = caught_at + 1;
  static constexpr size_t autos_at = missed_at + 1;
  static constexpr size_t algorithms_at = autos_at + collectives;
  static size_t size() { return algorithms_at + algorithms::all_algorithms().size(); }

  static size_t algorithm_index(const oracle::Case& test) {
    if (test.algorithm == "auto") return autos_at + static_cast<size_t>(test.call.collective);
    const auto algorithms = algorithms::all_algorithms();
    for (size_t i = 0; i < algorithms.size(); ++i)
      if (algorithms[i].collective == test.call.collective && algorithms[i].name == test.algorithm)
        return algorithms_at + i;
    return autos_at + static_cast<size_t>(test.call.collective);
  }

  std::vector<uint64_t> values_;
};

// Bytes after the ring's receive buffer that no receive may write.
constexpr size_t guard_bytes = 64;
constexpr std::byte guard_value{0xa5};
constexpr std::byte garbage{0xee};

// One operation of a step from issue to check.
struct Pending {
  Operation operation;
  Context* context = nullptr;
  std::string where;  // which group it ran on, for reports
  int index = 0;        // in its step
  uint64_t number = 0;  // collectives before it
  bool injected = false;
  std::unique_ptr<oracle::CheckedCall> checked;
  // sendrecv
  std::vector<std::byte> outgoing, sent, incoming, expected;
  std::vector<Work> works;

  void issue() {
    if (operation.kind != Kind::sendrecv) {
      checked = std::make_unique<oracle::CheckedCall>(operation.test);
      Work work = checked->issue(*context);
      if (work.valid()) works.push_back(std::move(work));
      return;
    }
    const RingExchange& ring = operation.ring;
    const int rank = context->rank(), size = context->size();
    const int right = (rank + ring.shift) % size, left = (rank + size - ring.shift) % size;
    const auto send_call =
        algorithms::make_call(algorithms::Collective::send, rank, size, ring.count, ring.type, ReduceOp::sum, right, false);
    const auto recv_call =
        algorithms::make_call(algorithms::Collective::recv, rank, size, ring.count, ring.type, ReduceOp::sum, left, false);
    outgoing = oracle::input_bytes_of(send_call, rank, ring.salt);
    sent = outgoing;
    expected = oracle::expected_output(recv_call, ring.salt);
    incoming.assign(expected.size() + guard_bytes, garbage);
    std::fill(incoming.begin() + static_cast<std::ptrdiff_t>(expected.size()), incoming.end(), guard_value);
    void* in = expected.empty() ? nullptr : incoming.data();
    const void* out = outgoing.empty() ? nullptr : outgoing.data();
    switch (ring.mode) {
      case 0:
        send(*context, out, ring.count, ring.type, right, ring.tag);
        recv(*context, in, ring.count, ring.type, left, ring.tag);
        break;
      case 1: {
        Work received = recv_async(*context, in, ring.count, ring.type, left, ring.tag);
        send(*context, out, ring.count, ring.type, right, ring.tag);
        works.push_back(std::move(received));
        break;
      }
      default:
        works.push_back(send_async(*context, out, ring.count, ring.type, right, ring.tag));
        works.push_back(recv_async(*context, in, ring.count, ring.type, left, ring.tag));
        break;
    }
  }

  void wait() {
    for (Work& work : works) work.wait();
  }

  // The bytes check() compares (empty where this rank gets no result).
  std::span<std::byte> result() {
    if (operation.kind != Kind::sendrecv) return checked->result_bytes();
    return {incoming.data(), expected.size()};
  }

  std::string check() const {
    if (operation.kind != Kind::sendrecv) return checked->check();
    const RingExchange& ring = operation.ring;
    const size_t element = element_size(ring.type);
    const std::string what = describe(operation);
    if (!expected.empty()) {
      const size_t index = oracle::first_difference(ring.type, expected, incoming.data());
      if (index * element < expected.size())
        return cat(what, ": received element ", index, " of ", ring.count, " is ",
                   oracle::element_text(ring.type, incoming.data() + index * element), ", expected ",
                   oracle::element_text(ring.type, expected.data() + index * element));
    }
    for (size_t i = expected.size(); i < incoming.size(); ++i)
      if (incoming[i] != guard_value) return cat(what, ": the receive wrote past the end of its buffer");
    if (outgoing != sent) return cat(what, ": the send modified its buffer");
    return "";
  }
};

struct Group {
  std::shared_ptr<Context> context;  // null on ranks that are not in it
  GroupShape shape;
  std::string where;
};

class Soak {
 public:
  Soak(const SoakOptions& options, std::shared_ptr<Context> world)
      : options_(options), world_(std::move(world)) {
    world_group_.context = world_;
    world_group_.shape = shape_of(*world_);
    world_group_.where = cat("whole job: rank ", world_->rank(), " of ", world_->size());
    limits_.max_bytes = options.max_bytes;
    limits_.kinds = parse_kinds(options.kinds_text);
    report_every_ = options.report_every;
  }

  int run() {
    const int rank = world_->rank();
    if (rank == 0) print_header();
    start_ = Clock::now();
    uint64_t next_report = report_every_;
    uint64_t step = 0;
    for (; done_ < options_.count; ++step) {
      if (options_.seconds > 0 && step % 16 == 0 && out_of_time()) break;
      if (!run_step(step) && !options_.keep_going) return 1;
      if (rank == 0 && report_every_ > 0 && done_ >= next_report) {
        const double elapsed = seconds_since_start();
        std::printf("chorus-soak: %llu collectives in %llu steps, %.1f s (%.0f/s), wrong so far on rank 0: %llu\n",
                    static_cast<unsigned long long>(done_), static_cast<unsigned long long>(step + 1), elapsed,
                    static_cast<double>(done_) / std::max(elapsed, 1e-9),
                    static_cast<unsigned long long>(tally_.wrong_count()));
        std::fflush(stdout);
        while (next_report <= done_) next_report += report_every_;
      }
    }
    child_ = Group{};
    const double elapsed = seconds_since_start();
    const uint64_t generated = done_;
    tally_.sum_over_ranks(*world_);
    const uint64_t wrong = tally_.wrong_count();
    if (rank == 0) {
      std::printf("chorus-soak: done: seed %llu, %d ranks on %d host%s, %llu steps, %llu collectives in %.1f s "
                  "(%.0f/s), payload %s, splits %llu, control allreduces %llu, wrong %llu\n",
                  static_cast<unsigned long long>(options_.seed), world_->size(), world_->hosts(),
                  world_->hosts() == 1 ? "" : "s", static_cast<unsigned long long>(step),
                  static_cast<unsigned long long>(tally_.calls()), elapsed,
                  static_cast<double>(tally_.calls()) / std::max(elapsed, 1e-9),
                  human_bytes(static_cast<double>(tally_.bytes())).c_str(), static_cast<unsigned long long>(splits_),
                  static_cast<unsigned long long>(control_), static_cast<unsigned long long>(wrong));
      tally_.print();
      if (tally_.calls() != generated)
        std::printf("chorus-soak: the ranks counted %llu calls but the sequence had %llu\n",
                    static_cast<unsigned long long>(tally_.calls()), static_cast<unsigned long long>(generated));
      std::fflush(stdout);
    }
    bool ok = wrong == 0 && tally_.calls() == generated;
    if (options_.inject_wrong) {
      if (rank == 0)
        std::printf("chorus-soak: --inject-wrong: %llu flipped bytes caught, %llu missed\n",
                    static_cast<unsigned long long>(tally_.caught_count()),
                    static_cast<unsigned long long>(tally_.missed_count()));
      ok = ok && tally_.missed_count() == 0 && tally_.caught_count() > 0;
    }
    return ok ? 0 : 1;
  }

 private:
  void print_header() {
    std::string links;
    for (int peer = 1; peer < world_->size(); ++peer)
      links += cat(peer == 1 ? "" : ", ", peer, ":", world_->link_to(peer).transport);
    std::printf("chorus-soak: seed %llu, %d ranks on %d host%s (rank 0 links %s), count %llu%s, max %s per buffer, "
                "collectives %s\n",
                static_cast<unsigned long long>(options_.seed), world_->size(), world_->hosts(),
                world_->hosts() == 1 ? "" : "s", links.empty() ? "none" : links.c_str(),
                static_cast<unsigned long long>(options_.count),
                options_.seconds > 0 ? cat(" or ", options_.seconds, " s").c_str() : "",
                human_bytes(static_cast<double>(options_.max_bytes)).c_str(), options_.kinds_text.c_str());
    std::fflush(stdout);
  }

  double seconds_since_start() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  // The ranks' clocks differ, so they agree on stopping through an allreduce.
  bool out_of_time() {
    int32_t late = seconds_since_start() >= options_.seconds ? 1 : 0;
    allreduce(*world_, &late, &late, 1, DataType::int32, ReduceOp::max);
    ++control_;
    return late != 0;
  }

  void maybe_split(uint64_t step, Random& random) {
    if (split_active_ && step >= split_until_) {
      child_ = Group{};
      split_active_ = false;
      child_groups_ = 0;
    }
    if (split_active_ || options_.split_chance <= 0 || !random.chance(options_.split_chance)) return;
    const int size = world_->size();
    const uint64_t colors = 1 + random.below(3);
    std::vector<int> color(static_cast<size_t>(size)), key(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) {
      color[static_cast<size_t>(r)] = random.chance(0.125) ? Context::kNoColor : static_cast<int>(random.below(colors));
      key[static_cast<size_t>(r)] = static_cast<int>(random.below(1000));
    }
    split_until_ = step + 8 + random.below(120);
    std::vector<int> used;
    for (int c : color)
      if (c != Context::kNoColor && std::find(used.begin(), used.end(), c) == used.end()) used.push_back(c);
    child_groups_ = used.size();
    split_active_ = true;
    const int mine = color[static_cast<size_t>(world_->rank())];
    child_.context = world_->split(mine, key[static_cast<size_t>(world_->rank())]);
    if (child_.context) {
      child_.shape = shape_of(*child_.context);
      child_.where = cat("split group color ", mine, ": rank ", child_.shape.rank, " of ", child_.shape.size);
    }
    ++splits_;
  }

  // Returns false after a wrong result or an error.
  bool run_step(uint64_t step) {
    Random random(options_.seed, step, 0);
    maybe_split(step, random);
    const int operations =
        options_.batch > 1 && random.chance(0.25) ? 2 + static_cast<int>(random.below(options_.batch - 1)) : 1;
    std::vector<std::unique_ptr<Pending>> pending;
    for (int index = 0; index < operations; ++index) {
      // Every rank draws this, in the group or not, so the sequence stays the same everywhere.
      const bool on_child = split_active_ && random.chance(1.0 / 3);
      const uint64_t number = done_;
      done_ += on_child ? child_groups_ : 1;
      if (on_child && !child_.context) continue;
      const Group& group = on_child ? child_ : world_group_;
      auto item = std::make_unique<Pending>();
      item->context = group.context.get();
      item->where = group.where;
      item->index = index;
      item->number = number;
      try {
        item->operation = make_operation(options_.seed, step, static_cast<uint64_t>(index), group.shape, limits_);
      } catch (const std::exception& error) {
        report("cannot generate", step, *item, error.what());
        return false;
      }
      if (options_.trace) {
        std::printf("chorus-soak: step %llu call %d on %s: %s\n", static_cast<unsigned long long>(step), index,
                    item->where.c_str(), describe(item->operation).c_str());
        std::fflush(stdout);
      }
      if (item->context->rank() == 0) tally_.count(item->operation, on_child, operations > 1);
      try {
        item->issue();
      } catch (const std::exception& error) {
        report("error", step, *item, cat(describe(item->operation), ": threw ", error.what()));
        return false;
      }
      pending.push_back(std::move(item));
    }
    bool ok = true;
    for (const auto& item : pending) {
      try {
        item->wait();
      } catch (const std::exception& error) {
        report("error", step, *item, cat(describe(item->operation), ": threw ", error.what()));
        return false;
      }
      maybe_inject(*item);
      const std::string failure = item->check();
      if (item->injected) {
        tally_.injected(!failure.empty());
        if (failure.empty()) report("MISSED", step, *item, "the byte flipped by --inject-wrong went unnoticed");
        else report("caught the wrong byte --inject-wrong flipped", step, *item, failure);
        if (failure.empty()) ok = false;
      } else if (!failure.empty()) {
        tally_.wrong();
        report("WRONG RESULT", step, *item, failure);
        ok = false;
      }
    }
    return ok;
  }

  // --inject-wrong: corrupts one byte of this rank's first non-empty result
  // from that collective on, after the call and before the check.
  void maybe_inject(Pending& item) {
    if (injected_ || !options_.inject_wrong || item.number < *options_.inject_wrong) return;
    const std::span<std::byte> result = item.result();
    if (result.empty()) return;
    result[result.size() / 2] ^= std::byte{0x10};
    item.injected = injected_ = true;
  }

  void report(const char* what, uint64_t step, const Pending& item, const std::string& detail) {
    std::fprintf(stderr,
                 "chorus-soak: %s: seed %llu step %llu call %d of the step (collective #%llu), rank %d (%s): %s\n",
                 what, static_cast<unsigned long long>(options_.seed), static_cast<unsigned long long>(step),
                 item.index, static_cast<unsigned long long>(item.number), world_->rank(), item.where.c_str(),
                 detail.c_str());
    std::fflush(stderr);
  }

  SoakOptions options_;
  Limits limits_;
  std::shared_ptr<Context> world_;
  Group world_group_;
  Group child_;  // the current split: its Context is null on ranks outside it
  bool split_active_ = false;
  uint64_t split_until_ = 0;
  uint64_t child_groups_ = 0;
  uint64_t done_ = 0;
  uint64_t splits_ = 0;
  uint64_t control_ = 0;
  uint64_t report_every_ = 0;
  bool injected_ = false;
  Tally tally_;
  Clock::time_point start_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chorus-soak: mixed collectives with random sizes, types, ops, roots and algorithms, every result "
               "checked bit-exactly. Run every rank with the same options, e.g. chorus-run -n 4 -- chorus-soak"};
  app.set_version_flag("--version", std::string("chorus-soak ") + chorus::version());
  SoakOptions options;
  using chorus::tools::DecimalDigits;
  using chorus::tools::FiniteRange;
  app.add_option("--seed", options.seed, "Seed of the sequence every rank derives")
      ->capture_default_str()
      ->check(DecimalDigits());
  app.add_option("--count", options.count, "Collectives to run (each call counts once per group that makes it)")
      ->capture_default_str()
      ->check(DecimalDigits())
      ->check(CLI::Range(uint64_t{1}, std::numeric_limits<uint64_t>::max()));
  app.add_option("--seconds", options.seconds, "Stop after this long even before --count (0: no time bound)")
      ->capture_default_str()
      ->check(FiniteRange(0.0, 1e9));
  app.add_option("--max-bytes", options.max_bytes,
                 "Largest buffer of any call (suffixes K, M, G = 2^10, 2^20, 2^30); sizes are log-uniform up to it")
      ->capture_default_str()
      ->transform(chorus::tools::ByteSize(8));
  app.add_option("--report-every", options.report_every, "Rank 0 prints progress every this many collectives (0: never)")
      ->capture_default_str()
      ->check(DecimalDigits());
  app.add_option("--timeout", options.timeout_seconds,
                 "Seconds any call may take before it fails (default: CHORUS_TIMEOUT, else 30)")
      ->check(FiniteRange(0.1, 86400.0));
  app.add_option("--collectives", options.kinds_text,
                 "Comma-separated subset: allreduce, broadcast, reduce, allgather, allgatherv, reduce_scatter, "
                 "reduce_scatter_v, gather, gatherv, scatter, scatterv, alltoall, alltoallv, barrier, sendrecv, or all")
      ->capture_default_str();
  app.add_option("--split-chance", options.split_chance,
                 "Chance per step of splitting the job into sub-groups for a while (0: never)")
      ->capture_default_str()
      ->check(FiniteRange(0.0, 1.0));
  app.add_option("--batch", options.batch, "Most calls issued back to back in one step before any is checked")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  app.add_flag("--keep-going", options.keep_going, "Count wrong results and go on instead of exiting at the first");
  app.add_flag("--trace", options.trace, "Print every call before it is issued (every rank)");
  app.add_option("--inject-wrong", options.inject_wrong,
                 "Test the checking: every rank flips a byte of its first result from this collective on; the run "
                 "passes only if every flipped byte is reported and nothing else is wrong")
      ->check(DecimalDigits());
  CLI11_PARSE(app, argc, argv);
  // Contradictions no single option's check sees: refused before connecting.
  if (options.inject_wrong && *options.inject_wrong >= options.count) {
    std::fprintf(stderr, "chorus-soak: --inject-wrong %llu is not below --count %llu: no result would be flipped\n",
                 static_cast<unsigned long long>(*options.inject_wrong),
                 static_cast<unsigned long long>(options.count));
    return 2;
  }

  // Every rank's largest call holds an input and an output of up to --max-bytes.
  const std::string memory = chorus::tools::memory_shortfall(
      cat("--max-bytes ", chorus::tools::describe_bytes(options.max_bytes)),
      chorus::tools::saturating_multiply(options.max_bytes, 2), chorus::tools::local_ranks_from_environment());
  if (!memory.empty()) {
    std::fprintf(stderr, "chorus-soak: %s\n", memory.c_str());
    return 2;
  }
  std::shared_ptr<Context> context;
  try {
    try {
      parse_kinds(options.kinds_text);
    } catch (const InvalidArgument& error) {
      throw InvalidArgument(cat("--collectives: ", error.what()));
    }
    if (const std::string problem = chorus::tools::environment_problem(); !problem.empty())
      throw InvalidArgument(problem);
    ConnectOptions connect_options;
    if (options.timeout_seconds)
      connect_options.timeout = std::chrono::milliseconds(static_cast<long long>(*options.timeout_seconds * 1000));
    context = connect_from_env(connect_options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "chorus-soak: %s\n", error.what());
    return 2;
  }
  try {
    Soak soak(options, context);
    return soak.run();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "chorus-soak: rank %d: %s\n", context->rank(), error.what());
    return 1;
  }
}
