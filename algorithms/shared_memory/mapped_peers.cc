// The mapping step of the mapped collectives (mapped_peers.h).
#include "algorithms/shared_memory/mapped_peers.h"

#include <algorithm>
#include <span>

#include "algorithms/execution/helper_plan.h"
#include "base/error.h"
#include "base/log.h"
#include "transport/transport.h"

namespace chorus::algorithms {
namespace {

// The color of the per-call group the barriers and the gather run in: no
// split or hierarchy uses it (child_group derives the group from the call's
// sequence, so no message is needed to agree on it).
constexpr int kMappedColor = 0x4d41;  // "MA"
// Each rank's record in the gather: its input's description, then its output's.
constexpr size_t kDescriptionBytes = transport::kMaxExportedMemoryBytes;
constexpr size_t kRecordBytes = 2 * kDescriptionBytes;

std::vector<int> all_members(int size) {
  std::vector<int> members(static_cast<size_t>(size));
  for (int member = 0; member < size; ++member) members[static_cast<size_t>(member)] = member;
  return members;
}

}  // namespace

MappedPeers::MappedPeers(const Communicator& communicator, const Call& call, const void* input, size_t input_bytes,
                         void* output, size_t output_bytes, uint32_t sequence, Deadline deadline)
    : communicator_(communicator),
      call_(call),
      deadline_(deadline),
      helpers_(communicator.subgroup(all_members(communicator.size()),
                                     child_group(communicator.group(), sequence, kMappedColor))) {
  const auto device_of = [&](int member) -> transport::Device& {
    return communicator_.mesh().device_of(communicator_.mesh_rank(member));
  };
  const auto* own_input = static_cast<const std::byte*>(input);
  auto* own_output = static_cast<std::byte*>(output);
  // Any peer's device describes this rank's memory alike.
  transport::Device& exporter = device_of(rank() == 0 ? 1 : 0);
  const auto describe = [&](const std::byte* data, size_t bytes) {
    if (bytes == 0) return std::vector<std::byte>();
    std::vector<std::byte> description = exporter.export_memory({data, bytes}, call_.memory);
    if (description.size() > kDescriptionBytes)
      throw InvalidArgument(cat("rank ", rank(), ": a memory description of ", description.size(),
                                " bytes, more than the ", kDescriptionBytes, " the mapped collectives carry"));
    return description;
  };
  const std::vector<std::byte> in = describe(own_input, input_bytes);
  const std::vector<std::byte> out = describe(own_output, output_bytes);
  std::vector<std::byte> mine(kRecordBytes);
  std::copy(in.begin(), in.end(), mine.begin());  // an empty description has no data() to copy from
  std::copy(out.begin(), out.end(), mine.begin() + static_cast<std::ptrdiff_t>(kDescriptionBytes));
  std::vector<std::byte> all(kRecordBytes * static_cast<size_t>(size()));
  Call gather = make_call(Collective::allgather, rank(), size(), kRecordBytes, DataType::uint8, ReduceOp::sum, 0,
                          false);
  // The chain (Call::previous_root) of the call it serves: its peers compare it here.
  gather.previous_root = call_.previous_root;
  run_helper_collective(helpers_, gather, mine.data(), all.data(), "auto", /*sequence=*/0, deadline_);
  inputs_.assign(static_cast<size_t>(size()), nullptr);
  outputs_.assign(static_cast<size_t>(size()), nullptr);
  for (int p = 0; p < size(); ++p) {
    const auto index = static_cast<size_t>(p);
    if (p == rank()) {
      inputs_[index] = own_input;
      outputs_[index] = own_output;
      continue;
    }
    // Every member's buffers are the size of this rank's, so their
    // descriptions are the size of its own.
    const std::byte* record = all.data() + kRecordBytes * index;
    transport::Device& peer_device = device_of(p);
    const int peer = communicator_.mesh_rank(p);
    if (!in.empty()) inputs_[index] = peer_device.map_peer_memory(peer, {record, in.size()}, call_.memory);
    if (!out.empty())
      outputs_[index] = peer_device.map_peer_memory(peer, {record + kDescriptionBytes, out.size()}, call_.memory);
  }
}

void MappedPeers::barrier(uint32_t step) const {
  Call call = make_call(Collective::barrier, rank(), size(), 0, DataType::uint8, ReduceOp::sum, 0, false);
  call.previous_root = call_.previous_root;
  run_helper_collective(helpers_, call, nullptr, nullptr, "auto", step, deadline_);
}

}  // namespace chorus::algorithms
