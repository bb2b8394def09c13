// One-sided access: a Window is a buffer that every rank of a Context
// exposes, which the other ranks read (get) and write (put) without its
// application taking part. The parameter-server pattern maps onto it: each
// rank owns a shard, workers put gradients into the owners' windows and get
// the weights back (benchmarks/parameter_server.cc).
//
// Where the transport between two ranks has one-sided access (ibverbs: RDMA
// write and read straight into the registered window), the target's CPU does
// nothing. Elsewhere (tcp, shm) the same calls are emulated: a thread of the
// target's Window serves each request with two-sided messages. The API and
// its guarantees are the same; native(rank) says which way a rank is reached.
//
// Semantics (those of MPI's passive-target put/get with flush):
// * put/get start an operation and return. The source of a put and the
//   destination of a get must stay valid, and untouched, until flush.
// * flush(rank) returns once every put to `rank` is in its memory and every
//   get from it has landed here; flush_all() does so for every rank.
// * Nothing orders operations of different origins on the same bytes, and a
//   target reading its own window sees others' puts only after a
//   synchronisation that follows their flush (a barrier, a message).
// * Creating and destroying a Window are collective: every rank of the
//   Context takes part, in the same order relative to other collectives.
//   Destruction flushes this rank's operations and waits at a barrier, so
//   no rank is still reaching into a window when its memory goes.
// * Errors are those of collectives: a put or get outside the target's
//   window is InvalidArgument before anything moves; a failed peer fails
//   flush naming it, and finishes the Context.
#pragma once

#include <cstddef>
#include <memory>

#include "chorus/context.h"

namespace chorus {

namespace detail {
struct WindowState;
}

class Window {
 public:
  // Collective: every rank passes its own buffer (sizes may differ, 0 too).
  Window(Context& context, void* data, size_t bytes);
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  size_t bytes(int rank) const;
  // Whether `rank` is reached with the transport's one-sided access.
  bool native(int rank) const;

  void put(int rank, size_t offset, const void* data, size_t bytes);
  void get(int rank, size_t offset, void* out, size_t bytes);
  void flush(int rank);
  void flush_all();

 private:
  std::unique_ptr<detail::WindowState> state_;
};

}  // namespace chorus
