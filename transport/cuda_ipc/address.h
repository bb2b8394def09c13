// A cuda_ipc address: a marker, the process id and the inner host
// transport's address. Empty when the rank does not offer CUDA IPC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace chorus::transport::cuda_ipc {

#include <cstdint>

std::vector<std::byte> wrap_address(uint64_t process, std::span<const std::byte> inner);
// The inner address, or nullopt for an empty or malformed one.
std::optional<std::span<const std::byte>> inner_address(std::span<const std::byte> address);
// The process id it carries (0 for an empty or malformed one).
uint64_t process_of(std::span<const std::byte> address);

}  // namespace chorus::transport::cuda_ipc
