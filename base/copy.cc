// copy_bytes' loop and stream_copy (base/copy.h): unaligned vector loads,
// four at a time, stored as they are or streamed past the cache, then the
// tail through memcpy's small path.
#include "base/copy.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace chorus {
namespace {

#if defined(__x86_64__)
// The two stores each loop takes: cached (unaligned) or streaming. A
// streaming store needs its vector aligned, so a streaming loop starts at
// the destination's first 64-byte boundary (the head by memcpy) and fences
// at the end: streaming stores are weakly ordered, and the peer that is
// told the data arrived must see it.
enum class Store : uint8_t { cached, streaming };

template <Store kStore>
size_t head_bytes(const std::byte* to, size_t bytes) {
  if constexpr (kStore == Store::cached) return 0;
  return std::min<size_t>((64 - reinterpret_cast<uintptr_t>(to) % 64) % 64, bytes);
}

template <Store kStore>
__attribute__((target("avx2"))) inline void store(std::byte* at, __m256i value) {
  if constexpr (kStore == Store::streaming)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(at), value);
  else
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), value);
}

template <Store kStore>
inline void store(std::byte* at, __m128i value) {
  if constexpr (kStore == Store::streaming)
    _mm_stream_si128(reinterpret_cast<__m128i*>(at), value);
  else
    _mm_storeu_si128(reinterpret_cast<__m128i*>(at), value);
}

template <Store kStore>
__attribute__((target("avx2"))) void loop_avx2(std::byte* to, const std::byte* from, size_t bytes) {
  size_t at = head_bytes<kStore>(to, bytes);
  std::memcpy(to, from, at);
  for (; at + 128 <= bytes; at += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + at));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + at + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + at + 64));
    const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + at + 96));
    store<kStore>(to + at, a);
    store<kStore>(to + at + 32, b);
    store<kStore>(to + at + 64, c);
    store<kStore>(to + at + 96, d);
  }
  for (; at + 32 <= bytes; at += 32)
    store<kStore>(to + at, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + at)));
  if constexpr (kStore == Store::streaming) _mm_sfence();
  if (at < bytes) std::memcpy(to + at, from + at, bytes - at);
}

template <Store kStore>
void loop_sse2(std::byte* to, const std::byte* from, size_t bytes) {
  size_t at = head_bytes<kStore>(to, bytes);
  std::memcpy(to, from, at);
  for (; at + 64 <= bytes; at += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + at));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + at + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + at + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + at + 48));
    store<kStore>(to + at, a);
    store<kStore>(to + at + 16, b);
    store<kStore>(to + at + 32, c);
    store<kStore>(to + at + 48, d);
  }
  if constexpr (kStore == Store::streaming) _mm_sfence();
  if (at < bytes) std::memcpy(to + at, from + at, bytes - at);
}

using CopyLoop = void (*)(std::byte*, const std::byte*, size_t);
// Chosen on first use (a function-local static: not before the CPU model is known).
template <Store kStore>
CopyLoop loop_for_this_cpu() {
  static const CopyLoop loop = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") ? loop_avx2<kStore> : loop_sse2<kStore>;
  }();
  return loop;
}
#endif

}  // namespace

void vector_copy(void* destination, const void* source, size_t bytes) {
#if defined(__x86_64__)
  loop_for_this_cpu<Store::cached>()(static_cast<std::byte*>(destination), static_cast<const std::byte*>(source),
                                     bytes);
#else
  std::memcpy(destination, source, bytes);
#endif
}

bool rep_movsb_may_be_slow_misaligned(std::string_view cpu_vendor) {
  return cpu_vendor == "AuthenticAMD" || cpu_vendor == "HygonGenuine";
}

bool rep_movsb_timed_slow(double rep_movsb_seconds, double vector_loop_seconds) {
  return rep_movsb_seconds > 4 * vector_loop_seconds;
}

namespace {

// The fastest of a few batches of copies of 16 KiB, in the cache, source
// and destination 16 bytes apart mod 64 (a malloc'd buffer and a slot).
// About 0.4 ms where the slow case shows, 20 µs where not.
double fastest_copies(void (*copy)(void*, const void*, size_t)) {
  constexpr size_t kBytes = 16 << 10;
  constexpr int kBatches = 5, kCopies = 8;
  std::vector<std::byte> buffer(2 * kBytes + 256);
  std::byte* const source = buffer.data() + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64;
  std::byte* const destination = source + kBytes + 64 + 16;
  double fastest = std::numeric_limits<double>::max();
  copy(destination, source, kBytes);
  for (int batch = 0; batch < kBatches; ++batch) {
    const auto started = std::chrono::steady_clock::now();
    for (int done = 0; done < kCopies; ++done) {
      copy(destination, source, kBytes);
      // Keeps the copies from being merged or dropped.
      asm volatile("" : : "r"(destination) : "memory");
    }
    fastest = std::min(fastest, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  return fastest;
}

}  // namespace

bool this_cpu_rep_movsb_is_slow_misaligned() {
  static const bool slow = [] {
    if (!rep_movsb_may_be_slow_misaligned(this_cpu_vendor())) return false;
    // memcpy takes `rep movsb` at this size (glibc 2.36 from 2,112 bytes).
    const double rep_movsb = fastest_copies([](void* to, const void* from, size_t bytes) { std::memcpy(to, from, bytes); });
    const double loop = fastest_copies(vector_copy);
    return rep_movsb_timed_slow(rep_movsb, loop);
  }();
  return slow;
}

bool short_rep_movsb_pays(std::string_view cpu_vendor, bool erms) { return erms && cpu_vendor == "GenuineIntel"; }

bool this_cpu_has_erms() {
#if defined(__x86_64__)
  static const bool erms = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ebx & (1u << 9)) != 0;
  }();
  return erms;
#else
  return false;
#endif
}

std::string_view this_cpu_vendor() {
  static const std::string vendor = [] {
    std::string text;
#if defined(__x86_64__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx)) {
      // The string is EBX, EDX, ECX in that order, little-endian.
      for (unsigned word : {ebx, edx, ecx})
        for (int byte = 0; byte < 4; ++byte) text.push_back(static_cast<char>((word >> (8 * byte)) & 0xff));
    }
#endif
    return text;
  }();
  return vendor;
}

namespace {

enum class MidCopy : uint8_t { memcpy, memcpy_then_loop, rep_movsb_then_memcpy };

bool aligned_alike(const void* destination, const void* source) {
  return (reinterpret_cast<uintptr_t>(destination) - reinterpret_cast<uintptr_t>(source)) % 64 == 0;
}

MidCopy mid_copy_for_this_cpu() {
  static const MidCopy kind = [] {
    if (this_cpu_rep_movsb_is_slow_misaligned()) return MidCopy::memcpy_then_loop;
    if (short_rep_movsb_pays(this_cpu_vendor(), this_cpu_has_erms())) return MidCopy::rep_movsb_then_memcpy;
    return MidCopy::memcpy;
  }();
  return kind;
}

}  // namespace

std::string_view mid_size_copy_name() {
  switch (mid_copy_for_this_cpu()) {
    case MidCopy::memcpy_then_loop: return "memcpy, then the vector loop unless aligned alike";
    case MidCopy::rep_movsb_then_memcpy: return "rep movsb, then memcpy";
    case MidCopy::memcpy: break;
  }
  return "memcpy";
}

void mid_size_copy(void* destination, const void* source, size_t bytes) {
  switch (mid_copy_for_this_cpu()) {
    case MidCopy::memcpy_then_loop:
      // Aligned alike, memcpy's `rep movsb` is the fast one (see copy.h).
      if (bytes >= kVectorCopyFrom && !aligned_alike(destination, source)) return vector_copy(destination, source, bytes);
      break;
    case MidCopy::rep_movsb_then_memcpy:
#if defined(__x86_64__)
      if (bytes < kVectorCopyFrom) {
        auto* to = static_cast<std::byte*>(destination);
        const auto* from = static_cast<const std::byte*>(source);
        asm volatile("rep movsb" : "+D"(to), "+S"(from), "+c"(bytes) : : "memory");
        return;
      }
#endif
      break;
    case MidCopy::memcpy:
      break;
  }
  std::memcpy(destination, source, bytes);
}

void stream_copy(void* destination, const void* source, size_t bytes) {
#if defined(__x86_64__)
  loop_for_this_cpu<Store::streaming>()(static_cast<std::byte*>(destination), static_cast<const std::byte*>(source),
                                        bytes);
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
