// Copying bulk data between buffers: copy_bytes, what the board, the shm
// transport and the host memory backend copy user data with.
//
// Why not always memcpy: glibc's memcpy copies from about 2 KiB up to its
// "rep movsb stop threshold" with `rep movsb`, which some AMD CPUs run far
// below their vector loads and stores when source and destination are not
// 64-byte aligned alike. On the project's VM as it was in stop 51 (AMD
// EPYC, erms, fsrm) memcpy moved 1.6-2.6 GB/s at 4-64 KiB against 41-77
// GB/s for a vector loop, and 31-35 GB/s from 256 KiB up, where glibc
// leaves `rep movsb` (benchmarks/README.md, "memcpy's rep movsb"). Those
// are the sizes of a gradient bucket's pieces, so where an AMD (or Hygon,
// its licensee) CPU shows that case, copy_bytes takes a loop of vector
// loads and stores there (AVX2 where the CPU has it, SSE2 otherwise),
// unless the two buffers are aligned alike.
//
// Whether it does is measured once per process (a few dozen copies of 16
// KiB, 16 bytes apart mod 64), not assumed from the vendor: the same VM on
// an AMD EPYC of family 1Ah (Zen 5) runs `rep movsb` at 94-130 GB/s at any
// alignment, and there it is the faster copy into memory another core
// reads: it stores whole lines, where the vector loop first reads back
// each line the peer read last. Between two pinned processes a 64 KiB
// exchange through shared memory took 4.1 µs against the loop's 11.4
// (chorus-crosscore-bench; benchmarks/README.md, "rep movsb into the
// board", stop 80).
//
// Intel's `rep movsb` has no such case, and it stores
// whole lines without first reading them: on an Intel Xeon (Emerald
// Rapids) memcpy moved 30-32 GB/s at 256 KiB where the loop moved 14-17,
// and 20-24 against 10-13 at 1 MiB. So elsewhere copy_bytes is memcpy
// (benchmarks/README.md, "copy_bytes on Intel", stop 66). Small copies,
// which memcpy inlines, and large ones, which it streams past the caches,
// are memcpy's everywhere.
//
// Below glibc's threshold, from 1 KiB, Intel's `rep movsb` also wins where
// the board copies: into a slot whose lines the peer read last (whole-line
// stores take them without fetching them back) and out of a slot a peer
// just wrote. On the Emerald Rapids Xeon at 2 ranks, a 2 KiB allreduce
// took 0.89 µs against 1.15 through memcpy's vector loop, an allgather of
// 2 KiB blocks 0.82 against 0.95 (benchmarks/README.md, "rep movsb from
// 1 KiB", stop 71). So on Intel CPUs with ERMS copy_bytes runs `rep movsb`
// itself from kMidCopyFrom to kVectorCopyFrom; at 256 and 512 bytes it
// made no difference, and memcpy's inlined small copies keep those.
#pragma once

#include <cstddef>
#include <cstring>
#include <string_view>

namespace chorus {

// The sizes copy_bytes copies with its own loop: [kVectorCopyFrom, kVectorCopyBelow).
inline constexpr size_t kVectorCopyFrom = 2112;  // where glibc 2.36 starts `rep movsb` here
inline constexpr size_t kVectorCopyBelow = size_t{4} << 20;
// The sizes copy_bytes leaves to mid_size_copy: [kMidCopyFrom, kVectorCopyBelow);
// on Intel it takes `rep movsb` below kVectorCopyFrom.
inline constexpr size_t kMidCopyFrom = 1024;

// The vector loop, for any size (copy_bytes picks it for the sizes above
// where this_cpu_rep_movsb_is_slow_misaligned, for buffers not aligned alike).
void vector_copy(void* destination, const void* source, size_t bytes);

// Whether a CPU of this vendor (CPUID's 12 characters, "AuthenticAMD") may
// run `rep movsb` slowly for buffers aligned differently: AMD and Hygon.
bool rep_movsb_may_be_slow_misaligned(std::string_view cpu_vendor);

// Whether timings of misaligned copies show that slow case: `rep movsb`
// taking over 4x the vector loop's time (the slow case measured 17x, the
// fast CPUs 1.0-1.6x).
bool rep_movsb_timed_slow(double rep_movsb_seconds, double vector_loop_seconds);

// Whether this CPU runs misaligned `rep movsb` slowly: false but where its
// vendor may, and there timed once per process (rep_movsb_timed_slow).
bool this_cpu_rep_movsb_is_slow_misaligned();

// Whether a CPU of this vendor, with or without ERMS (CPUID 7: "enhanced
// rep movsb"), copies [kMidCopyFrom, kVectorCopyFrom) faster with its own
// `rep movsb` than through memcpy's vector loop: Intel's with ERMS.
bool short_rep_movsb_pays(std::string_view cpu_vendor, bool erms);

// This CPU's vendor string ("" where CPUID does not give one).
std::string_view this_cpu_vendor();

// Whether this CPU has ERMS (false where CPUID does not say).
bool this_cpu_has_erms();

// What copy_bytes uses from kMidCopyFrom to kVectorCopyBelow on this CPU
// (chorus-reduce-bench prints it): "memcpy, then the vector loop unless
// aligned alike" (the AMD CPUs whose `rep movsb` is slow misaligned), "rep
// movsb, then memcpy" (Intel with ERMS) or "memcpy".
std::string_view mid_size_copy_name();

// copy_bytes for the sizes of [kMidCopyFrom, kVectorCopyBelow).
void mid_size_copy(void* destination, const void* source, size_t bytes);

// The vector loop with non-temporal stores: the destination's lines go to
// memory without being read into the cache first, and leave it. For a
// destination past the caches that nobody reads soon.
void stream_copy(void* destination, const void* source, size_t bytes);

// Where streaming pays: a call whose destinations, all the host's ranks'
// together, reach half of the last-level cache of CPU 0 (sysfs; 32 MiB where
// it does not say) would push out of the cache what it reads next (the
// slots it copies from, the input). Measured on the project's VM (32 MiB of
// L3): an alltoall over the board at 2 ranks, 8 MiB a rank, 1.12x faster
// streaming, 16 MiB 1.3-1.5x; at 8 MiB in all no faster.
bool streams_past_cache(size_t destination_bytes_on_host);

// memcpy's contract: the ranges do not overlap.
inline void copy_bytes(void* destination, const void* source, size_t bytes) {
  if (bytes >= kMidCopyFrom && bytes < kVectorCopyBelow)
    mid_size_copy(destination, source, bytes);
  else
    std::memcpy(destination, source, bytes);
}

}  // namespace chorus
