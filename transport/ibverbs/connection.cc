// The protocol on one queue pair (connection.h).
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
#include "transport/file_descriptor.h"

namespace chorus::transport::ibverbs {
namespace {

// Ordinary messages leave this many credits: one for a credit message, one
// for an abort or goodbye.
constexpr uint32_t kReservedCredits = 2;
// What one message waiting for its receive costs beyond its bytes.
constexpr size_t kArrivalOverhead = 128;
// Below this, a message is copied into the work request itself.
constexpr uint32_t kInlineWanted = 256;

}  // namespace

Connection::Connection(ConnectionOwner& owner, uint32_t id, rdma_cm_id* cm_id, bool dialer, int peer_rank,
                       int stream)
    : owner_(owner), id_(id), cm_id_(cm_id), dialer_(dialer), peer_rank_(peer_rank), stream_(stream) {
  peer_label_ = cat("peer rank ", peer_rank);
}

Connection::~Connection() {
  // The queue pair goes before the region its receives point into.
  if (has_queue_pair_) rdma_destroy_qp(cm_id_);
  slots_region_.reset();
  if (cm_id_) rdma_destroy_id(cm_id_);
}

std::string Connection::create_queue_pair_locked(ibv_pd* pd, ibv_cq* cq, uint32_t max_send_wr,
                                                 size_t max_message_bytes) {
  const size_t bytes = 2 * size_t{kSlots} * kSlotBytes;
  void* memory = nullptr;
  if (::posix_memalign(&memory, 4096, bytes) != 0) return "cannot allocate the message slots";
  slots_ = std::unique_ptr<std::byte[], void (*)(void*)>(static_cast<std::byte*>(memory), std::free);
  std::memset(memory, 0, bytes);
  try {
    slots_region_ = owner_.register_owned(slots_.get(), bytes);
  } catch (const std::exception& error) {
    return error.what();
  }
  ibv_qp_init_attr attributes{};
  attributes.send_cq = cq;
  attributes.recv_cq = cq;
  attributes.qp_type = IBV_QPT_RC;
  attributes.cap.max_send_wr = max_send_wr;
  attributes.cap.max_recv_wr = kSlots;
  attributes.cap.max_send_sge = 1;
  attributes.cap.max_recv_sge = 1;
  attributes.cap.max_inline_data = kInlineWanted;
  if (rdma_create_qp(cm_id_, pd, &attributes) != 0) {
    // Some devices take no inline data at all.
    attributes.cap.max_inline_data = 0;
    if (rdma_create_qp(cm_id_, pd, &attributes) != 0)
      return cat("cannot create a queue pair: ", errno_text(errno));
  }
  has_queue_pair_ = true;
  // The id, not a pointer: an asynchronous event may name a queue pair being destroyed.
  cm_id_->qp->qp_context = reinterpret_cast<void*>(static_cast<uintptr_t>(id_));
  max_send_wr_ = std::min(max_send_wr, attributes.cap.max_send_wr);
  max_inline_ = attributes.cap.max_inline_data;
  max_message_bytes_ = max_message_bytes;
  for (uint32_t slot = 0; slot < kSlots; ++slot) free_send_slots_.push_back(kSlots + slot);
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    repost_receive_locked(slot);
    if (receives_posted_ != slot + 1) return cat("cannot post receive ", slot, ": ", errno_text(errno));
  }
  credits_owed_ = 0;  // the initial window is known to both sides
  return {};
}

// ------------------------------------------------------------ handshake

Proof Connection::proof(bool of_dialer, const JobSecret& secret) const {
  std::byte link[12];
  const int dialer_rank = dialer_ ? owner_.rank() : peer_rank_;
  const int acceptor_rank = dialer_ ? peer_rank_ : owner_.rank();
  store_le(link + 0, static_cast<uint32_t>(dialer_rank), 4);
  store_le(link + 4, static_cast<uint32_t>(acceptor_rank), 4);
  store_le(link + 8, static_cast<uint32_t>(stream_), 4);
  const Challenge& dialer_challenge = dialer_ ? my_challenge : peer_challenge;
  const Challenge& acceptor_challenge = dialer_ ? peer_challenge : my_challenge;
  return secret.prove(of_dialer ? "ibverbs dialer" : "ibverbs acceptor",
                      {std::span<const std::byte>(dialer_challenge), std::span<const std::byte>(acceptor_challenge),
                       std::span<const std::byte>(link)});
}

void Connection::send_proof_locked(const Proof& proof) {
  MessageHeader header;
  header.kind = MessageKind::proof;
  queue_locked(header, std::vector<std::byte>(proof.begin(), proof.end()));
}

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

void Connection::post_recv_locked(Request& request, Tag tag, std::span<std::byte> data) {
  auto found = unexpected_.find(TagKey(tag));
  if (found != unexpected_.end() && !found->second.empty()) {
    Arrival arrival = std::move(found->second.front());
    found->second.pop_front();
    if (found->second.empty()) unexpected_.erase(found);
    unexpected_bytes_ -= arrival.bytes + kArrivalOverhead;
    PostedRecv posted{&request, tag, data};
    deliver_locked(posted, arrival.tag, arrival.bytes, arrival.rendezvous, arrival.send_id, arrival.payload);
    return;
  }
  if (peer_said_goodbye_) {
    request.fail(closed_context_error(cat(" before it sent ", describe_tag(tag.group, tag.value))));
    return;
  }
  posted_[TagKey(tag)].push_back(PostedRecv{&request, tag, data});
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
      position_answer_.record(header.a, header.b, header.c);
      if (header.a > answered_probe_.load(std::memory_order_relaxed))
        answered_probe_.store(header.a, std::memory_order_release);
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
  auto found = posted_.find(TagKey(tag));
  if (found != posted_.end() && !found->second.empty()) {
    PostedRecv posted = found->second.front();
    found->second.pop_front();
    if (found->second.empty()) posted_.erase(found);
    deliver_locked(posted, tag, bytes, rendezvous, send_id, payload);
    return;
  }
  // Each waiting message also costs its bookkeeping, so a flood of empty
  // messages is bounded too.
  const size_t cost = bytes + kArrivalOverhead;
  if (cost > owner_.max_unexpected_bytes() - std::min(unexpected_bytes_, owner_.max_unexpected_bytes())) {
    owner_.fail_locked(std::make_exception_ptr(IoError(
        cat("rank ", owner_.rank(), ": ", peer_label_, " sent a message of ", bytes, " bytes for ",
            describe_tag(tag.group, tag.value), " that no receive was posted for, with ", unexpected_bytes_,
            " bytes of such messages from it buffered already: more than the limit of ",
            owner_.max_unexpected_bytes(), " bytes (CHORUS_MAX_UNEXPECTED_BYTES). Post receives before peers "
            "send that much, or raise the limit"),
        peer_rank_)));
    return;
  }
  unexpected_bytes_ += cost;
  Arrival arrival{tag, bytes, rendezvous, send_id, {}};
  if (!rendezvous) arrival.payload.assign(payload.begin(), payload.end());
  unexpected_[TagKey(tag)].push_back(std::move(arrival));
  // Claimable now (post_recv_if_arrived); the notifier takes only its own locks.
  owner_.arrivals().notify();
}

bool Connection::deliver_locked(PostedRecv& posted, const Tag& tag, size_t bytes, bool rendezvous, uint64_t send_id,
                                std::span<const std::byte> payload) {
  if (bytes != posted.buffer.size() || tag.signature != posted.tag.signature) {
    // The receiver's error: the sender hears it as this rank's abort.
    const auto error = mismatch_error(tag, bytes, posted.tag, posted.buffer.size());
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

void Connection::start_large_receive_locked(PostedRecv& posted, uint64_t send_id) {
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

std::exception_ptr Connection::mismatch_error(const Tag& theirs, size_t their_bytes, const Tag& mine,
                                              size_t my_bytes) const {
  return transport::mismatch_error(owner_.rank(), peer_rank_, owner_.describe_signature(theirs.signature),
                                   owner_.describe_signature(mine.signature), mine, their_bytes, my_bytes);
}

std::exception_ptr Connection::closed_context_error(const std::string& detail) const {
  return transport::closed_context_error(owner_.rank(), peer_rank_, detail);
}

// ------------------------------------------------------------ closing

size_t Connection::pending_requests_locked() const {
  size_t pending = large_recvs_.size() + one_sided_.size();
  for (const auto& [id, send] : large_sends_)
    if (send.request) ++pending;
  for (const auto& [key, queue] : posted_) pending += queue.size();
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
  for (auto& [key, queue] : posted_)
    for (PostedRecv& posted : queue) posted.request->fail(error);
  posted_.clear();
}

}  // namespace chorus::transport::ibverbs
