// Broadcast, allgather and reduce_scatter on device memory that every
// member maps from every other, with one process doing the device work for
// all (the allreduce's leader is mapped_allreduce.h's "mapped_leader").
//
// On a GPU that processes share by time slices, each process's queued work
// waits for that process's turn: a staged or message-based collective pays
// a turn per member and step (500 us for 8 B at 4 processes on the H200),
// while one process's batch pays about one (the allreduce's leader: 81 us).
//   A. Every member's input and output mapped (mapped_peers.h), which is
//      also the barrier before anybody reads them.
//   Rank 0, the leader, queues one batch on its stream:
//     broadcast: the root's buffer into every other member's;
//     allgather: member p's input into block p of every member's output (in
//       place, p's input is that block of its own output: not copied onto
//       itself);
//     reduce_scatter: block q of every member's input, combined in rank
//       order into scratch (and averaged), then copied into member q's
//       output. In place, q's output is block q of q's input, which only
//       block q's reduction reads, and that ran before the copy.
//   B. Barrier: the results are in place, and nobody reads any buffer any
//      more.
// Every member ends with the bits rank 0 computed: one process, one order.
//
// Selection: the candidates serve calls without v counts on memory every
// member maps (processes on one host served by cuda_ipc), by name only,
// "mapped_leader": they have not run on a GPU yet. Their price where the
// members share one time-sliced device (Communicator::
// shares_one_time_sliced_device) is written, from the allreduce leader's
// constants by bytes moved, and off (kPricedWhereTimeSliced in the .cc)
// until scripts/gpu-test.sh's part "select" has timed them there.
#pragma once

#include <cstdint>
#include <span>

#include "algorithms/execution/candidate.h"
#include "algorithms/execution/communicator.h"
#include "algorithms/model/call.h"
#include "base/deadline.h"
#include "memory/memory_backend.h"

namespace chorus::algorithms {

std::span<const Candidate> mapped_leader_candidates();

// Runs `call` (broadcast, allgather or reduce_scatter) that way on
// `backend`: the call's memory's in the library, host memory playing the
// device's in the host tests.
void run_mapped_leader(const Communicator& communicator, const Call& call, const void* input, void* output,
                       uint32_t sequence, Deadline deadline, MemoryBackend& backend);

}  // namespace chorus::algorithms
