// What a shared-memory device publishes: which process listens where, and
// what a dialer must prove. Two ranks can use shared memory only on the same
// kernel (boot id), as the same user, in the same network namespace (the
// listener is an abstract unix socket, which lives in one).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace chorus::transport::shm {

struct ShmAddress {
  uint32_t pid = 0;
  uint32_t uid = 0;
  uint64_t boot = 0;       // hash of /proc/sys/kernel/random/boot_id
  uint64_t netns = 0;      // inode of /proc/self/ns/net
  uint64_t nonce = 0;      // a dialer must present it
  std::array<std::byte, 16> socket_token{};  // names the abstract socket
  uint64_t ring_bytes = 0;

  // "\0chorus-shm-<token>": the listener's abstract socket name.
  std::string socket_name() const;
};

std::vector<std::byte> encode_address(const ShmAddress& address);
// Throws InvalidArgument naming both ranks for a blob that is not one.
ShmAddress decode_address(std::span<const std::byte> blob, int my_rank, int peer_rank);

// This process's kernel, user and network namespace, as published.
ShmAddress this_process_address();

// Whether two published addresses can share memory.
bool same_machine(const ShmAddress& a, const ShmAddress& b);

}  // namespace chorus::transport::shm
