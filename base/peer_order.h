// Tells ThreadSanitizer what other processes order for us.
//
// A message another rank sends after it heard from this process happens
// after everything this process did before it spoke: the peer's memory
// and ours are ordered through the wire or the shared segment. ThreadSanitizer
// sees one process only, so it cannot follow that chain (thread A fills a
// window, thread B acknowledges it to a peer, the peer's barrier flag lets
// this process's main thread read the window: a "race" between A and main).
// The process is one synchronisation object to it here: whatever a thread
// did before it spoke to a peer (posted a request, published on the board)
// happens before whatever a thread does after it hears from one (a request
// completed, a peer's board slot seen). The cost to the checker: a race
// between work before some post and work after some completion on another
// thread is no longer reported, though those two need not be related. The
// transports' own state is still checked, since their locks and atomics
// order it apart from these points.
// Compiled to nothing outside ThreadSanitizer builds.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define CHORUS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHORUS_TSAN 1
#endif
#endif

#ifdef CHORUS_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace chorus {

#ifdef CHORUS_TSAN
inline char peer_order_token;
inline void before_peers_hear() { __tsan_release(&peer_order_token); }
inline void after_peer_heard() { __tsan_acquire(&peer_order_token); }
#else
inline void before_peers_hear() {}
inline void after_peer_heard() {}
#endif

}  // namespace chorus
