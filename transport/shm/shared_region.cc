// The shm transport's SharedRegion (transport/transport.h): an anonymous
// memfd, like the pair segments (segment.h), so nothing is ever named in
// /dev/shm and a crash leaves nothing behind. The pair segments travel over
// the unix socket at connect; a region is made later, by a collective, so its
// creator describes it instead (its pid, the descriptor's number, the size
// and a 128-bit nonce) and the others open it through /proc/<pid>/fd, which
// the kernel allows only to processes that may inspect the creator (its uid).
// The opener checks that the pid is the one the creator's rank published at
// connect, and the nonce, which came over the job's authenticated path, in
// the region's first line: a descriptor number reused for another file, or a
// process that is not the peer, fails with an error naming the peer. Once
// every rank has opened it, seal() closes the creator's descriptor.
//
// Ranks of one process (the tests run ranks as threads) share one mapping:
// ThreadSanitizer knows memory by address, and would see two region_mappings of one
// memfd as unrelated memory.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "base/error.h"
#include "base/little_endian.h"
#include "transport/nonce.h"
#include "transport/shm/engine.h"

namespace chorus::transport::shm {
namespace {

constexpr uint32_t kRegionMagic = 0x52534843;  // "CHSR"
constexpr size_t kRegionHeaderBytes = 64;            // the nonce, then the data on the next cache line
constexpr size_t kRegionDescriptionBytes = 4 + 4 + 4 + 8 + 16;
constexpr size_t kMaxRegionBytes = size_t{1} << 30;

using RegionNonce = std::array<uint64_t, 2>;

struct RegionMapping {
  std::byte* base = nullptr;
  size_t bytes = 0;
  ~RegionMapping() {
    if (base) ::munmap(base, bytes);
  }
};

// This process's region_mappings by nonce, for ranks of one process (see above).
std::mutex region_mappings_mutex;
std::map<RegionNonce, std::weak_ptr<RegionMapping>> region_mappings;

std::shared_ptr<RegionMapping> map_region_fd(int fd, size_t bytes, const RegionNonce& nonce) {
  auto mapping = std::make_shared<RegionMapping>();
  void* address = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (address == MAP_FAILED) return nullptr;
  mapping->base = static_cast<std::byte*>(address);
  mapping->bytes = bytes;
  std::lock_guard lock(region_mappings_mutex);
  std::erase_if(region_mappings, [](const auto& entry) { return entry.second.expired(); });
  region_mappings[nonce] = mapping;
  return mapping;
}

std::shared_ptr<RegionMapping> region_mapping_of_this_process(const RegionNonce& nonce) {
  std::lock_guard lock(region_mappings_mutex);
  auto found = region_mappings.find(nonce);
  return found == region_mappings.end() ? nullptr : found->second.lock();
}

class MemfdRegion final : public SharedRegion {
 public:
  MemfdRegion(std::shared_ptr<RegionMapping> mapping, size_t bytes, Fd fd, uint32_t pid, const RegionNonce& nonce)
      : mapping_(std::move(mapping)), bytes_(bytes), fd_(std::move(fd)), pid_(pid), nonce_(nonce) {}

  std::byte* data() const override { return mapping_->base + kRegionHeaderBytes; }
  size_t size() const override { return bytes_; }
  std::vector<std::byte> description() const override {
    std::vector<std::byte> out(kRegionDescriptionBytes);
    store_le(out.data(), kRegionMagic, 4);
    store_le(out.data() + 4, pid_, 4);
    store_le(out.data() + 8, static_cast<uint32_t>(fd_.get()), 4);
    store_le(out.data() + 12, bytes_, 8);
    store_le(out.data() + 20, nonce_[0], 8);
    store_le(out.data() + 28, nonce_[1], 8);
    return out;
  }
  void seal() override { fd_.reset(); }

 private:
  std::shared_ptr<RegionMapping> mapping_;
  size_t bytes_;
  Fd fd_;  // the creator's, until seal()
  uint32_t pid_;
  RegionNonce nonce_;
};

bool region_nonce_matches(const RegionMapping& mapping, const RegionNonce& nonce) {
  return load_le(mapping.base, 8) == nonce[0] && load_le(mapping.base + 8, 8) == nonce[1];
}

}  // namespace

std::unique_ptr<SharedRegion> Engine::create_shared_region(size_t bytes) {
  if (bytes == 0 || bytes > kMaxRegionBytes)
    throw InvalidArgument(cat("rank ", rank(), ": a shared region of ", bytes, " bytes (1 B to 1 GiB)"));
  Fd fd(::memfd_create("chorus-region", MFD_CLOEXEC));
  if (fd.get() < 0) throw IoError(cat("rank ", rank(), ": memfd_create: ", errno_text(errno)));
  if (::ftruncate(fd.get(), static_cast<off_t>(kRegionHeaderBytes + bytes)) != 0)
    throw IoError(cat("rank ", rank(), ": sizing a shared region of ", bytes, " bytes: ", errno_text(errno)));
  const RegionNonce nonce{random_nonce(), random_nonce()};
  std::shared_ptr<RegionMapping> mapping = map_region_fd(fd.get(), kRegionHeaderBytes + bytes, nonce);
  if (!mapping) throw IoError(cat("rank ", rank(), ": mapping a shared region: ", errno_text(errno)));
  store_le(mapping->base, nonce[0], 8);
  store_le(mapping->base + 8, nonce[1], 8);
  return std::make_unique<MemfdRegion>(std::move(mapping), bytes, std::move(fd), static_cast<uint32_t>(::getpid()),
                                       nonce);
}

std::unique_ptr<SharedRegion> Engine::open_shared_region(int peer_rank, std::span<const std::byte> description,
                                                         size_t bytes) {
  const auto refuse = [&](const std::string& why) {
    return IoError(cat("rank ", rank(), ": the shared region rank ", peer_rank, " described: ", why));
  };
  if (description.size() != kRegionDescriptionBytes || load_le(description.data(), 4) != kRegionMagic)
    throw refuse(cat("a description of ", description.size(), " bytes that is not a shm region's"));
  const auto pid = static_cast<uint32_t>(load_le(description.data() + 4, 4));
  const auto fd_number = static_cast<uint32_t>(load_le(description.data() + 8, 4));
  const size_t described_bytes = load_le(description.data() + 12, 8);
  const RegionNonce nonce{load_le(description.data() + 20, 8), load_le(description.data() + 28, 8)};
  if (described_bytes != bytes) throw refuse(cat(described_bytes, " bytes where ", bytes, " were expected"));
  const std::optional<uint32_t> published = published_pid(peer_rank);
  if (!published || *published != pid)
    throw refuse(cat("made by pid ", pid, ", but rank ", peer_rank, " published ",
                     published ? cat("pid ", *published) : std::string("no pid")));
  std::shared_ptr<RegionMapping> mapping;
  if (pid == static_cast<uint32_t>(::getpid())) {
    mapping = region_mapping_of_this_process(nonce);
    if (!mapping) throw refuse("no region of this process has that nonce");
  } else {
    Fd fd(::open(cat("/proc/", pid, "/fd/", fd_number).c_str(), O_RDWR | O_CLOEXEC));
    if (fd.get() < 0) throw refuse(cat("opening /proc/", pid, "/fd/", fd_number, ": ", errno_text(errno)));
    struct stat status {};
    if (::fstat(fd.get(), &status) != 0 || static_cast<size_t>(status.st_size) != kRegionHeaderBytes + bytes)
      throw refuse(cat("the file is not ", kRegionHeaderBytes + bytes, " bytes long"));
    mapping = map_region_fd(fd.get(), kRegionHeaderBytes + bytes, nonce);
    if (!mapping) throw refuse(cat("mapping it: ", errno_text(errno)));
  }
  if (!region_nonce_matches(*mapping, nonce)) throw refuse("its first line does not hold the nonce it was described with");
  return std::make_unique<MemfdRegion>(std::move(mapping), bytes, Fd(), pid, nonce);
}

}  // namespace chorus::transport::shm
