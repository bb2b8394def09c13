// The protocol on one queue pair (connection.h): what its completions mean
// (arrived messages matched to receives, large transfers, credits) and how
// it closes or fails.
#include "transport/ibverbs/connection.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "base/little_endian.h"
#include "transport/abort_report.h"
#include "transport/peer_errors.h"
#include "transport/receive_matching.h"
#include "transport/file_descriptor.h"

namespace chorus::transport::ibverbs {

// ------------------------------------------------------------ completions

bool Connection::on_completion_locked(const ibv_wc& completion,
                                      const std::function<bool(std::span<const std::byte>)>& proven) {
  const WorkKind kind = work_kind(completion.wr_id);
  const uint32_t value = work_value(completion.wr_id);
  if (kind == WorkKind::receive) --receives_posted_;
  else --sends_in_flight_;
  if (completion.status != IBV_WC_SUCCESS) {
    if (state_ == LinkState::failed || state_ == LinkState::closed) return true;  // flushed while closing
    if (state_ != LinkState::ready) return false;
    if (peer_said_goodbye_) {
      // The peer closed in order and then disconnected: the device flushes
      // what was still posted here before the disconnect event reaches this
      // rank. That is the goodbye's consequence, not a failure; whatever
      // still waited on the peer hears that it closed.
      on_peer_closed_locked();
      return true;
    }
    if (completion.status == IBV_WC_WR_FLUSH_ERR) {
      // A flush is never the first sign: the queue pair went into the error
      // state because the peer disconnected (its goodbye may still be in
      // this queue, or it left without one) or an earlier completion or
      // device event failed it. The disconnect event names what happened;
      // the engine judges this flush alone only if none follows
      // (flush_unexplained_since).
      if (!flushed_since_) flushed_since_ = std::chrono::steady_clock::now();
      return true;
    }
    owner_.fail_locked(std::make_exception_ptr(IoError(
        cat("rank ", owner_.rank(), ": the connection to ", peer_label_, " failed: ",
            completion_status_text(completion.status)),
        peer_rank_)));
    return true;
  }
  switch (kind) {
    case WorkKind::send:
      free_send_slots_.push_back(value);
      break;
    case WorkKind::write:
    case WorkKind::one_sided:
      break;
    case WorkKind::one_sided_last: {
      auto found = one_sided_.find(value);
      if (found != one_sided_.end()) {
        found->second.request->complete();
        one_sided_.erase(found);
      }
      break;
    }
    case WorkKind::write_last: {
      auto found = large_sends_.find(value);
      if (found != large_sends_.end()) {
        if (found->second.request) found->second.request->complete();
        large_sends_.erase(found);
      }
      break;
    }
    case WorkKind::receive: {
      if (completion.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        if (state_ != LinkState::ready) return false;
        auto found = large_recvs_.find(ntohl(completion.imm_data));
        if (found == large_recvs_.end()) {
          corrupt_locked(cat("a write completed receive ", ntohl(completion.imm_data), ", which this rank never "
                             "asked for"));
          return true;
        }
        found->second.request->complete();
        large_recvs_.erase(found);
        repost_receive_locked(value);
        // A write's receive is owed back like any other: when only writes
        // arrive, nothing else would return the window, and the sender
        // stalls with its last credits reserved.
        maybe_return_credits_locked();
        break;
      }
      const std::byte* buffer = slots_.get() + size_t{value} * kSlotBytes;
      const std::optional<MessageHeader> header =
          completion.byte_len >= kHeaderBytes ? decode_header(buffer) : std::nullopt;
      if (!header) {
        if (state_ != LinkState::ready) return false;
        corrupt_locked(cat("a message of ", completion.byte_len, " bytes with no valid header"));
        return true;
      }
      const std::span<const std::byte> payload(buffer + kHeaderBytes, completion.byte_len - kHeaderBytes);
      if (state_ != LinkState::ready) {
        // Before the peer proved the secret, its proof is all it may send.
        if (header->kind != MessageKind::proof || !proven(payload)) return false;
        repost_receive_locked(value);
        break;
      }
      if (header->credits > kSlots - credits_) {
        corrupt_locked(cat("it returned ", header->credits, " credits with ", credits_, " of ", kSlots, " unspent"));
        return true;
      }
      credits_ += header->credits;
      on_message_locked(*header, payload);
      if (state_ == LinkState::failed) return true;
      repost_receive_locked(value);
      maybe_return_credits_locked();
      break;
    }
  }
  pump_locked();
  return true;
}

void Connection::on_message_locked(const MessageHeader& header, std::span<const std::byte> payload) {
  switch (header.kind) {
    case MessageKind::proof:
      return corrupt_locked("a second proof");
    case MessageKind::eager:
      if (header.d != payload.size())
        return corrupt_locked(cat("an eager message announcing ", header.d, " bytes carried ", payload.size()));
      return on_data_locked(Tag{header.b, header.c, header.a}, payload.size(), false, 0, payload);
    case MessageKind::ready_to_send:
      if (header.d <= kEagerLimit || header.e > UINT32_MAX)
        return corrupt_locked(cat("a large-message announcement of ", header.d, " bytes"));
      return on_data_locked(Tag{header.b, header.c, header.a}, header.d, true, header.e, {});
    case MessageKind::clear_to_send:
      return on_clear_to_send_locked(header);
    case MessageKind::credit:
      return;
    case MessageKind::probe: {
      MessageHeader answer;
      answer.kind = MessageKind::answer;
      answer.a = header.a;
      answer.b = header.b;
      answer.c = owner_.position_in(header.b);
      outgoing_.push_back(Outgoing{answer, {}});
      return;
    }
    case MessageKind::answer:
      probe_answers_.record(header.a, header.b, header.c);
      return;
    case MessageKind::abort: {
      if (header.d != payload.size() || header.d > kMaxAbortTextBytes)
        return corrupt_locked("an abort message of inconsistent length");
      const std::string text(reinterpret_cast<const char*>(payload.data()), payload.size());
      owner_.fail_locked(adopt_abort(header.a, header.b, text, owner_.rank(), peer_rank_));
      return;
    }
    case MessageKind::goodbye:
      peer_said_goodbye_ = true;
      on_peer_closed_locked();
      return;
  }
}

void Connection::on_data_locked(const Tag& tag, size_t bytes, bool rendezvous, uint64_t send_id,
                                std::span<const std::byte> payload) {
  auto match = match_arrival_locked(matching_, owner_, peer_rank_, peer_label_, tag, bytes, bytes + kArrivalOverhead);
  // A receive that does not fit stays posted: the cleanup after this failure fails it.
  if (match.error) return owner_.fail_locked(match.error);
  if (match.receive.request) {
    deliver_locked(match.receive, tag, bytes, rendezvous, send_id, payload);
    return;
  }
  EarlyMessage& arrived = *match.kept;
  arrived.rendezvous = rendezvous;
  arrived.send_id = send_id;
  if (!rendezvous) arrived.payload.assign(payload.begin(), payload.end());
  // Claimable now (post_recv_if_arrived); the notifier takes only its own locks.
  owner_.arrivals().notify();
}

bool Connection::deliver_locked(PostedReceive& posted, const Tag& tag, size_t bytes, bool rendezvous, uint64_t send_id,
                                std::span<const std::byte> payload) {
  if (!posted.expects(tag, bytes)) {
    // The receiver's error: the sender hears it as this rank's abort.
    const auto error = owner_.mismatch_error(peer_rank_, tag, bytes, posted);
    posted.request->fail(error);
    owner_.fail_locked(error);
    return false;
  }
  if (!rendezvous) {
    if (bytes) std::memcpy(posted.buffer.data(), payload.data(), bytes);
    posted.request->complete();
    return true;
  }
  start_large_receive_locked(posted, send_id);
  return true;
}

void Connection::start_large_receive_locked(PostedReceive& posted, uint64_t send_id) {
  uint32_t receive_id = next_recv_id_++;
  while (receive_id == 0 || large_recvs_.count(receive_id)) receive_id = next_recv_id_++;
  LargeRecv& receive = large_recvs_[receive_id];
  receive.request = posted.request;
  receive.buffer = posted.buffer;
  try {
    receive.region = owner_.region_for(posted.buffer.data(), posted.buffer.size());
  } catch (...) {
    large_recvs_.erase(receive_id);
    owner_.fail_locked(std::current_exception());
    return;
  }
  MessageHeader header;
  header.kind = MessageKind::clear_to_send;
  header.a = send_id;
  header.b = reinterpret_cast<uintptr_t>(posted.buffer.data());
  header.c = receive.region->rkey();
  header.d = posted.buffer.size();
  header.e = receive_id;
  queue_locked(header);
}

void Connection::on_clear_to_send_locked(const MessageHeader& header) {
  auto found = header.a <= UINT32_MAX ? large_sends_.find(static_cast<uint32_t>(header.a)) : large_sends_.end();
  if (found == large_sends_.end() || found->second.remote_key != 0 || found->second.last_posted)
    return corrupt_locked(cat("a clear-to-send for send ", header.a, ", which is not waiting for one"));
  LargeSend& send = found->second;
  if (header.d != send.data.size() || header.c > UINT32_MAX || header.e > UINT32_MAX || header.e == 0)
    return corrupt_locked(cat("a clear-to-send for ", header.d, " bytes where ", send.data.size(), " were announced"));
  send.remote_address = header.b;
  send.remote_key = static_cast<uint32_t>(header.c);
  send.receive_id = static_cast<uint32_t>(header.e);
  writes_.push_back(found->first);
}

void Connection::corrupt_locked(const std::string& what) {
  owner_.fail_locked(std::make_exception_ptr(
      IoError(cat("rank ", owner_.rank(), ": ", peer_label_, " broke the ibverbs protocol: ", what), peer_rank_)));
}

std::exception_ptr Connection::closed_context_error(const std::string& detail) const {
  return transport::closed_context_error(owner_.rank(), peer_rank_, detail);
}

// ------------------------------------------------------------ closing

size_t Connection::pending_requests_locked() const {
  size_t pending = large_recvs_.size() + one_sided_.size();
  for (const auto& [id, send] : large_sends_)
    if (send.request) ++pending;
  pending += matching_.waiting_receives();
  return pending;
}

void Connection::on_peer_closed_locked() {
  const size_t pending = pending_requests_locked();
  if (pending == 0) return;
  fail_requests_locked(closed_context_error(cat(" while ", pending, " requests with it were pending")));
}

void Connection::enter_error_state_locked() {
  if (!has_queue_pair_) return;
  ibv_qp_attr attributes{};
  attributes.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(cm_id_->qp, &attributes, IBV_QP_STATE);
}

void Connection::fail_requests_locked(const std::exception_ptr& error) {
  for (auto& [id, send] : large_sends_)
    if (send.request) send.request->fail(error);
  large_sends_.clear();
  writes_.clear();
  for (auto& [id, receive] : large_recvs_) receive.request->fail(error);
  large_recvs_.clear();
  for (auto& [id, operation] : one_sided_) operation.request->fail(error);
  one_sided_.clear();
  one_sided_queue_.clear();
  for (Request* receive : matching_.withdraw_posted()) receive->fail(error);
}

}  // namespace chorus::transport::ibverbs
