// Encoding and checking the published address, and the host identity.
#include "transport/published_address.h"

#include <unistd.h>

#include <climits>
#include <fstream>

#include "base/error.h"
#include "base/log.h"

namespace chorus::transport {
namespace {

constexpr uint32_t kMagic = 0x41504843;  // "CHPA"
constexpr uint16_t kVersion = 1;
constexpr size_t kMaxHostName = 255;
constexpr size_t kMaxTranportName = 32;
constexpr size_t kMaxSection = 64 * 1024;
constexpr size_t kMaxSections = 16;

void put(std::vector<std::byte>& out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xff));
}

void put_bytes(std::vector<std::byte>& out, const void* data, size_t bytes) {
  const auto* begin = static_cast<const std::byte*>(data);
  out.insert(out.end(), begin, begin + bytes);
}

class Reader {
 public:
  Reader(std::span<const std::byte> blob, int my_rank, int peer_rank)
      : blob_(blob), my_rank_(my_rank), peer_rank_(peer_rank) {}

  uint64_t number(size_t bytes, const char* what) {
    need(bytes, what);
    uint64_t value = 0;
    for (size_t i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(blob_[offset_ + i]) << (8 * i);
    offset_ += bytes;
    return value;
  }
  std::span<const std::byte> bytes(size_t count, const char* what) {
    need(count, what);
    auto part = blob_.subspan(offset_, count);
    offset_ += count;
    return part;
  }
  bool done() const { return offset_ == blob_.size(); }
  [[noreturn]] void fail(const std::string& why) const {
    throw InvalidArgument(cat("rank ", my_rank_, ": rank ", peer_rank_, " published ", blob_.size(),
                              " bytes that are not a chorus address of this version (", why,
                              "); is every rank running the same chorus?"));
  }

 private:
  void need(size_t count, const char* what) const {
    if (count > blob_.size() - offset_) fail(cat("truncated in ", what));
  }
  std::span<const std::byte> blob_;
  size_t offset_ = 0;
  int my_rank_;
  int peer_rank_;
};

std::string as_string(std::span<const std::byte> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// FNV-1a: stable across processes and builds (std::hash is neither promised).
uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

}  // namespace

const PublishedAddress::Section* PublishedAddress::find(std::string_view transport) const {
  for (const Section& section : sections)
    if (section.transport == transport) return &section;
  return nullptr;
}

std::vector<std::byte> encode_published_address(const PublishedAddress& address) {
  if (address.host_name.size() > kMaxHostName || address.sections.size() > kMaxSections)
    throw InvalidArgument(cat("published address: host name of ", address.host_name.size(), " bytes or ",
                              address.sections.size(), " sections is too many"));
  std::vector<std::byte> out;
  put(out, kMagic, 4);
  put(out, kVersion, 2);
  put(out, address.host_id, 8);
  put(out, address.host_name.size(), 1);
  put_bytes(out, address.host_name.data(), address.host_name.size());
  put(out, address.sections.size(), 1);
  for (const auto& section : address.sections) {
    if (section.transport.size() > kMaxTranportName || section.address.size() > kMaxSection)
      throw InvalidArgument(cat("published address: the ", section.transport, " section of ",
                                section.address.size(), " bytes is too large"));
    put(out, section.transport.size(), 1);
    put_bytes(out, section.transport.data(), section.transport.size());
    put(out, section.address.size(), 4);
    put_bytes(out, section.address.data(), section.address.size());
  }
  return out;
}

PublishedAddress decode_published_address(std::span<const std::byte> blob, int my_rank, int peer_rank) {
  Reader in(blob, my_rank, peer_rank);
  if (in.number(4, "the magic") != kMagic) in.fail("bad magic");
  const uint64_t version = in.number(2, "the version");
  if (version != kVersion) in.fail(cat("version ", version, ", this rank speaks ", kVersion));
  PublishedAddress address;
  address.host_id = in.number(8, "the host id");
  address.host_name = as_string(in.bytes(in.number(1, "the host name"), "the host name"));
  const uint64_t sections = in.number(1, "the section count");
  if (sections > kMaxSections) in.fail(cat(sections, " sections"));
  for (uint64_t i = 0; i < sections; ++i) {
    PublishedAddress::Section section;
    const uint64_t name_bytes = in.number(1, "a transport name");
    if (name_bytes == 0 || name_bytes > kMaxTranportName) in.fail(cat("a transport name of ", name_bytes, " bytes"));
    section.transport = as_string(in.bytes(name_bytes, "a transport name"));
    const uint64_t address_bytes = in.number(4, "a section length");
    if (address_bytes > kMaxSection) in.fail(cat("a section of ", address_bytes, " bytes"));
    auto bytes = in.bytes(address_bytes, "a section");
    section.address.assign(bytes.begin(), bytes.end());
    if (address.find(section.transport)) in.fail(cat("transport ", section.transport, " twice"));
    address.sections.push_back(std::move(section));
  }
  if (!in.done()) in.fail("trailing bytes");
  return address;
}

uint64_t host_identity(const std::string& override, std::string& name) {
  if (!override.empty()) {
    name = override.substr(0, kMaxHostName);
    return fnv1a("CHORUS_HOST_ID=" + override);
  }
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  name = std::string(host).substr(0, kMaxHostName);
  return fnv1a(cat(host, "/", boot_id));
}

}  // namespace chorus::transport
