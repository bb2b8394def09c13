// Point-to-point messages between two ranks of a Context: send/recv with a
// user tag (included by chorus/collectives.h).
//
// Only the two ranks take part, so these are not numbered like collectives
// and may be interleaved freely with them. Between one pair of ranks,
// messages with the same tag are matched in the order they were sent; with
// different tags in any order (a message nobody receives yet is buffered by
// the receiver). Both sides must agree on count and type: a receive of
// another size or type fails with MismatchError, which, like every error,
// finishes the Context. Sending to oneself is an InvalidArgument.
//
// send completes once the data is handed to the transport (the peer need not
// have posted its recv yet); recv once the data landed.
// The async forms' Work must be waited for (or finish) before the Context is
// destroyed; dropping an unfinished one waits for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "chorus/collective_options.h"
#include "chorus/context.h"
#include "base/types.h"
#include "chorus/work.h"

namespace chorus {

// options.algorithm is ignored; options.timeout bounds the wait.
void send(Context& context, const void* data, size_t count, DataType type, int peer, uint32_t tag,
          const CollectiveOptions& options = {});
Work send_async(Context& context, const void* data, size_t count, DataType type, int peer, uint32_t tag,
                const CollectiveOptions& options = {});
void recv(Context& context, void* data, size_t count, DataType type, int peer, uint32_t tag,
          const CollectiveOptions& options = {});
Work recv_async(Context& context, void* data, size_t count, DataType type, int peer, uint32_t tag,
                const CollectiveOptions& options = {});

// Receives the first message with `tag` from any other rank of the Context
// (MPI_ANY_SOURCE, PyTorch's recv without a source). Exactly one message is
// taken: what other ranks sent with that tag stays buffered for later
// receives, specific or not; between one pair of ranks, messages with one
// tag are still taken in the order they were sent. A message of another
// count or type fails with MismatchError naming its sender. Host memory only
// (options.memory must be host). recv_any returns the sender's rank; the
// async form's Work tells it once finished (Work::source_rank).
//
// It takes only what has arrived: it looks when it is called and whenever a
// message nobody received arrives (and while an async Work is tested or
// waited for), sleeping in between. So a specific recv posted after it may
// still take a message from that peer first; no message is lost or taken
// twice. Over connections on demand it connects every other rank (dialing
// the lower ones, taking the higher ones' dials as they come).
// options.timeout bounds the wait: TimeoutError naming the tag awaited.
int recv_any(Context& context, void* data, size_t count, DataType type, uint32_t tag,
             const CollectiveOptions& options = {});
Work recv_any_async(Context& context, void* data, size_t count, DataType type, uint32_t tag,
                    const CollectiveOptions& options = {});

template <class T>
void send(Context& context, std::span<T> data, int peer, uint32_t tag, const CollectiveOptions& options = {}) {
  send(context, data.data(), data.size(), data_type_of<std::remove_cv_t<T>>(), peer, tag, options);
}
template <class T>
Work send_async(Context& context, std::span<T> data, int peer, uint32_t tag, const CollectiveOptions& options = {}) {
  return send_async(context, data.data(), data.size(), data_type_of<std::remove_cv_t<T>>(), peer, tag, options);
}
template <class T>
void recv(Context& context, std::span<T> data, int peer, uint32_t tag, const CollectiveOptions& options = {}) {
  recv(context, data.data(), data.size(), data_type_of<T>(), peer, tag, options);
}
template <class T>
Work recv_async(Context& context, std::span<T> data, int peer, uint32_t tag, const CollectiveOptions& options = {}) {
  return recv_async(context, data.data(), data.size(), data_type_of<T>(), peer, tag, options);
}

template <class T>
int recv_any(Context& context, std::span<T> data, uint32_t tag, const CollectiveOptions& options = {}) {
  return recv_any(context, data.data(), data.size(), data_type_of<T>(), tag, options);
}
template <class T>
Work recv_any_async(Context& context, std::span<T> data, uint32_t tag, const CollectiveOptions& options = {}) {
  return recv_any_async(context, data.data(), data.size(), data_type_of<T>(), tag, options);
}

}  // namespace chorus
