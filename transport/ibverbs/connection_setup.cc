// Setting up one queue pair (connection.h): its slots and receives, and the
// handshake's proofs of the job secret.
#include "transport/ibverbs/connection.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "base/little_endian.h"
#include "base/log.h"
#include "transport/file_descriptor.h"

namespace chorus::transport::ibverbs {
namespace {

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

}  // namespace chorus::transport::ibverbs
