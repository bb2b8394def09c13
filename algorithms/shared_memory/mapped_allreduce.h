// Allreduce on device memory that every member maps from every other
// (Device::map_peer_memory: CUDA IPC between processes on one host). Each
// rank reads its peers' buffers itself, so a call costs three host barriers
// and two batches of kernels whatever its size, where a Plan pays 2(N-1)
// messages, each a copy and a wait of its own (on a GPU that processes
// share by time slices, each wait can be a turn of the slice).
//
// Two shots (large calls): the buffer is cut into one chunk per rank.
//   A. Every rank gathers every other's descriptions of its input and
//      output (a host allgather). A rank sends its own only once its inputs
//      are ready, so this is also the barrier before anybody reads them.
//   1. Rank r reduces chunk r of every rank's input, in rank order, into
//      chunk r of its own output (and averages it). One rank computes each
//      chunk, so every rank ends with the same bits.
//   B. Barrier: every chunk is reduced.
//   2. Rank r copies chunk p of rank p's output into its own, for each peer p.
//   C. Barrier: nobody reads rank r's buffers any more; the caller may
//      reuse them.
//   Writes never meet reads: in 1 rank r writes only its chunk r, which only
//   it reads (in place too: peers read their own chunks of its input); in 2
//   it writes chunks p != r, which nobody reads in 2.
// One shot (small calls): A; every rank reduces the whole buffer from every
// input, in rank order (the same bits everywhere), into its output, or into
// scratch when in place (peers may still read its input); B, after which
// nobody reads any input; in place, the scratch is copied into the output.
// One batch of kernels (two in place) and two barriers.
// Leader ("mapped_leader"): A; rank 0 alone reduces every input, in rank
// order, into its scratch and copies the result into every rank's output,
// one batch; B. On a GPU that processes share by time slices every rank's
// batch of kernels waits for that rank's turn; here only one process uses
// the device (on the H200, small copies waited about 180-274 us per other
// process that had work queued, docs/cuda.md). Measured there (2026-12-04,
// time-sliced): 81-90 us from 8 B to 2 MiB and 450 us at 64 MiB at 4
// processes, where one shot took 660-720 us and two shots 1,600 us at 64
// MiB; 53-64 us and 194 us at 2. `auto` takes it where every member uses
// one device that its processes share by time slices
// (Communicator::shares_one_time_sliced_device); elsewhere (MPS, a device
// per process) by name only.
//
// Selection: under "auto" (and no CHORUS_ALGO entry for allreduce) a
// communicator whose members all map each other's memory of the call's
// kind runs allreduces of kDevicePlanMinBytes and more on it this way, one
// shot up to kMappedOneShotMaxBytes; smaller ones run staged whole
// (algorithms/execution/staging.h), which measured as fast or faster on the
// H100. Where the members share one time-sliced device, the costs pick the
// leader instead at every size but about 32-64 KiB (staged). A Plan's name runs the Plan; "mapped_one_shot" and
// "mapped_two_shot" force a variant (benchmarks and tests), and are an
// error where the members do not all map each other's memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "algorithms/model/call.h"
#include "algorithms/execution/candidate.h"
#include "algorithms/execution/communicator.h"
#include "base/deadline.h"
#include "memory/memory_backend.h"

namespace chorus::algorithms {

inline constexpr std::string_view kMappedOneShot = "mapped_one_shot";
inline constexpr std::string_view kMappedTwoShot = "mapped_two_shot";
inline constexpr std::string_view kMappedLeader = "mapped_leader";
// Measured on the H100, 4 processes time-sliced: one shot 665 us flat up to
// 2 MiB, two shots 1254 us there (docs/cuda.md); larger sizes unmeasured.
inline constexpr size_t kMappedOneShotMaxBytes = size_t{2} << 20;

// Measured at 4 processes, whose barriers take two rounds each: a call's
// time is its barriers' and kernel batches' waits for the device, so it
// scales with the rounds, ceil(log2 members) (mapped_cost). Two shots past
// one shot's measured sizes, each byte moved twice over the device's links.
inline constexpr double kMappedOneShotSeconds = 665e-6;
inline constexpr double kMappedTwoShotSeconds = 1254e-6;
inline constexpr double kMappedSecondsPerByte = 0.01e-9;
// The leader, time-sliced (H200, 2026-12-04): 53 us at 2 members and 81 at
// 4 for small calls; each member's input read and output written by the
// leader at about 1.2 ps a byte (450 us at 64 MiB and 4 members).
inline constexpr double kMappedLeaderSeconds = 25e-6;
inline constexpr double kMappedLeaderSecondsPerMember = 14e-6;
inline constexpr double kMappedLeaderSecondsPerMemberByte = 1.2e-12;

// The two variants as candidates (candidate.h): they serve allreduces on
// memory every member maps from every other; one shot costs its measured
// time up to kMappedOneShotMaxBytes (past it, only by name), two shots
// theirs. Every member answers alike: the answer reads only the call and
// what was agreed at connect.
std::span<const Candidate> mapped_candidates();

void run_mapped_allreduce(const Communicator& communicator, const Call& call, const void* input, void* output,
                          std::string_view algorithm, uint32_t sequence, Deadline deadline);
// The same on a given memory backend rather than the call's memory's: the
// host tests run it with host memory playing the device's part.
void run_mapped_allreduce(const Communicator& communicator, const Call& call, const void* input, void* output,
                          std::string_view algorithm, uint32_t sequence, Deadline deadline, MemoryBackend& backend);

}  // namespace chorus::algorithms
