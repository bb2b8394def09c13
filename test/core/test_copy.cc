// copy_bytes, its vector loop and stream_copy (base/copy.h) against a byte-by-byte
// reference: every size up to a few KiB and across the thresholds, every
// alignment of source and destination within a cache line, and the bytes
// on either side of the destination untouched.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/copy.h"

using chorus::copy_bytes;
using chorus::stream_copy;
using chorus::vector_copy;

namespace {

// 0 where every copied byte is right and the guards around it are intact.
template <class Copy>
int wrong_bytes(Copy copy, size_t bytes, size_t source_offset, size_t destination_offset) {
  constexpr size_t kGuard = 64;
  std::vector<uint8_t> source(bytes + 128), destination(bytes + 128 + 2 * kGuard, 0xEE);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 131 + 7);
  uint8_t* to = destination.data() + kGuard + destination_offset;
  copy(to, source.data() + source_offset, bytes);
  int wrong = 0;
  for (size_t i = 0; i < bytes; ++i)
    if (to[i] != source[source_offset + i]) ++wrong;
  for (uint8_t* guard = destination.data(); guard < to; ++guard)
    if (*guard != 0xEE) ++wrong;
  for (uint8_t* guard = to + bytes; guard < destination.data() + destination.size(); ++guard)
    if (*guard != 0xEE) ++wrong;
  return wrong;
}

}  // namespace

TEST_CASE("copy_bytes and its vector loop copy every size and alignment exactly", "[copy]") {
  std::vector<size_t> sizes;
  for (size_t bytes = 0; bytes <= 300; ++bytes) sizes.push_back(bytes);
  for (size_t bytes : {chorus::kMidCopyFrom - 1, chorus::kMidCopyFrom, chorus::kMidCopyFrom + 1, size_t{1536} + 5,
                       chorus::kVectorCopyFrom - 1, chorus::kVectorCopyFrom,
                       chorus::kVectorCopyFrom + 1, size_t{4096} + 97, size_t{65536} + 31})
    sizes.push_back(bytes);
  const auto with_copy_bytes = [](void* to, const void* from, size_t bytes) { copy_bytes(to, from, bytes); };
  const auto with_loop = [](void* to, const void* from, size_t bytes) { vector_copy(to, from, bytes); };
  // Streaming stores start at the destination's first 64-byte boundary: the
  // offsets put the head at every length from 0 to 63.
  const auto streaming = [](void* to, const void* from, size_t bytes) { stream_copy(to, from, bytes); };
  int wrong = 0;
  for (size_t bytes : sizes)
    for (size_t source_offset : {size_t{0}, size_t{1}, size_t{8}, size_t{16}, size_t{33}, size_t{63}})
      for (size_t destination_offset : {size_t{0}, size_t{7}, size_t{16}, size_t{32}, size_t{48}, size_t{63}}) {
        wrong += wrong_bytes(with_copy_bytes, bytes, source_offset, destination_offset);
        wrong += wrong_bytes(with_loop, bytes, source_offset, destination_offset);
        wrong += wrong_bytes(streaming, bytes, source_offset, destination_offset);
      }
  CHECK(wrong == 0);
}

TEST_CASE("the vector loop takes the mid sizes only where rep movsb was timed slow, on AMD and Hygon", "[copy]") {
  CHECK(chorus::rep_movsb_may_be_slow_misaligned("AuthenticAMD"));
  CHECK(chorus::rep_movsb_may_be_slow_misaligned("HygonGenuine"));
  CHECK_FALSE(chorus::rep_movsb_may_be_slow_misaligned("GenuineIntel"));
  CHECK_FALSE(chorus::rep_movsb_may_be_slow_misaligned(""));
  // The slow case took 17x the loop's time; the fast CPUs 1.0-1.6x.
  CHECK(chorus::rep_movsb_timed_slow(17e-6, 1e-6));
  CHECK_FALSE(chorus::rep_movsb_timed_slow(1.6e-6, 1e-6));
  CHECK_FALSE(chorus::rep_movsb_timed_slow(0.7e-6, 1e-6));
  // Short copies take rep movsb on Intel with ERMS only.
  CHECK(chorus::short_rep_movsb_pays("GenuineIntel", true));
  CHECK_FALSE(chorus::short_rep_movsb_pays("GenuineIntel", false));
  CHECK_FALSE(chorus::short_rep_movsb_pays("AuthenticAMD", true));
  CHECK_FALSE(chorus::short_rep_movsb_pays("", true));
  // This CPU's answer follows its vendor string and, on AMD, the timing.
  const std::string_view vendor = chorus::this_cpu_vendor();
  INFO("CPU vendor '" << std::string(vendor) << "'");
  const bool erms = chorus::this_cpu_has_erms();
  INFO("ERMS " << erms);
  const bool slow = chorus::this_cpu_rep_movsb_is_slow_misaligned();
  INFO("rep movsb timed slow misaligned " << slow);
  if (!chorus::rep_movsb_may_be_slow_misaligned(vendor)) CHECK_FALSE(slow);
  CHECK(chorus::mid_size_copy_name() ==
        (slow                                         ? std::string_view("memcpy, then the vector loop unless aligned alike")
         : chorus::short_rep_movsb_pays(vendor, erms) ? std::string_view("rep movsb, then memcpy")
                                                      : std::string_view("memcpy")));
#if defined(__x86_64__)
  CHECK(vendor.size() == 12);
#endif
}

TEST_CASE("stream_copy copies a few MiB exactly, and streaming starts past half a cache", "[copy]") {
  const auto streaming = [](void* to, const void* from, size_t bytes) { stream_copy(to, from, bytes); };
  CHECK(wrong_bytes(streaming, (size_t{3} << 20) + 77, 5, 9) == 0);
  CHECK_FALSE(chorus::streams_past_cache(0));
  CHECK_FALSE(chorus::streams_past_cache(size_t{64} << 10));
  CHECK(chorus::streams_past_cache(size_t{1} << 40));
}

TEST_CASE("copy_bytes copies past its vector range with memcpy, exactly", "[copy]") {
  const auto with_copy_bytes = [](void* to, const void* from, size_t bytes) { copy_bytes(to, from, bytes); };
  CHECK(wrong_bytes(with_copy_bytes, chorus::kVectorCopyBelow + 5, 3, 16) == 0);
}
