// Staging device buffers through pinned host memory.
#include "algorithms/execution/staging.h"

#include <algorithm>

#include "memory/registry.h"

namespace chorus::algorithms {
namespace {

constexpr size_t kAlignment = 64;
// A pinned copy between the device and the host: its launch and wait, and
// its bandwidth (PCIe-class links; the GPU machine is to measure them).
constexpr double kCopySeconds = 10e-6;
constexpr double kStagingCopySecondsPerByte = 0.05e-9;

size_t align_up(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

bool staging_serves(const Candidate&, const Communicator& communicator, const Call& call) {
  return runs_staged(communicator, call);
}

double staging_cost(const Candidate&, const Communicator& communicator, const Call& call) {
  const size_t moved = input_bytes(call) + output_bytes(call);
  const double copies = 2 * kCopySeconds + static_cast<double>(moved) * kStagingCopySecondsPerByte;
  if (!communicator.shares_one_time_sliced_device(call.memory)) return copies;
  // Every member's copies wait for its turn of the device (staging.h).
  const double others = communicator.size() - 1;
  const size_t upload = output_bytes(call);
  const double turns = upload > 0 && upload < kTimeSlicedPromptUploadBytes ? others * kTimeSlicedTurnSeconds : 0;
  return copies + turns +
         others * (kTimeSlicedCopySeconds + static_cast<double>(call.bytes()) * kTimeSlicedCopySecondsPerByte);
}

Call on_host(const Call& call) {
  Call host_call = call;
  host_call.memory = Memory::host();
  return host_call;
}

void stage_around(const CandidateRun& run, const InnerRun& inner) {
  run_staged(run.call, run.input, run.output, [&](const Call& host_call, const void* input, void* output) {
    inner(host_call, input, output);
  });
}

constexpr Candidate kStagingCandidate{.name = kStaged,
                               .collective = std::nullopt,
                               .role = CandidateRole::wraps,
                               .serves = staging_serves,
                               .cost_seconds = staging_cost,
                               .inner_call = on_host,
                               .wrap = stage_around};

}  // namespace

const Candidate& staging_candidate() { return kStagingCandidate; }

bool runs_staged(const Communicator& communicator, const Call& call) {
  if (call.memory.on_host()) return false;
  if (!communicator.accepts(call.memory)) return true;
  if (communicator.size() == 1) return false;  // the device backend does it all
  // The count every rank agrees on (the signature carries it).
  const size_t elements = call.counts.empty() ? call.count : call.total_count();
  return elements * call.element_bytes() < kDevicePlanMinBytes;
}

StagingLayout plan_staging(const Call& call, const void* input, const void* output) {
  const auto* in = static_cast<const std::byte*>(input);
  const auto* out = static_cast<const std::byte*>(output);
  const size_t in_bytes = in ? input_bytes(call) : 0;
  const size_t out_bytes = out ? output_bytes(call) : 0;
  // Broadcast keeps root's data in the output buffer: that is what it reads.
  const bool output_is_read = call.collective == Collective::broadcast && call.rank == call.root;
  StagingLayout layout;
  const bool overlap = in_bytes > 0 && out_bytes > 0 && in < out + out_bytes && out < in + in_bytes;
  if (overlap || (in && in == out)) {
    const std::byte* low = std::min(in, out);
    const std::byte* high = std::max(in + in_bytes, out + out_bytes);
    layout.bytes = static_cast<size_t>(high - low);
    layout.input_offset = static_cast<size_t>(in - low);
    layout.output_offset = static_cast<size_t>(out - low);
    layout.copy_in = {low, 0, layout.bytes};
  } else {
    layout.input_offset = 0;
    layout.output_offset = align_up(in_bytes);
    layout.bytes = layout.output_offset + out_bytes;
    if (in_bytes > 0) layout.copy_in = {in, 0, in_bytes};
    if (output_is_read && out_bytes > 0) layout.copy_in_extra = {out, layout.output_offset, out_bytes};
  }
  if (out_bytes > 0) layout.copy_out = {out, layout.output_offset, out_bytes};
  return layout;
}

void run_staged(const Call& call, const void* input, void* output,
                const std::function<void(const Call& host_call, const void* input, void* output)>& run) {
  MemoryKindSupport& support = memory_kind_support(call.memory.kind);
  const int device = call.memory.device;
  const StagingLayout layout = plan_staging(call, input, output);
  // One byte at least, so a buffer the caller passed stays non-null.
  std::byte* staging = support.staging_buffer(std::max<size_t>(layout.bytes, 1));
  for (const StagingLayout::Range& range : {layout.copy_in, layout.copy_in_extra})
    if (range.bytes > 0) support.copy_to_host(staging + range.offset, range.device, range.bytes, device);
  Call host_call = call;
  host_call.memory = Memory::host();
  run(host_call, input ? staging + layout.input_offset : nullptr, output ? staging + layout.output_offset : nullptr);
  const StagingLayout::Range& back = layout.copy_out;
  if (back.bytes > 0)
    support.copy_to_device(const_cast<std::byte*>(back.device), staging + back.offset, back.bytes, device);
}

}  // namespace chorus::algorithms
