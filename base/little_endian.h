// Little-endian stores and loads, independent of the host's byte order:
// what every wire encoder (tcp frames, verbs messages, addresses) uses so
// ranks on any host agree.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace chorus {

inline void store_le(std::byte* out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
}
inline uint64_t load_le(const std::byte* in, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(in[i]) << (8 * i);
  return value;
}

// Builds a message front to back: little-endian numbers and raw bytes.
class LittleEndianWriter {
 public:
  LittleEndianWriter& number(uint64_t value, size_t bytes) {
    for (size_t i = 0; i < bytes; ++i) bytes_.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xff));
    return *this;
  }
  LittleEndianWriter& raw(std::span<const std::byte> bytes) {
    bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
    return *this;
  }
  LittleEndianWriter& text(std::string_view text) {
    const auto* begin = reinterpret_cast<const std::byte*>(text.data());
    bytes_.insert(bytes_.end(), begin, begin + text.size());
    return *this;
  }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  std::vector<std::byte> bytes_;
};

// Reads a message front to back, from `offset` on. A read that would pass
// the end returns false and moves nothing: what came from outside is
// checked as it is read.
class LittleEndianReader {
 public:
  explicit LittleEndianReader(std::span<const std::byte> message, size_t offset = 0)
      : message_(message), offset_(offset) {}

  bool number(uint64_t& value, size_t bytes) {
    if (left() < bytes) return false;
    value = load_le(message_.data() + offset_, bytes);
    offset_ += bytes;
    return true;
  }
  // The next `count` bytes, in place.
  bool bytes(std::span<const std::byte>& part, size_t count) {
    if (left() < count) return false;
    part = message_.subspan(offset_, count);
    offset_ += count;
    return true;
  }
  // Fills `out` with the next out.size() bytes.
  bool raw(std::span<std::byte> out) {
    std::span<const std::byte> part;
    if (!bytes(part, out.size())) return false;
    std::copy(part.begin(), part.end(), out.begin());
    return true;
  }
  size_t left() const { return offset_ < message_.size() ? message_.size() - offset_ : 0; }
  std::span<const std::byte> rest() const { return message_.subspan(message_.size() - left()); }

 private:
  std::span<const std::byte> message_;
  size_t offset_;
};

}  // namespace chorus
