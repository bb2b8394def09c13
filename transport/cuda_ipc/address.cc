// Marker "cudaipc1", the process id (8 bytes, little-endian), then the
// inner address as it is.
#include "transport/cuda_ipc/address.h"

#include "base/little_endian.h"

#include <algorithm>
#include <cstring>

namespace chorus::transport::cuda_ipc {
namespace {
constexpr char kMarker[8] = {'c', 'u', 'd', 'a', 'i', 'p', 'c', '1'};

constexpr size_t kHeader = sizeof(kMarker) + 8;

bool well_formed(std::span<const std::byte> address) {
  return address.size() > kHeader && std::memcmp(address.data(), kMarker, sizeof(kMarker)) == 0;
}
}  // namespace

std::vector<std::byte> wrap_address(uint64_t process, std::span<const std::byte> inner) {
  std::vector<std::byte> address(kHeader + inner.size());
  std::memcpy(address.data(), kMarker, sizeof(kMarker));
  store_le(address.data() + sizeof(kMarker), process, 8);
  std::copy(inner.begin(), inner.end(), address.begin() + kHeader);
  return address;
}

std::optional<std::span<const std::byte>> inner_address(std::span<const std::byte> address) {
  if (!well_formed(address)) return std::nullopt;
  return address.subspan(kHeader);
}

uint64_t process_of(std::span<const std::byte> address) {
  return well_formed(address) ? load_le(address.data() + sizeof(kMarker), 8) : 0;
}

}  // namespace chorus::transport::cuda_ipc
