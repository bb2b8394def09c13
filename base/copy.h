// Copying bulk data between buffers: copy_bytes, what the board, the shm
// transport and the host memory backend copy user data with.
//
// Why not memcpy: glibc's memcpy copies from about 2 KiB up to its
// "rep movsb stop threshold" with `rep movsb`, which some CPUs run far below
// their vector loads and stores. On the project's AMD EPYC VM (erms, fsrm)
// memcpy moved 1.6-2.6 GB/s at 4-64 KiB against 41-77 GB/s for a vector
// loop, and 31-35 GB/s from 256 KiB up, where glibc leaves `rep movsb`
// (benchmarks/README.md, "memcpy's rep movsb"). Those are the sizes of a
// gradient bucket's pieces, so copy_bytes takes a loop of vector loads and
// stores there (AVX2 where the CPU has it, SSE2 otherwise) and leaves the
// rest to memcpy: small copies, which it inlines, and large ones, which it
// streams past the caches.
#pragma once

#include <cstddef>
#include <cstring>

namespace chorus {

// The sizes copy_bytes copies with its own loop: [kVectorCopyFrom, kVectorCopyBelow).
inline constexpr size_t kVectorCopyFrom = 2112;  // where glibc 2.36 starts `rep movsb` here
inline constexpr size_t kVectorCopyBelow = size_t{4} << 20;

// The vector loop, for any size (copy_bytes picks it for the sizes above).
void vector_copy(void* destination, const void* source, size_t bytes);

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
  if (bytes >= kVectorCopyFrom && bytes < kVectorCopyBelow)
    vector_copy(destination, source, bytes);
  else
    std::memcpy(destination, source, bytes);
}

}  // namespace chorus
