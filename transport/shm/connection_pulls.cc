// One shared-memory peer's pulls (large messages the receiver copies out of
// the sender's memory with process_vm_readv) and its doorbells for sleeping.
#include "transport/shm/connection.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "transport/abort_report.h"
#include "transport/peer_errors.h"
#include "transport/shm/side_channel.h"

namespace chorus::transport::shm {
namespace {

// The most one process_vm_readv call copies before the puller checks
// whether the device failed meanwhile (so abort never waits long for it).
constexpr size_t kPullChunk = size_t{8} << 20;

}  // namespace

// ---------------------------------------------------------------- pulls

bool Connection::run_pulls() {
  std::unique_lock<std::mutex> lock(puller_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  bool moved = false;
  while (true) {
    Pull* pull = nullptr;
    {
      std::lock_guard<std::mutex> receive_lock(mutex_);
      if (failed_ || pulls_.empty()) break;
      pull = &pulls_.front();  // only this thread removes entries: the reference stays valid
    }
    moved = true;
    std::exception_ptr error = finish_pull(*pull);
    if (error) {
      fail_later(error);
      break;
    }
    if (pull->copied < pull->destination.size()) break;  // the device failed meanwhile
    // The copy happened while the offer stood, so the bytes are the message.
    Request* done = pull->request;
    const uint32_t slot = pull->slot;
    const uint64_t generation = pull->generation;
    {
      std::lock_guard<std::mutex> receive_lock(mutex_);
      pulls_.pop_front();
      pulls_waiting_.fetch_sub(1, std::memory_order_relaxed);
    }
    bool doorbell = false;
    {
      std::lock_guard<std::mutex> send_lock(send_mutex_);
      pulled_notes_.emplace_back(slot, generation);
      outgoing_waiting_.fetch_add(1, std::memory_order_relaxed);
      doorbell = flush_locked();
    }
    if (doorbell) ring_peer_doorbell();
    done->complete();
  }
  lock.unlock();
  report_later_failure();
  return moved;
}

std::exception_ptr Connection::finish_pull(Pull& pull) {
  const size_t total = pull.destination.size();
  // A withdrawn offer means the sender aborted, and its reason (or, if it
  // died, the end of the side channel) is on its way: that is what this rank
  // should report, not the withdrawal. Left pending (copied stays short of
  // total) until it comes, or the grace passes.
  constexpr auto kReasonGrace = std::chrono::seconds(1);
  if (pull.withdrawn_at != Clock::time_point{}) {
    if (Clock::now() - pull.withdrawn_at < kReasonGrace) return nullptr;
    return std::make_exception_ptr(
        IoError(cat("rank ", owner_.rank(), ": ", peer_label_, " withdrew a message of ", total,
                    " bytes while this rank was copying it (it aborted, and its reason did not follow)"),
                peer_rank_));
  }
  while (pull.copied < total) {
    if (owner_.failed()) return nullptr;
    const size_t chunk = std::min(kPullChunk, total - pull.copied);
    iovec local{pull.destination.data() + pull.copied, chunk};
    iovec remote{reinterpret_cast<void*>(pull.address + pull.copied), chunk};
    const ssize_t copied = ::process_vm_readv(peer_pid_, &local, 1, &remote, 1, 0);
    if (copied <= 0) {
      const int error = copied < 0 ? errno : EIO;
      if (error == EINTR) continue;
      return std::make_exception_ptr(IoError(
          cat("rank ", owner_.rank(), ": cannot copy a message of ", total, " bytes out of ", peer_label_, " (",
              errno_text(error), error == ESRCH ? ": the process is gone" : "", ")"),
          peer_rank_));
    }
    pull.copied += static_cast<size_t>(copied);
  }
  // Dekker with the sender withdrawing its offer: copy, fence, check. The
  // copy is the kernel's, so the fence orders it in hardware terms only.
  // ThreadSanitizer sees neither the copy nor fences (g++ refuses
  // std::atomic_thread_fence under it: -Wtsan); its builds check without.
#if !defined(__SANITIZE_THREAD__)
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  if (peer_slots_[pull.slot].load(std::memory_order_acquire) != pull.generation) {
    pull.copied = 0;
    pull.withdrawn_at = Clock::now();
  }
  return nullptr;
}

// ---------------------------------------------------------------- sleeping

bool Connection::arm_doorbells() {
  if (owner_.failed()) return true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pulls_.empty()) return false;
  }
  if (in_.request_data_doorbell()) return false;
  std::lock_guard<std::mutex> lock(send_mutex_);
  if (send_queue_.empty() && pulled_notes_.empty()) return true;
  if (!send_queue_.empty() && send_queue_.front().pull && free_slots_.empty()) return true;  // a pulled note wakes us
  return !out_.request_space_doorbell(out_.max_payload());
}

void Connection::disarm_doorbells() { in_.cancel_data_doorbell(); }

}  // namespace chorus::transport::shm
