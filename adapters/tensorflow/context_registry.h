// The Contexts the op library's kernels run on, each with the Negotiator
// that matches their calls across the ranks.
//
// How a kernel finds the Python side's chorus.Context: chorus.tensorflow
// asks the Context for a capsule holding a copy of its std::shared_ptr
// (chorus.Context._shared_context(), adapters/python_module/context.cc), hands the pointer
// inside to chorus_tensorflow_adopt_context() through ctypes, and gets an
// integer handle back. Every op carries that handle as its `context`
// attribute. A handle, not the pointer itself, because TensorFlow caches
// kernels by their attributes: a handle is never reused, so a kernel made
// for a Context that was shut down can never run on a later one that
// happens to sit at the same address. Both halves link the one libchorus,
// so the shared_ptr copied across is the same type on both sides.
#pragma once

#include <cstdint>
#include <memory>

#include "adapters/negotiation/negotiator.h"
#include "chorus/context.h"

namespace chorus::tensorflow_ops {

// A Context and the Negotiator that matches the ops' calls on it across
// the ranks (adapters/negotiation/negotiator.h), with TensorFlow's names for
// types and chorus's for reduction ops in its messages.
struct SharedContext {
  explicit SharedContext(std::shared_ptr<Context> shared);
  std::shared_ptr<Context> context;
  negotiation::Negotiator negotiator;
};

// The Context registered under `handle`, or null once released (or never adopted).
std::shared_ptr<SharedContext> find_context(int64_t handle);

}  // namespace chorus::tensorflow_ops

// What chorus.tensorflow calls through ctypes. `shared_context` points at a
// std::shared_ptr<chorus::Context> (the capsule's content), which is copied.
extern "C" {
__attribute__((visibility("default"))) int64_t chorus_tensorflow_adopt_context(const void* shared_context);
// Puts the Context `shared_context` points at under `handle` in place of
// the one there (an elastic job's survivors after a shrink), so that ops
// made for the handle, in functions already traced too, run on it. The
// old Context's Negotiator stops as chorus_tensorflow_release_context's
// does. Returns false for a handle that is not open.
__attribute__((visibility("default"))) bool chorus_tensorflow_rebind_context(int64_t handle,
                                                                             const void* shared_context);
// Forgets the handle; once no op holds it, its Negotiator finishes the cycle
// in progress and fails what still waits (Aborted).
__attribute__((visibility("default"))) void chorus_tensorflow_release_context(int64_t handle);
}
