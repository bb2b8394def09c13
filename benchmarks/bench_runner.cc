#include "benchmarks/bench_runner.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <chrono>

#include "algorithms/selection/selection.h"
#include "api/context_state.h"
#include "chorus/collectives.h"
#include "memory/cuda/runtime.h"
#include "base/error.h"
#include "base/log.h"
#include "base/topology.h"

namespace chorus::bench {
namespace {

using algorithms::Collective;

// Everything the table needs agrees across ranks: the slowest rank's time.
double max_over_ranks(Context& context, double value) {
  allreduce(context, &value, &value, 1, DataType::float64, ReduceOp::max);
  return value;
}

bool blocks_per_rank(Operation operation) {
  return operation == Operation::allgather || operation == Operation::reduce_scatter ||
         operation == Operation::gather || operation == Operation::scatter || operation == Operation::alltoall;
}

}  // namespace

Collective collective_of(Operation operation) {
  switch (operation) {
    case Operation::allreduce: return Collective::allreduce;
    case Operation::broadcast: return Collective::broadcast;
    case Operation::reduce: return Collective::reduce;
    case Operation::allgather: return Collective::allgather;
    case Operation::reduce_scatter: return Collective::reduce_scatter;
    case Operation::gather: return Collective::gather;
    case Operation::scatter: return Collective::scatter;
    case Operation::alltoall: return Collective::alltoall;
    case Operation::barrier: return Collective::barrier;
  }
  return Collective::barrier;
}

double bus_factor(Operation operation, int size) {
  if (size <= 1) return 0.0;
  const double n = size;
  switch (operation) {
    case Operation::allreduce: return 2.0 * (n - 1) / n;
    case Operation::allgather:
    case Operation::reduce_scatter:
    case Operation::alltoall:
    case Operation::gather:
    case Operation::scatter: return (n - 1) / n;
    case Operation::broadcast:
    case Operation::reduce: return 1.0;
    case Operation::barrier: return 0.0;
  }
  return 0.0;
}

size_t count_for_bytes(Operation operation, int size, size_t bytes, DataType type) {
  if (operation == Operation::barrier) return 0;
  const size_t elements = bytes / element_size(type);
  return blocks_per_rank(operation) ? elements / static_cast<size_t>(size) : elements;
}

// Whether the library's selection can run the call with `algorithm` (a
// name, or "auto"), asked without running anything: a collective that
// fails aborts its Context.
bool algorithm_supports(const BenchSettings& settings, const std::string& algorithm, const Context& context,
                        size_t count) {
  const algorithms::Communicator& communicator = detail::communicator_of(context);
  algorithms::Call call = algorithms::make_call(collective_of(settings.operation), context.rank(), context.size(),
                                                count, settings.type, settings.op, settings.root, settings.in_place);
  call.memory = settings.memory;
  call.topology = communicator.shared_topology();
  try {
    algorithms::choose(communicator, call, algorithm);
    return true;
  } catch (const InvalidArgument&) {
    return false;
  }
}

Row Runner::prepare(size_t bytes, const std::string& algorithm) {
  Row row;
  const Operation operation = settings_.operation;
  const int rank = context_.rank(), size = context_.size(), root = settings_.root;
  const size_t count = count_for_bytes(operation, size, bytes, settings_.type);
  const size_t element = element_size(settings_.type);
  row.count = blocks_per_rank(operation) ? count * static_cast<size_t>(size) : count;
  row.bytes = row.count * element;
  if (!algorithm_supports(settings_, algorithm, context_, count)) {
    row.supported = false;
    return row;
  }
  // Never shrunk, so a sweep allocates (and page-faults) once per new maximum.
  const size_t input_bytes = std::max(input_.size(), input_elements(operation, rank, size, root, count) * element);
  const size_t output_bytes = std::max(output_.size(), output_elements(operation, rank, size, root, count) * element);
  if (input_bytes != input_.size()) input_registration_.reset();
  if (output_bytes != output_.size()) output_registration_.reset();
  input_.resize(input_bytes);
  output_.resize(output_bytes);
  if (settings_.register_buffers) {
    if (!input_registration_.registered() && !input_.empty())
      input_registration_ = register_buffer(input_.data(), input_.size());
    if (!output_registration_.registered() && !output_.empty())
      output_registration_ = register_buffer(output_.data(), output_.size());
  }
  size_device_buffers();
  if (settings_.check) {
    fill_input(operation, settings_.type, settings_.op, rank, size, root, input_.data(), count);
    // In place, the output starts as the input.
    if (settings_.in_place) std::copy_n(input_.begin(), count * element, output_.begin());
    const bool device = settings_.memory.kind == MemoryKind::cuda;
    cuda::Runtime* runtime = device ? &cuda::cuda_runtime() : nullptr;
    if (device) {
      runtime->copy_to_device(device_input_.get(), input_.data(), input_.size(), settings_.memory.device);
      // What a collective leaves alone must not pass for a result.
      if (!settings_.in_place) std::fill(output_.begin(), output_.end(), std::byte{0xA5});
      runtime->copy_to_device(device_output_.get(), output_.data(), output_.size(), settings_.memory.device);
    }
    run_once(count, algorithm);
    if (device) {
      runtime->copy_to_host(input_.data(), device_input_.get(), input_.size(), settings_.memory.device);
      runtime->copy_to_host(output_.data(), device_output_.get(), output_.size(), settings_.memory.device);
    }
    const void* result = operation == Operation::broadcast ? input_.data() : output_.data();
    uint64_t wrong = count_wrong(operation, settings_.type, settings_.op, rank, size, root, result, count);
    allreduce(context_, &wrong, &wrong, 1, DataType::uint64, ReduceOp::sum);
    row.wrong = wrong;
  }
  if (settings_.rewrite_input) {
    // In place the call reads the output; it starts each call as the input.
    const size_t call_bytes =
        (settings_.in_place ? count : input_elements(operation, rank, size, root, count)) * element;
    fresh_input_.assign(input_.begin(), input_.begin() + static_cast<std::ptrdiff_t>(call_bytes));
  }
  for (int i = 0; i < settings_.warmup; ++i) run_timed_once(count, algorithm);
  int iters = settings_.iters;
  if (iters <= 0) {
    const double once = max_over_ranks(context_, time_iterations(count, algorithm, 1));
    const double round_budget = settings_.budget_ms * 1e-3 / std::max(settings_.rounds, 1);
    iters = static_cast<int>(std::clamp(round_budget / std::max(once, 1e-7), 2.0, 2000.0));
  }
  row.iters = iters;
  return row;
}

std::vector<Row> Runner::measure(size_t bytes, const std::vector<std::string>& algorithms) {
  std::vector<Row> rows;
  for (const std::string& algorithm : algorithms) rows.push_back(prepare(bytes, algorithm));
  const size_t count = count_for_bytes(settings_.operation, context_.size(), bytes, settings_.type);
  const int rounds = std::max(settings_.rounds, 1);
  std::vector<std::vector<double>> seconds(algorithms.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t k = 0; k < algorithms.size(); ++k) {
      const size_t index = (k + static_cast<size_t>(round)) % algorithms.size();  // rotate who goes first
      if (!rows[index].supported) continue;
      const double elapsed = time_iterations(count, algorithms[index], rows[index].iters);
      seconds[index].push_back(max_over_ranks(context_, elapsed) / rows[index].iters);
    }
  }
  for (size_t index = 0; index < rows.size(); ++index) {
    Row& row = rows[index];
    if (!row.supported) continue;
    std::vector<double>& samples = seconds[index];
    std::nth_element(samples.begin(), samples.begin() + static_cast<long>(samples.size() / 2), samples.end());
    const double median = samples[samples.size() / 2];
    row.time_us = median * 1e6;
    row.algbw = median > 0 ? static_cast<double>(row.bytes) / median / 1e9 : 0;
    row.busbw = row.algbw * bus_factor(settings_.operation, context_.size());
  }
  return rows;
}

void Runner::run_once(size_t count, const std::string& algorithm) {
  CollectiveOptions options;
  options.algorithm = algorithm;
  options.memory = settings_.memory;
  const DataType type = settings_.type;
  const int root = settings_.root;
  const bool is_root = context_.rank() == root;
  std::byte* in = input();
  std::byte* out = output();
  switch (settings_.operation) {
    case Operation::allreduce:
      allreduce(context_, settings_.in_place ? out : in, out, count, type, settings_.op, options);
      break;
    case Operation::broadcast: broadcast(context_, in, count, type, root, options); break;
    case Operation::reduce:
      reduce(context_, in, is_root ? out : nullptr, count, type, settings_.op, root, options);
      break;
    case Operation::allgather: allgather(context_, in, out, count, type, options); break;
    case Operation::reduce_scatter: reduce_scatter(context_, in, out, count, type, settings_.op, options); break;
    case Operation::gather: gather(context_, in, is_root ? out : nullptr, count, type, root, options); break;
    case Operation::scatter: scatter(context_, is_root ? in : nullptr, out, count, type, root, options); break;
    case Operation::alltoall: alltoall(context_, in, out, count, type, options); break;
    case Operation::barrier: barrier(context_, options); break;
  }
}

void Runner::run_timed_once(size_t count, const std::string& algorithm) {
  if (settings_.rewrite_input && !fresh_input_.empty())
    std::memcpy(settings_.in_place ? output() : input(), fresh_input_.data(), fresh_input_.size());
  run_once(count, algorithm);
}

void Runner::size_device_buffers() {
  if (settings_.memory.kind != MemoryKind::cuda) return;
  MemoryBackend& backend = cuda::cuda_runtime().backend(settings_.memory.device);
  // At least one byte: a null buffer would read as "none given".
  if (input_.size() > device_input_bytes_ || !device_input_) {
    device_input_ = backend.allocate(std::max<size_t>(input_.size(), 1));
    device_input_bytes_ = input_.size();
  }
  if (output_.size() > device_output_bytes_ || !device_output_) {
    device_output_ = backend.allocate(std::max<size_t>(output_.size(), 1));
    device_output_bytes_ = output_.size();
  }
}

double Runner::time_iterations(size_t count, const std::string& algorithm, int iters) {
  using clock = std::chrono::steady_clock;
  if (settings_.barrier_each) {
    double seconds = 0;
    for (int i = 0; i < iters; ++i) {
      barrier(context_);
      const auto start = clock::now();
      run_timed_once(count, algorithm);
      seconds += std::chrono::duration<double>(clock::now() - start).count();
    }
    return seconds;
  }
  const auto start = clock::now();
  for (int i = 0; i < iters; ++i) run_timed_once(count, algorithm);
  return std::chrono::duration<double>(clock::now() - start).count();
}

}  // namespace chorus::bench
