// One rank's side of chorus-bench: runs one collective at one message size
// with one algorithm, checks the result (--check) and times it, agreeing
// with the other ranks on the slowest rank's time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/model/call.h"
#include "benchmarks/check_data.h"
#include "chorus/context.h"
#include "chorus/registered_buffer.h"

namespace chorus::bench {

struct BenchSettings {
  Operation operation = Operation::allreduce;
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  int warmup = 5;
  int iters = 0;  // 0: as many as fit in budget_ms
  double budget_ms = 200;
  // Timed rounds per size; the row reports the median round. With several
  // algorithms the rounds interleave them (A B C, B C A, ...), so the drift of
  // a shared machine hits every algorithm alike and their ratio is fair.
  int rounds = 3;
  bool check = false;
  // allreduce only: the output is the input (as torch.distributed's
  // allreduce calls it), which some algorithms run through scratch.
  bool in_place = false;
  // Each timed iteration alone, after a barrier (--barrier), the round's
  // time the sum of them; otherwise a round times its iterations back to back.
  bool barrier_each = false;
  // Before each timed or warm-up call, the buffer the call reads is written
  // afresh from a copy of its contents (--rewrite-input), as a training step
  // hands over a gradient it has just computed; the copy is timed too.
  // Without it every call reads an input that no one wrote since the last
  // call, which a peer's single copy out of it finds in a cache.
  bool rewrite_input = false;
  // Host buffers registered with chorus::register_buffer (--register), so
  // verbs pins them once instead of once per message.
  bool register_buffers = false;
  // Where the buffers live: host memory, or CUDA device memory (--device).
  Memory memory = Memory::host();
};

struct Row {
  size_t bytes = 0;  // the whole message, as nccl-tests counts it
  size_t count = 0;  // elements of `bytes`
  bool supported = true;
  double time_us = 0;
  double algbw = 0;
  double busbw = 0;
  uint64_t wrong = 0;
  int iters = 0;
};

algorithms::Collective collective_of(Operation operation);

// nccl-tests' bus bandwidth factors: the fraction of the message each rank's
// busiest link carries, so busbw compares with the link rate.
double bus_factor(Operation operation, int size);

// The collective's own count for a message of `bytes` in total (nccl-tests'
// size: the whole buffer of allreduce/broadcast/reduce, all size() blocks of
// allgather, reduce_scatter, gather, scatter and alltoall), rounded down.
size_t count_for_bytes(Operation operation, int size, size_t bytes, DataType type);

// Whether `algorithm` (a name or "auto") can run this operation at this count
// on this rank of `context` (whose topology the two-level algorithms need).
bool algorithm_supports(const BenchSettings& settings, const std::string& algorithm, const Context& context,
                        size_t count);

class Runner {
 public:
  Runner(Context& context, const BenchSettings& settings) : context_(context), settings_(settings) {}
  // One row per algorithm (in the order given) for a message of `bytes`.
  std::vector<Row> measure(size_t bytes, const std::vector<std::string>& algorithms);

 private:
  // Checks (with --check), warms up and picks the iteration count.
  Row prepare(size_t bytes, const std::string& algorithm);
  void run_once(size_t count, const std::string& algorithm);
  // run_once, after the input's rewrite where --rewrite-input asks for it.
  void run_timed_once(size_t count, const std::string& algorithm);
  double time_iterations(size_t count, const std::string& algorithm, int iters);

  Context& context_;
  const BenchSettings& settings_;
  // The buffers the collectives run on.
  std::byte* input() { return device_input_ ? device_input_.get() : input_.data(); }
  std::byte* output() { return device_output_ ? device_output_.get() : output_.data(); }
  // With device memory: grows the device buffers to the host ones' sizes.
  void size_device_buffers();

  // Host buffers; with --device the data is filled and checked here and
  // copied to and from device buffers of the same sizes.
  std::vector<std::byte> input_;
  std::vector<std::byte> output_;
  // Reset before the vectors grow: a registration must end before its memory is freed.
  RegisteredBuffer input_registration_;
  RegisteredBuffer output_registration_;
  std::shared_ptr<std::byte> device_input_;
  std::shared_ptr<std::byte> device_output_;
  size_t device_input_bytes_ = 0;
  size_t device_output_bytes_ = 0;
  // --rewrite-input: what the call's input holds, copied into it before each call.
  std::vector<std::byte> fresh_input_;
};

}  // namespace chorus::bench
