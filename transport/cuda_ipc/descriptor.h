// What a sender of device memory tells the receiver over the host pair
// (transport/cuda_ipc/cuda_ipc.h): where the bytes are, as an IPC handle of
// their allocation and an offset into it. 128 bytes, little-endian,
// checked field by field on arrival: a peer's bytes are never trusted.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace chorus::transport::cuda_ipc {

struct IpcDescriptor {
  std::array<unsigned char, 64> handle{};
  uint64_t base = 0;              // the allocation's address in the sender (with buffer_id: the cache key)
  uint64_t buffer_id = 0;         // the sender driver's id of that allocation
  uint64_t allocation_bytes = 0;
  uint64_t offset = 0;            // of the message in the allocation
  uint64_t length = 0;            // of the message
};

inline constexpr size_t kDescriptorBytes = 128;

std::array<std::byte, kDescriptorBytes> encode_descriptor(const IpcDescriptor& descriptor);
// Throws IoError naming `peer` (and `rank`) for anything but a descriptor
// of this version whose message lies inside its allocation.
IpcDescriptor decode_descriptor(std::span<const std::byte> bytes, int rank, int peer);

}  // namespace chorus::transport::cuda_ipc
