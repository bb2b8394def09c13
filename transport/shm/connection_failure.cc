// One shared-memory peer's side channel (abort reports, goodbyes, liveness
// probes) and how it fails: later failures, corrupt records, failing every
// pending request.
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

// ---------------------------------------------------------------- side channel and failure

bool Connection::on_side_readable() {
  std::vector<std::byte> message;
  std::vector<Fd> fds;
  while (true) {
    const ssize_t received = receive_side(side_.get(), message, fds, 0);
    if (received < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (received <= 0) {
      receiving_.store(false, std::memory_order_relaxed);
      bool expected;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        expected = failed_ || peer_said_goodbye_;
      }
      if (expected || owner_.shutting_down()) return true;
      const std::string how = received < 0 ? errno_text(errno) : "end of stream";
      fail_later(std::make_exception_ptr(PeerLostError(
          cat("rank ", owner_.rank(), ": connection to ", peer_label_, " closed by the peer (", how,
              ": its process exited or was killed without closing its context)"),
          peer_rank_)));
      report_later_failure();
      return true;
    }
    SideKind kind{};
    std::string why = check_side_message(message, kind);
    if (why.empty() && kind == SideKind::goodbye) {
      // Whatever it sent before its goodbye is in the ring already.
      consume(/*wait_for_lock=*/true);
      size_t pending;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        peer_said_goodbye_ = true;
        peer_gone_.store(true, std::memory_order_release);
      }
      pending = pending_requests();
      CHORUS_LOG(debug, owner_.rank(), "shm: ", peer_label_, " closed its context");
      if (pending > 0)
        fail_later(closed_error(cat(" while ", pending, " requests with it were pending")), LogLevel::debug);
    } else if (why.empty() && kind == SideKind::abort) {
      AbortNote note;
      why = decode_abort(message, note);
      if (why.empty())
        fail_later(adopt_abort(note.error_class, note.blamed_rank, note.text, owner_.rank(), peer_rank_));
    } else if (why.empty() && (kind == SideKind::probe || kind == SideKind::probe_answer)) {
      ProbeNote note;
      why = decode_probe(message, note);
      if (why.empty() && kind == SideKind::probe) {
        note.position = owner_.position_in(note.group);
        send_side(side_.get(), encode_probe(SideKind::probe_answer, note));
      } else if (why.empty()) {
        probe_answers_.record(note.number, note.group, note.position);
      }
    } else if (why.empty()) {
      why = cat("a handshake message after the handshake");
    }
    if (!why.empty()) corrupt(cat("a side-channel message that is not ours (", why, ")"));
    report_later_failure();
  }
}

void Connection::fail_later(std::exception_ptr reason, LogLevel level) {
  receiving_.store(false, std::memory_order_relaxed);
  later_failure_.record(std::move(reason), level);
}

void Connection::report_later_failure() { later_failure_.report_to(owner_); }

void Connection::corrupt(const std::string& what) {
  fail_later(std::make_exception_ptr(IoError(
      cat("rank ", owner_.rank(), ": ", peer_label_, " sent ", what, " (corrupt memory, or not a chorus peer of this job)"),
      peer_rank_)));
}

std::exception_ptr Connection::closed_error(const std::string& detail) const {
  return closed_context_error(owner_.rank(), peer_rank_, detail);
}

size_t Connection::pending_requests() {
  std::lock_guard<std::mutex> consumer(consumer_);
  std::lock_guard<std::mutex> send_lock(send_mutex_);
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_requests_locked();
}

size_t Connection::pending_requests_locked() const {
  size_t pending = incoming_request_ ? 1 : 0;
  pending += send_queue_.size() + pulls_.size();
  for (Request* request : awaiting_pull_) pending += request ? 1 : 0;
  pending += matching_.waiting_receives();
  return pending;
}

void Connection::fail_everything(std::exception_ptr error, std::span<const std::byte> abort_message) {
  std::vector<Request*> doomed;
  bool tell_peer = false;
  {
    // In this order everywhere; taking them waits out any copy into a user buffer.
    std::lock_guard<std::mutex> consumer(consumer_);
    std::lock_guard<std::mutex> puller(puller_);
    std::lock_guard<std::mutex> send_lock(send_mutex_);
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_) return;
    failed_ = true;
    receiving_.store(false, std::memory_order_relaxed);
    tell_peer = !abort_message.empty() && !peer_said_goodbye_;
    for (const Outgoing& message : send_queue_) doomed.push_back(message.request);
    send_queue_.clear();
    pulled_notes_.clear();
    outgoing_waiting_.store(0, std::memory_order_relaxed);
    // Withdraw every offer before the buffers go back to the application: a
    // peer still copying one sees it and fails instead of keeping the bytes.
    for (uint32_t slot = 0; slot < kPullSlots; ++slot) {
      offered_slots_[slot].store(0, std::memory_order_seq_cst);
      if (awaiting_pull_[slot]) doomed.push_back(std::exchange(awaiting_pull_[slot], nullptr));
    }
    for (Request* receive : matching_.forget_all()) doomed.push_back(receive);
    for (const Pull& pull : pulls_) doomed.push_back(pull.request);
    pulls_.clear();
    pulls_waiting_.store(0, std::memory_order_relaxed);
    if (incoming_request_) doomed.push_back(std::exchange(incoming_request_, nullptr));
    incoming_unexpected_ = nullptr;
    incoming_target_ = nullptr;
    write_broken_ = true;
  }
  for (Request* request : doomed) request->fail(error);
  if (tell_peer) send_side(side_.get(), abort_message);
}

void Connection::send_probe(uint64_t probe, uint64_t group) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_ || peer_said_goodbye_ || we_said_goodbye_) return;
  }
  // A full socket buffer or a dead peer leaves the probe unanswered, which is the answer.
  send_side(side_.get(), encode_probe(SideKind::probe, {.number = probe, .group = group}));
}

void Connection::send_goodbye() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_ || peer_said_goodbye_ || we_said_goodbye_) return;
    we_said_goodbye_ = true;
  }
  send_side(side_.get(), encode_goodbye());
}

}  // namespace chorus::transport::shm
