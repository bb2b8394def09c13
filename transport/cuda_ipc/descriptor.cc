// The descriptor's wire form: magic (8), version (4), reserved (4), handle
// (64), base, buffer id, allocation bytes, offset, length (8 each), 8 bytes
// reserved (zero).
#include "transport/cuda_ipc/descriptor.h"

#include <cstring>

#include "base/error.h"
#include "base/little_endian.h"
#include "base/log.h"

namespace chorus::transport::cuda_ipc {
namespace {

constexpr uint64_t kMagic = 0x3163706961647563ull;  // "cudaipc1"
constexpr uint32_t kVersion = 1;
constexpr size_t kHandleAt = 16;
constexpr size_t kFieldsAt = kHandleAt + 64;

}  // namespace

std::array<std::byte, kDescriptorBytes> encode_descriptor(const IpcDescriptor& descriptor) {
  std::array<std::byte, kDescriptorBytes> bytes{};
  store_le(bytes.data(), kMagic, 8);
  store_le(bytes.data() + 8, kVersion, 4);
  std::memcpy(bytes.data() + kHandleAt, descriptor.handle.data(), descriptor.handle.size());
  const uint64_t fields[] = {descriptor.base, descriptor.buffer_id, descriptor.allocation_bytes, descriptor.offset,
                             descriptor.length};
  for (size_t i = 0; i < 5; ++i) store_le(bytes.data() + kFieldsAt + 8 * i, fields[i], 8);
  return bytes;
}

IpcDescriptor decode_descriptor(std::span<const std::byte> bytes, int rank, int peer) {
  const auto refuse = [&](const std::string& why) {
    return IoError(cat("rank ", rank, ": cuda_ipc: peer rank ", peer, " sent a malformed buffer descriptor: ", why),
                   peer);
  };
  if (bytes.size() != kDescriptorBytes)
    throw refuse(cat(bytes.size(), " bytes, expected ", kDescriptorBytes));
  if (load_le(bytes.data(), 8) != kMagic) throw refuse("bad magic");
  if (const uint64_t version = load_le(bytes.data() + 8, 4); version != kVersion)
    throw refuse(cat("version ", version, ", expected ", kVersion));
  IpcDescriptor descriptor;
  std::memcpy(descriptor.handle.data(), bytes.data() + kHandleAt, descriptor.handle.size());
  descriptor.base = load_le(bytes.data() + kFieldsAt, 8);
  descriptor.buffer_id = load_le(bytes.data() + kFieldsAt + 8, 8);
  descriptor.allocation_bytes = load_le(bytes.data() + kFieldsAt + 16, 8);
  descriptor.offset = load_le(bytes.data() + kFieldsAt + 24, 8);
  descriptor.length = load_le(bytes.data() + kFieldsAt + 32, 8);
  if (descriptor.offset > descriptor.allocation_bytes ||
      descriptor.length > descriptor.allocation_bytes - descriptor.offset)
    throw refuse(cat("message of ", descriptor.length, " bytes at offset ", descriptor.offset,
                     " does not lie inside its allocation of ", descriptor.allocation_bytes, " bytes"));
  return descriptor;
}

}  // namespace chorus::transport::cuda_ipc
