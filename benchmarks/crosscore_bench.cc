// chorus-crosscore-bench: how two cores best hand each other data through
// memory they share, in the patterns a 2-rank allreduce on the board can
// take, timed in one run so that a shared machine's changing state hits
// every pattern alike.
//
// Why it exists: the board's copies and reductions run at 50-80 GB/s
// inside one core, but what a call costs is lines moving between two cores,
// which no single-process benchmark shows and this VM's hardware counters
// do not count. Two processes, pinned to two CPUs, exchange a buffer of
// each size in each pattern, and each pattern's time per call is a median
// over rounds. Between the patterns, a 64-byte exchange probes the state of
// the machine: on the project's VM cross-core traffic costs about 3x more
// for minutes at a time (benchmarks/README.md, stop 79), so each round is
// counted as "fast" or "slow" by its probe, and the medians are printed for
// each. Stop 80's changes to the board came out of it
// (benchmarks/README.md, "rep movsb into the board").
//
// Patterns (slot: this process's part of the shared memory, two per
// process, used in turn as the board's are):
//   exchange          copy the input into the slot; copy the peer's slot out
//   one_shot          copy the input into the slot; reduce input and the
//                     peer's slot into the output
//   pieces_in_slot    the board before stop 80: copy the peer's half into the
//                     slot; reduce one's own half into the slot; copy the
//                     peer's reduced half and one's own out
//   pieces_in_output  the board since: reduce one's own half into the
//                     output, then copy it into the slot
// Copies into shared memory (and out of it) take --copies: `loop`
// (chorus::vector_copy: AVX2 loads and stores), `memcpy` (glibc: `rep
// movsb` from about 2 KiB) or `memcpy_in` (memcpy into the slots, the loop
// out of them).
#include <CLI/CLI.hpp>

#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/copy.h"
#include "base/reduce.h"
#include "base/version.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kLine = 64;
constexpr int kMaxRuns = 4096;

// One word per line, so that a poll never shares a line with data.
struct alignas(kLine) Word {
  std::atomic<uint64_t> value{0};
};

// What the two processes share besides the slots.
struct Shared {
  Word published[2];  // the call whose slot data is in
  Word reduced[2];    // the call whose own half is reduced (pieces)
  Word arrived[2];    // the run both are about to start
  Word unpinned;      // 1: a process could not pin itself
  double seconds[kMaxRuns];  // process 0's time per call of each run
  int wrong[2];
};

void wait_for(const Word& word, uint64_t value) {
  while (word.value.load(std::memory_order_acquire) < value) __builtin_ia32_pause();
}

enum class CopyMode { loop, memcpy, memcpy_in };

struct Setup {
  int me = 0;
  Shared* shared = nullptr;
  std::byte* slots = nullptr;  // [process][2] slots of slot_stride bytes
  size_t slot_stride = 0;
  size_t offset = 0;  // of the data past the slot's line
  CopyMode copies = CopyMode::memcpy;

  std::byte* slot(int process, uint64_t call) const {
    return slots + (static_cast<size_t>(process) * 2 + call % 2) * slot_stride + offset;
  }
  void copy_in(std::byte* to, const std::byte* from, size_t bytes) const {
    if (copies == CopyMode::loop) chorus::vector_copy(to, from, bytes);
    else std::memcpy(to, from, bytes);
  }
  void copy_out(std::byte* to, const std::byte* from, size_t bytes) const {
    if (copies == CopyMode::memcpy) std::memcpy(to, from, bytes);
    else chorus::vector_copy(to, from, bytes);
  }
  void publish(Word (&words)[2], uint64_t call) const {
    words[me].value.store(call, std::memory_order_release);
    wait_for(words[1 - me], call);
  }
  // Process 0's operand first on both, so both compute the same bits.
  void sum(std::byte* out, const std::byte* mine, const std::byte* theirs, size_t bytes) const {
    const std::byte* first = me == 0 ? mine : theirs;
    const std::byte* second = me == 0 ? theirs : mine;
    chorus::reduce_pair_unchecked(chorus::DataType::float32, chorus::ReduceOp::sum, out, first, second,
                                  bytes / sizeof(float));
  }
};

using Pattern = void (*)(const Setup&, uint64_t call, const std::byte* in, std::byte* out, size_t bytes);

void exchange(const Setup& s, uint64_t call, const std::byte* in, std::byte* out, size_t bytes) {
  s.copy_in(s.slot(s.me, call), in, bytes);
  s.publish(s.shared->published, call);
  s.copy_out(out, s.slot(1 - s.me, call), bytes);
}

void one_shot(const Setup& s, uint64_t call, const std::byte* in, std::byte* out, size_t bytes) {
  s.copy_in(s.slot(s.me, call), in, bytes);
  s.publish(s.shared->published, call);
  s.sum(out, in, s.slot(1 - s.me, call), bytes);
}

// Halves on line boundaries: process p reduces half p.
size_t half_offset(int process, size_t bytes) { return process == 0 ? 0 : bytes / 2 / kLine * kLine; }
size_t half_bytes(int process, size_t bytes) {
  return process == 0 ? half_offset(1, bytes) : bytes - half_offset(1, bytes);
}

void pieces(const Setup& s, uint64_t call, const std::byte* in, std::byte* out, size_t bytes, bool in_output) {
  const int peer = 1 - s.me;
  const size_t mine = half_offset(s.me, bytes), mine_bytes = half_bytes(s.me, bytes);
  const size_t theirs = half_offset(peer, bytes), theirs_bytes = half_bytes(peer, bytes);
  std::byte* slot = s.slot(s.me, call);
  const std::byte* peer_slot = s.slot(peer, call);
  s.copy_in(slot + theirs, in + theirs, theirs_bytes);
  s.publish(s.shared->published, call);
  if (in_output) {
    s.sum(out + mine, in + mine, peer_slot + mine, mine_bytes);
    s.copy_in(slot + mine, out + mine, mine_bytes);
  } else {
    s.sum(slot + mine, in + mine, peer_slot + mine, mine_bytes);
  }
  s.publish(s.shared->reduced, call);
  s.copy_out(out + theirs, peer_slot + theirs, theirs_bytes);
  if (!in_output) chorus::copy_bytes(out + mine, slot + mine, mine_bytes);
}

void pieces_in_slot(const Setup& s, uint64_t call, const std::byte* in, std::byte* out, size_t bytes) {
  pieces(s, call, in, out, bytes, false);
}
void pieces_in_output(const Setup& s, uint64_t call, const std::byte* in, std::byte* out, size_t bytes) {
  pieces(s, call, in, out, bytes, true);
}

struct Run {
  std::string pattern;
  Pattern body;
  CopyMode copies;
  size_t bytes;
  bool reduces;
};

// The first two CPUs this process may run on; fewer where it may run on fewer.
std::vector<int> two_allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < 2; ++cpu)
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  return cpus;
}

bool pin_to(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return sched_setaffinity(0, sizeof one, &one) == 0;
}

double median(std::vector<double> values) {
  if (values.empty()) return -1;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chorus-crosscore-bench: a 2-rank exchange's patterns through shared memory, two pinned processes"};
  app.set_version_flag("--version", std::string("chorus-crosscore-bench ") + chorus::version());
  std::vector<size_t> sizes{16 << 10, 64 << 10, 256 << 10, 1 << 20};
  std::vector<std::string> patterns{"exchange", "one_shot", "pieces_in_slot", "pieces_in_output"};
  std::vector<std::string> copies{"loop", "memcpy"};
  int rounds = 15;
  size_t offset = 0;
  app.add_option("--sizes", sizes, "Bytes each process contributes (K, M suffixes = 2^10, 2^20)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(size_t{kLine}, size_t{64} << 20));
  app.add_option("--patterns", patterns, "exchange, one_shot, pieces_in_slot, pieces_in_output")
      ->check(CLI::IsMember({"exchange", "one_shot", "pieces_in_slot", "pieces_in_output"}));
  app.add_option("--copies", copies, "How copies into (and out of) the slots run: loop, memcpy, memcpy_in")
      ->check(CLI::IsMember({"loop", "memcpy", "memcpy_in"}));
  app.add_option("--rounds", rounds, "Rounds; each runs every pattern once")->check(CLI::Range(1, 200));
  app.add_option("--offset", offset, "Bytes of the slot's data past a 64-byte line (the board's was 32)")
      ->check(CLI::Range(size_t{0}, kLine - 1));
  CLI11_PARSE(app, argc, argv);

  // Both processes spin while they wait: on one CPU each wait would last
  // the other's time slice, and the numbers would say nothing of cores.
  const std::vector<int> cpus = two_allowed_cpus();
  if (cpus.size() < 2) {
    std::fprintf(stderr, "chorus-crosscore-bench: needs 2 CPUs to pin its two processes to; this one may run on %zu\n",
                 cpus.size());
    return 2;
  }
  std::vector<Run> runs;
  runs.push_back({"probe", exchange, CopyMode::memcpy, kLine, false});
  for (size_t bytes : sizes) {
    if (bytes % sizeof(float) != 0) {
      std::fprintf(stderr, "chorus-crosscore-bench: size %zu is not a whole number of floats\n", bytes);
      return 2;
    }
    for (const std::string& copy : copies)
      for (const std::string& pattern : patterns) {
        const Pattern body = pattern == "exchange"         ? exchange
                             : pattern == "one_shot"       ? one_shot
                             : pattern == "pieces_in_slot" ? pieces_in_slot
                                                           : pieces_in_output;
        const CopyMode mode = copy == "loop" ? CopyMode::loop : copy == "memcpy" ? CopyMode::memcpy : CopyMode::memcpy_in;
        runs.push_back({pattern + " " + copy, body, mode, bytes, pattern != "exchange"});
      }
  }
  if (runs.size() * static_cast<size_t>(rounds) > kMaxRuns) {
    std::fprintf(stderr, "chorus-crosscore-bench: at most %d runs (sizes x copies x patterns x rounds)\n", kMaxRuns);
    return 2;
  }
  const size_t largest = *std::max_element(sizes.begin(), sizes.end());
  const size_t slot_stride = (kLine + largest + kLine - 1) / kLine * kLine;
  const auto map = [](size_t bytes) {
    void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
      std::perror("chorus-crosscore-bench: mmap");
      std::exit(1);
    }
    return static_cast<std::byte*>(std::memset(memory, 0, bytes));
  };
  auto* shared = reinterpret_cast<Shared*>(map(sizeof(Shared)));
  std::byte* slots = map(4 * slot_stride);

  const pid_t child = fork();
  if (child < 0) {
    std::perror("chorus-crosscore-bench: fork");
    return 1;
  }
  Setup setup;
  setup.me = child == 0 ? 1 : 0;
  setup.shared = shared;
  setup.slots = slots;
  setup.slot_stride = slot_stride;
  setup.offset = offset;
  // Both still run (the other would wait for it forever otherwise), on a
  // CPU the scheduler picks, and the header says so.
  if (!pin_to(cpus[static_cast<size_t>(setup.me)])) shared->unpinned.value.store(1, std::memory_order_relaxed);
  // Page-aligned inputs and outputs, as a framework's 64-byte aligned tensors are alike to a slot.
  std::vector<float> in_floats(largest / sizeof(float) + 1024), out_floats(largest / sizeof(float) + 1024);
  const auto page_aligned = [](std::vector<float>& v) {
    auto* bytes = reinterpret_cast<std::byte*>(v.data());
    return bytes + (4096 - reinterpret_cast<uintptr_t>(bytes) % 4096) % 4096;
  };
  std::byte* in = page_aligned(in_floats);
  std::byte* out = page_aligned(out_floats);
  auto* in_values = reinterpret_cast<float*>(in);
  for (size_t i = 0; i < largest / sizeof(float); ++i) in_values[i] = static_cast<float>((i + setup.me) % 7);

  uint64_t call = 0, start = 0;
  for (int round = 0; round < rounds; ++round) {
    for (size_t index = 0; index < runs.size(); ++index) {
      const Run& run = runs[index];
      setup.copies = run.copies;
      const int calls = static_cast<int>(std::max<size_t>(20, (size_t{4} << 20) / (run.bytes + 4096)));
      shared->arrived[setup.me].value.store(++start, std::memory_order_release);
      wait_for(shared->arrived[1 - setup.me], start);
      for (int warm = 0; warm < 3; ++warm) run.body(setup, ++call, in, out, run.bytes);
      const auto started = Clock::now();
      for (int done = 0; done < calls; ++done) run.body(setup, ++call, in, out, run.bytes);
      const double seconds = std::chrono::duration<double>(Clock::now() - started).count() / calls;
      if (setup.me == 0) shared->seconds[static_cast<size_t>(round) * runs.size() + index] = seconds;
      const auto* result = reinterpret_cast<const float*>(out);
      for (size_t i = 0; i < run.bytes / sizeof(float); ++i) {
        const float want = run.reduces ? static_cast<float>(i % 7 + (i + 1) % 7)
                                       : static_cast<float>((i + 1 - static_cast<size_t>(setup.me)) % 7);
        if (result[i] != want) {
          ++shared->wrong[setup.me];
          break;
        }
      }
    }
  }
  if (setup.me == 1) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);

  // A round is slow where its probe took over twice the fastest probe's time.
  std::vector<double> probes;
  for (int round = 0; round < rounds; ++round) probes.push_back(shared->seconds[static_cast<size_t>(round) * runs.size()]);
  const double fastest_probe = *std::min_element(probes.begin(), probes.end());
  std::vector<bool> slow_round;
  for (double probe : probes) slow_round.push_back(probe > 2 * fastest_probe);
  const auto slow_rounds = static_cast<int>(std::count(slow_round.begin(), slow_round.end(), true));
  std::printf("# chorus-crosscore-bench: 2 processes %s, slot data %zu bytes past a line, median µs per call\n",
              shared->unpinned.value.load() != 0 ? "NOT pinned (sched_setaffinity failed)" : "pinned to 2 CPUs", offset);
  std::printf("# rounds: %d fast, %d slow (64 B exchange over 2x the fastest round's %.3f µs)\n", rounds - slow_rounds,
              slow_rounds, fastest_probe * 1e6);
  std::printf("# %10s  %-26s %9s %9s\n", "bytes", "pattern copies", "fast", "slow");
  for (size_t index = 1; index < runs.size(); ++index) {
    std::vector<double> fast, slow;
    for (int round = 0; round < rounds; ++round)
      (slow_round[static_cast<size_t>(round)] ? slow : fast)
          .push_back(shared->seconds[static_cast<size_t>(round) * runs.size() + index] * 1e6);
    const auto cell = [](const std::vector<double>& values) {
      char text[32];
      if (values.empty()) std::snprintf(text, sizeof text, "%9s", "-");
      else std::snprintf(text, sizeof text, "%9.2f", median(values));
      return std::string(text);
    };
    std::printf("  %10zu  %-26s %s %s\n", runs[index].bytes, runs[index].pattern.c_str(), cell(fast).c_str(),
                cell(slow).c_str());
  }
  const int wrong = shared->wrong[0] + shared->wrong[1];
  std::printf("# wrong results: %d\n", wrong);
  return wrong == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
