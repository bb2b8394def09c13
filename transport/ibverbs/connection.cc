// The protocol on one queue pair (connection.h): posting; setting up is in
// connection_setup.cc, completions and closing in connection_completions.cc.
#include "transport/ibverbs/connection.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "transport/abort_report.h"
#include "transport/peer_errors.h"
#include "transport/receive_matching.h"
#include "transport/file_descriptor.h"

namespace chorus::transport::ibverbs {
namespace {

// Ordinary messages leave this many credits: one for a credit message, one
// for an abort or goodbye.
constexpr uint32_t kReservedCredits = 2;

}  // namespace

// ------------------------------------------------------------ posting

void Connection::queue_locked(MessageHeader header, std::vector<std::byte> payload) {
  outgoing_.push_back(Outgoing{header, std::move(payload)});
  pump_locked();
}

MessageHeader Connection::data_header(MessageKind kind, const Tag& tag, size_t bytes) {
  MessageHeader header;
  header.kind = kind;
  header.a = tag.group;
  header.b = tag.value;
  header.c = tag.signature;
  header.d = bytes;
  return header;
}

void Connection::post_send_locked(Request& request, Tag tag, std::span<const std::byte> data) {
  if (peer_said_goodbye_) {
    request.fail(closed_context_error(cat(" before this rank sent ", describe_tag(tag.group, tag.value))));
    return;
  }
  if (data.size() <= kEagerLimit) {
    const MessageHeader header = data_header(MessageKind::eager, tag, data.size());
    // Straight into a send slot when nothing waits ahead of it; otherwise a
    // copy waits in the queue. Either way the transport holds the bytes from
    // here: the send is finished.
    const bool direct = outgoing_.empty() && has_queue_pair_ && state_ != LinkState::failed &&
                        sends_in_flight_ < max_send_wr_ && !free_send_slots_.empty() &&
                        may_spend_credit(MessageKind::eager);
    if (!direct) {
      queue_locked(header, std::vector<std::byte>(data.begin(), data.end()));
    } else if (!post_slot_message_locked(header, data)) {
      // Posting failed the device; this request is held nowhere, so it fails here.
      request.fail(std::make_exception_ptr(
          IoError(cat("rank ", owner_.rank(), ": cannot send to ", peer_label_), peer_rank_)));
      return;
    }
    request.complete();
    return;
  }
  LargeSend send;
  if (tag.eager) {
    // Must finish without the receiver: the data moves from a copy.
    send.owned.assign(data.begin(), data.end());
    send.region = owner_.register_owned(send.owned.data(), send.owned.size());
  } else {
    send.request = &request;
    send.region = owner_.region_for(data.data(), data.size());
  }
  const uint32_t send_id = next_send_id_++;
  LargeSend& queued = large_sends_[send_id] = std::move(send);
  queued.data = tag.eager ? std::span<const std::byte>(queued.owned) : data;
  MessageHeader header = data_header(MessageKind::ready_to_send, tag, data.size());
  header.e = send_id;
  queue_locked(header);
  if (tag.eager) request.complete();
}

bool Connection::post_recv_locked(Request& request, Tag tag, std::span<std::byte> data, bool only_if_arrived,
                                  const std::exception_ptr& device_failure) {
  const ReceivePosting posting = post_receive_locked(
      matching_, owner_, peer_rank_, device_failure != nullptr, peer_said_goodbye_, request, tag, data,
      only_if_arrived, [&](EarlyMessage& arrived, const PostedReceive& receive) {
        EarlyMessage message = std::move(arrived);
        matching_.remove(arrived);
        PostedReceive posted = receive;
        deliver_locked(posted, message.tag, message.bytes, message.rendezvous, message.send_id, message.payload);
      });
  switch (posting.kind) {
    case ReceivePosting::Kind::taken:
    case ReceivePosting::Kind::posted: return true;
    case ReceivePosting::Kind::not_arrived: return false;
    case ReceivePosting::Kind::failed: request.fail(device_failure); return true;
    case ReceivePosting::Kind::peer_closed:
      request.fail(closed_context_error(cat(" before it sent ", describe_tag(tag.group, tag.value))));
      return true;
    case ReceivePosting::Kind::mismatched:
      // The receiver's error: the sender hears it as this rank's abort.
      request.fail(posting.error);
      owner_.fail_locked(posting.error);
      return true;
  }
  return true;
}

void Connection::send_probe_locked(uint64_t probe, uint64_t group) {
  if (state_ != LinkState::ready || peer_said_goodbye_) return;
  MessageHeader header;
  header.kind = MessageKind::probe;
  header.a = probe;
  header.b = group;
  queue_locked(header);
}

void Connection::queue_goodbye_locked() {
  if (state_ != LinkState::ready) return;
  MessageHeader header;
  header.kind = MessageKind::goodbye;
  queue_locked(header);
}

void Connection::queue_abort_locked(std::span<const std::byte> text, uint64_t error_class, uint64_t blamed_rank) {
  if (state_ != LinkState::ready) return;
  MessageHeader header;
  header.kind = MessageKind::abort;
  header.a = error_class;
  header.b = blamed_rank;
  const size_t bytes = std::min(text.size(), kEagerLimit);
  header.d = bytes;
  // Ahead of whatever waits for credits: it is the last thing the peer hears.
  outgoing_.push_front(Outgoing{header, std::vector<std::byte>(text.begin(), text.begin() + static_cast<long>(bytes))});
  pump_locked();
}

bool Connection::may_spend_credit(MessageKind kind) const {
  switch (kind) {
    case MessageKind::abort:
    case MessageKind::goodbye:
      return credits_ >= 1;
    case MessageKind::credit:
      return credits_ >= 2;
    default:
      return credits_ > kReservedCredits;
  }
}

uint32_t Connection::take_returned_credits_locked() {
  const uint32_t owed = credits_owed_;
  credits_owed_ = 0;
  return owed;
}

void Connection::maybe_return_credits_locked() {
  if (credits_owed_ >= kSlots / 2 && !credit_queued_ && state_ == LinkState::ready) {
    credit_queued_ = true;
    MessageHeader header;
    header.kind = MessageKind::credit;
    outgoing_.push_front(Outgoing{header, {}});
  }
}

void Connection::pump_locked() {
  if (!has_queue_pair_ || state_ == LinkState::failed) return;
  bool progressed = true;
  while (progressed) {
    progressed = false;
    if (!outgoing_.empty() && sends_in_flight_ < max_send_wr_ && !free_send_slots_.empty() &&
        may_spend_credit(outgoing_.front().header.kind)) {
      if (!post_slot_message_locked(outgoing_.front().header, outgoing_.front().payload)) return;
      if (outgoing_.front().header.kind == MessageKind::credit) credit_queued_ = false;
      outgoing_.pop_front();
      progressed = true;
    }
    if (!one_sided_queue_.empty() && sends_in_flight_ < max_send_wr_) {
      auto found = one_sided_.find(one_sided_queue_.front());
      if (found == one_sided_.end() || found->second.posted == found->second.bytes) {
        one_sided_queue_.pop_front();
        progressed = true;
      } else if (post_next_one_sided_locked(found->second, found->first)) {
        if (found->second.posted == found->second.bytes) one_sided_queue_.pop_front();
        progressed = true;
      } else {
        return;
      }
    }
    if (!writes_.empty() && sends_in_flight_ < max_send_wr_) {
      const uint32_t send_id = writes_.front();
      auto found = large_sends_.find(send_id);
      if (found == large_sends_.end() || found->second.last_posted) {
        writes_.pop_front();
        progressed = true;
      } else if (post_next_write_locked(found->second, send_id)) {
        if (found->second.last_posted) writes_.pop_front();
        progressed = true;
      }
    }
  }
}

bool Connection::post_slot_message_locked(MessageHeader header, std::span<const std::byte> payload) {
  const uint32_t slot = free_send_slots_.back();
  std::byte* buffer = slots_.get() + size_t{slot} * kSlotBytes;
  header.credits = take_returned_credits_locked();
  encode_header(header, buffer);
  if (!payload.empty()) std::memcpy(buffer + kHeaderBytes, payload.data(), payload.size());
  const auto length = static_cast<uint32_t>(kHeaderBytes + payload.size());
  ibv_sge sge{reinterpret_cast<uintptr_t>(buffer), length, slots_region_->lkey()};
  ibv_send_wr request{};
  request.wr_id = work_id(id_, WorkKind::send, slot);
  request.sg_list = &sge;
  request.num_sge = 1;
  request.opcode = IBV_WR_SEND;
  request.send_flags = IBV_SEND_SIGNALED | (length <= max_inline_ ? IBV_SEND_INLINE : 0);
  ibv_send_wr* bad = nullptr;
  if (const int error = ibv_post_send(cm_id_->qp, &request, &bad); error != 0) {
    credits_owed_ += header.credits;
    owner_.fail_locked(std::make_exception_ptr(IoError(
        cat("rank ", owner_.rank(), ": cannot post a send to ", peer_label_, ": ", errno_text(error)), peer_rank_)));
    return false;
  }
  free_send_slots_.pop_back();
  --credits_;
  ++sends_in_flight_;
  return true;
}

bool Connection::post_next_write_locked(LargeSend& send, uint32_t send_id) {
  const size_t remaining = send.data.size() - send.written;
  const size_t chunk = std::min(remaining, max_message_bytes_);
  const bool last = chunk == remaining;
  if (last && !may_spend_credit(MessageKind::eager)) return false;  // the last write consumes a receive
  ibv_sge sge{reinterpret_cast<uintptr_t>(send.data.data() + send.written), static_cast<uint32_t>(chunk),
              send.region->lkey()};
  ibv_send_wr request{};
  request.wr_id = work_id(id_, last ? WorkKind::write_last : WorkKind::write, send_id);
  request.sg_list = &sge;
  request.num_sge = 1;
  request.opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  request.send_flags = IBV_SEND_SIGNALED;
  request.wr.rdma.remote_addr = send.remote_address + send.written;
  request.wr.rdma.rkey = send.remote_key;
  if (last) request.imm_data = htonl(send.receive_id);
  ibv_send_wr* bad = nullptr;
  if (const int error = ibv_post_send(cm_id_->qp, &request, &bad); error != 0) {
    owner_.fail_locked(std::make_exception_ptr(IoError(
        cat("rank ", owner_.rank(), ": cannot post an RDMA write to ", peer_label_, ": ", errno_text(error)),
        peer_rank_)));
    return false;
  }
  send.written += chunk;
  ++sends_in_flight_;
  if (last) {
    send.last_posted = true;
    --credits_;
  }
  return true;
}

void Connection::repost_receive_locked(uint32_t slot) {
  std::byte* buffer = slots_.get() + size_t{slot} * kSlotBytes;
  ibv_sge sge{reinterpret_cast<uintptr_t>(buffer), static_cast<uint32_t>(kSlotBytes), slots_region_->lkey()};
  ibv_recv_wr request{};
  request.wr_id = work_id(id_, WorkKind::receive, slot);
  request.sg_list = &sge;
  request.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (const int error = ibv_post_recv(cm_id_->qp, &request, &bad); error != 0) {
    if (state_ != LinkState::failed)
      owner_.fail_locked(std::make_exception_ptr(IoError(
          cat("rank ", owner_.rank(), ": cannot post a receive for ", peer_label_, ": ", errno_text(error)),
          peer_rank_)));
    return;
  }
  ++receives_posted_;
  ++credits_owed_;
}

}  // namespace chorus::transport::ibverbs
