// Creating, checking and mapping the shared segment.
#include "transport/shm/segment.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <utility>

#include "base/error.h"
#include "base/log.h"

namespace chorus::transport::shm {
namespace {

constexpr uint32_t kSegmentMagic = 0x47534843;  // "CHSG"
constexpr uint32_t kSegmentVersion = 2;  // 2: RingControl::eager_bytes_claimed
constexpr size_t kPage = 4096;

struct SegmentHeader {
  uint32_t magic;
  uint32_t version;
  uint64_t ring_bytes;
  uint64_t pull_slots;
};

struct Layout {
  size_t controls;     // 2 RingControl
  size_t slots;        // 2 x kPullSlots
  size_t rings;        // 2 x ring_bytes, page aligned
  size_t total;
};

Layout layout_for(size_t ring_bytes) {
  Layout layout;
  layout.controls = kCacheLine;
  layout.slots = layout.controls + 2 * sizeof(RingControl);
  const size_t after_slots = layout.slots + 2 * kPullSlots * sizeof(uint64_t);
  layout.rings = (after_slots + kPage - 1) / kPage * kPage;
  layout.total = layout.rings + 2 * ring_bytes;
  return layout;
}

std::byte* map_new(int fd, size_t bytes) {
  void* address = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (address == MAP_FAILED) return nullptr;
  return static_cast<std::byte*>(address);
}

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer knows memory by its address. When both ranks of a pair live
// in one process (the transport tests), two mappings of one memfd would be two
// unrelated memories to it: it would miss the ring's acquire and release, and
// report the buffers they order as races (and check nothing in the ring). So
// in its builds a process maps each segment once, and every Segment of it
// shares that mapping until the last one goes. Between processes nothing
// changes: each has its own mapping, as without the sanitizer.
struct SharedMapping {
  std::byte* base;
  size_t bytes;
  size_t users;
};

std::mutex mappings_mutex;
std::map<std::pair<dev_t, ino_t>, SharedMapping> mappings;

std::byte* map(int fd, size_t bytes) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) return nullptr;
  std::lock_guard<std::mutex> lock(mappings_mutex);
  auto [found, added] = mappings.try_emplace({info.st_dev, info.st_ino}, SharedMapping{nullptr, bytes, 0});
  if (added) found->second.base = map_new(fd, bytes);
  if (!found->second.base || found->second.bytes != bytes) {
    if (added) mappings.erase(found);
    return nullptr;
  }
  ++found->second.users;
  return found->second.base;
}

void unmap(std::byte* base, size_t bytes) {
  std::lock_guard<std::mutex> lock(mappings_mutex);
  for (auto it = mappings.begin(); it != mappings.end(); ++it) {
    if (it->second.base != base) continue;
    if (--it->second.users == 0) {
      ::munmap(base, bytes);
      mappings.erase(it);
    }
    return;
  }
}
#else
std::byte* map(int fd, size_t bytes) { return map_new(fd, bytes); }
void unmap(std::byte* base, size_t bytes) { ::munmap(base, bytes); }
#endif

}  // namespace

Segment Segment::create(size_t ring_bytes, int rank) {
  const Layout layout = layout_for(ring_bytes);
  Segment segment;
  segment.fd_ = Fd(::memfd_create("chorus-shm", MFD_CLOEXEC));
  if (!segment.fd_.valid())
    throw IoError(cat("rank ", rank, ": cannot create a shared-memory segment: ", errno_text(errno)));
  if (::ftruncate(segment.fd_.get(), static_cast<off_t>(layout.total)) != 0)
    throw IoError(cat("rank ", rank, ": cannot size a shared-memory segment to ", layout.total, " bytes: ",
                      errno_text(errno)));
  segment.base_ = map(segment.fd_.get(), layout.total);
  if (!segment.base_)
    throw IoError(cat("rank ", rank, ": cannot map a shared-memory segment of ", layout.total, " bytes: ",
                      errno_text(errno)));
  segment.bytes_ = layout.total;
  segment.ring_bytes_ = ring_bytes;
  // A fresh memfd reads as zeros: the controls and slots start at 0.
  for (int direction = 0; direction < 2; ++direction) new (segment.control(direction)) RingControl();
  const SegmentHeader header{kSegmentMagic, kSegmentVersion, ring_bytes, kPullSlots};
  std::memcpy(segment.base_, &header, sizeof(header));
  return segment;
}

Segment Segment::open(Fd fd, size_t ring_bytes) {
  const Layout layout = layout_for(ring_bytes);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw std::runtime_error(cat("fstat: ", errno_text(errno)));
  if (static_cast<size_t>(info.st_size) != layout.total)
    throw std::runtime_error(cat("the segment has ", info.st_size, " bytes, expected ", layout.total));
  Segment segment;
  segment.base_ = map(fd.get(), layout.total);
  if (!segment.base_) throw std::runtime_error(cat("mmap: ", errno_text(errno)));
  segment.fd_ = std::move(fd);
  segment.bytes_ = layout.total;
  segment.ring_bytes_ = ring_bytes;
  SegmentHeader header;
  std::memcpy(&header, segment.base_, sizeof(header));
  if (header.magic != kSegmentMagic || header.version != kSegmentVersion || header.ring_bytes != ring_bytes ||
      header.pull_slots != kPullSlots)
    throw std::runtime_error("the segment's header does not describe this layout");
  return segment;
}

Segment::~Segment() {
  if (base_) unmap(base_, bytes_);
}

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this == &other) return *this;
  if (base_) unmap(base_, bytes_);
  fd_ = std::move(other.fd_);
  base_ = std::exchange(other.base_, nullptr);
  bytes_ = std::exchange(other.bytes_, 0);
  ring_bytes_ = std::exchange(other.ring_bytes_, 0);
  return *this;
}

RingControl* Segment::control(int direction) const {
  return reinterpret_cast<RingControl*>(base_ + layout_for(ring_bytes_).controls) + direction;
}

std::byte* Segment::ring(int direction) const {
  return base_ + layout_for(ring_bytes_).rings + static_cast<size_t>(direction) * ring_bytes_;
}

std::atomic<uint64_t>* Segment::pull_slots(int direction) const {
  return reinterpret_cast<std::atomic<uint64_t>*>(base_ + layout_for(ring_bytes_).slots) +
         static_cast<size_t>(direction) * kPullSlots;
}

}  // namespace chorus::transport::shm
