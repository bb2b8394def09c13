// Carrying on after a rank dies. When a rank of a job is killed or frozen,
// every collective on the job's Context fails on every other rank (naming
// it). Instead of restarting the whole job, the survivors call shrink: they
// agree through the job's store on who is still there, renumber themselves
// 0..n-1 in their old order, and connect a new Context among themselves,
// with the same options as the first and this Context's current timeout
// (Context::set_timeout carries over).
//
//   try {
//     chorus::allreduce(*context, grads, chorus::ReduceOp::sum);
//   } catch (const chorus::Error& error) {
//     context = chorus::shrink(*context);   // the survivors, renumbered
//     // roll back to the last checkpoint of this step and go on
//   }
//
// Who counts as a survivor: every rank that calls shrink before the others
// close the membership. They close it as soon as every rank of the old job
// has either checked in or been seen dead or frozen by one that has (a lost
// connection, an unanswered liveness probe), else when the join window
// ends. A rank that checks in later (one that was stopped and resumed) is
// refused with Aborted: it gets an error, never a seat.
//
// The store must outlive the dead rank: chorus-run's own store (its
// default), a chorus-store, Redis or a file store. The store rank 0 embeds
// (tcp:// under torchrun or mpirun) dies with rank 0.
#pragma once

#include <chrono>
#include <memory>

#include "chorus/context.h"

namespace chorus {

struct ShrinkOptions {
  // How long the survivors wait for each other to check in, at most. Zero:
  // the Context's timeout.
  std::chrono::milliseconds join_window{0};
};

// A collective call among the survivors of `context`'s job (see above).
// Throws InvalidArgument for a Context made by split or connected over MPI
// (no store to meet at), Aborted on a rank the survivors did not wait for,
// IoError/TimeoutError when the store is unreachable or a survivor died
// while connecting (shrink again then).
std::shared_ptr<Context> shrink(const Context& context, const ShrinkOptions& options = {});

}  // namespace chorus
