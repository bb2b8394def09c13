// copy_bytes' loop (base/copy.h): unaligned vector loads and stores, four
// at a time, then single vectors, then the tail through memcpy's small path.
#include "base/copy.h"

#include <cstdint>
#include <fstream>
#include <string>


#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace chorus {
namespace {

#if defined(__x86_64__)
__attribute__((target("avx2"))) void copy_avx2(std::byte* to, const std::byte* from, size_t bytes) {
  size_t at = 0;
  for (; at + 128 <= bytes; at += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + at));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + at + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + at + 64));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + at + 96));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + at), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + at + 32), b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + at + 64), c);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + at + 96), d);
  }
  for (; at + 32 <= bytes; at += 32)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + at),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + at)));
  if (at < bytes) std::memcpy(to + at, from + at, bytes - at);
}

void copy_sse2(std::byte* to, const std::byte* from, size_t bytes) {
  size_t at = 0;
  for (; at + 64 <= bytes; at += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + at));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + at + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + at + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + at + 48));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to + at), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to + at + 16), b);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to + at + 32), c);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to + at + 48), d);
  }
  if (at < bytes) std::memcpy(to + at, from + at, bytes - at);
}

// Non-temporal stores: from the first 64-byte boundary of the destination
// (a streaming store needs its vector aligned), the head and tail by memcpy.
__attribute__((target("avx2"))) void stream_avx2(std::byte* to, const std::byte* from, size_t bytes) {
  size_t at = (64 - reinterpret_cast<uintptr_t>(to) % 64) % 64;
  if (at > bytes) at = bytes;
  std::memcpy(to, from, at);
  for (; at + 128 <= bytes; at += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + at));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + at + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + at + 64));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + at + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(to + at), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(to + at + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(to + at + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(to + at + 96), d);
  }
  _mm_sfence();
  if (at < bytes) std::memcpy(to + at, from + at, bytes - at);
}

void stream_sse2(std::byte* to, const std::byte* from, size_t bytes) {
  size_t at = (64 - reinterpret_cast<uintptr_t>(to) % 64) % 64;
  if (at > bytes) at = bytes;
  std::memcpy(to, from, at);
  for (; at + 64 <= bytes; at += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + at));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + at + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + at + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + at + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + at), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + at + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + at + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + at + 48), d);
  }
  _mm_sfence();
  if (at < bytes) std::memcpy(to + at, from + at, bytes - at);
}

using CopyLoop = void (*)(std::byte*, const std::byte*, size_t);
// Chosen on first use (a function-local static: not before the CPU model is known).
CopyLoop copy_loop() {
  static const CopyLoop loop = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") ? copy_avx2 : copy_sse2;
  }();
  return loop;
}

CopyLoop stream_loop() {
  static const CopyLoop loop = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") ? stream_avx2 : stream_sse2;
  }();
  return loop;
}
#endif

}  // namespace

void vector_copy(void* destination, const void* source, size_t bytes) {
#if defined(__x86_64__)
  copy_loop()(static_cast<std::byte*>(destination), static_cast<const std::byte*>(source), bytes);
#else
  std::memcpy(destination, source, bytes);
#endif
}

void stream_copy(void* destination, const void* source, size_t bytes) {
#if defined(__x86_64__)
  stream_loop()(static_cast<std::byte*>(destination), static_cast<const std::byte*>(source), bytes);
#else
  std::memcpy(destination, source, bytes);
#endif
}

namespace {

// The size of CPU 0's level-3 cache, as sysfs gives it ("32768K"); 0 where
// it does not. Not sysconf: glibc reports an AMD package's whole L3 there
// (256 MiB on the project's VM, whose CPUs share 32 MiB).
size_t last_level_cache_bytes() {
  std::ifstream file("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::string text;
  if (!(file >> text) || text.empty()) return 0;
  size_t value = 0, at = 0;
  for (; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at) value = value * 10 + size_t(text[at] - '0');
  if (at == 0) return 0;
  const char unit = at < text.size() ? text[at] : ' ';
  return unit == 'K' ? value << 10 : unit == 'M' ? value << 20 : unit == 'G' ? value << 30 : value;
}

}  // namespace

bool streams_past_cache(size_t destination_bytes_on_host) {
  static const size_t threshold = [] {
    const size_t cache = last_level_cache_bytes();
    return (cache ? cache : size_t{32} << 20) / 2;
  }();
  return destination_bytes_on_host >= threshold;
}

}  // namespace chorus
