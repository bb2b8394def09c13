// Encoding the shared-memory address, and this process's identity.
#include "transport/shm/address.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "base/error.h"
#include "base/little_endian.h"
#include "base/log.h"

namespace chorus::transport::shm {
namespace {

constexpr uint32_t kAddressMagic = 0x4d485343;  // "CSHM"
constexpr uint32_t kAddressVersion = 1;
constexpr size_t kBytes = 4 + 4 + 4 + 4 + 8 + 8 + 8 + 16 + 8;

uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

}  // namespace

std::string ShmAddress::socket_name() const {
  static const char digits[] = "0123456789abcdef";
  std::string name("\0chorus-shm-", 12);
  for (std::byte b : socket_token) {
    name += digits[static_cast<unsigned>(b) >> 4];
    name += digits[static_cast<unsigned>(b) & 15];
  }
  return name;
}

std::vector<std::byte> encode_address(const ShmAddress& address) {
  std::vector<std::byte> out(kBytes);
  std::byte* p = out.data();
  store_le(p, kAddressMagic, 4);
  store_le(p + 4, kAddressVersion, 4);
  store_le(p + 8, address.pid, 4);
  store_le(p + 12, address.uid, 4);
  store_le(p + 16, address.boot, 8);
  store_le(p + 24, address.netns, 8);
  store_le(p + 32, address.nonce, 8);
  std::copy(address.socket_token.begin(), address.socket_token.end(), p + 40);
  store_le(p + 56, address.ring_bytes, 8);
  return out;
}

ShmAddress decode_address(std::span<const std::byte> blob, int my_rank, int peer_rank) {
  auto fail = [&](const std::string& why) {
    return InvalidArgument(cat("rank ", my_rank, ": rank ", peer_rank, " published a shared-memory address of ",
                               blob.size(), " bytes that this rank cannot use (", why, ")"));
  };
  if (blob.size() != kBytes) throw fail(cat("expected ", kBytes, " bytes"));
  const std::byte* p = blob.data();
  if (load_le(p, 4) != kAddressMagic) throw fail("bad magic");
  if (load_le(p + 4, 4) != kAddressVersion)
    throw fail(cat("version ", load_le(p + 4, 4), ", this rank speaks ", kAddressVersion));
  ShmAddress address;
  address.pid = static_cast<uint32_t>(load_le(p + 8, 4));
  address.uid = static_cast<uint32_t>(load_le(p + 12, 4));
  address.boot = load_le(p + 16, 8);
  address.netns = load_le(p + 24, 8);
  address.nonce = load_le(p + 32, 8);
  std::copy(p + 40, p + 56, address.socket_token.begin());
  address.ring_bytes = load_le(p + 56, 8);
  return address;
}

ShmAddress this_process_address() {
  ShmAddress address;
  address.pid = static_cast<uint32_t>(::getpid());
  address.uid = static_cast<uint32_t>(::getuid());
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  address.boot = fnv1a(boot_id);
  struct stat namespace_file {};
  if (::stat("/proc/self/ns/net", &namespace_file) == 0)
    address.netns = static_cast<uint64_t>(namespace_file.st_ino) ^ (static_cast<uint64_t>(namespace_file.st_dev) << 40);
  return address;
}

bool same_machine(const ShmAddress& a, const ShmAddress& b) {
  return a.boot == b.boot && a.boot != 0 && a.uid == b.uid && a.netns == b.netns && a.netns != 0;
}

}  // namespace chorus::transport::shm
