// One-sided access on a verbs connection: RDMA writes (put) and reads (get)
// of memory the peer registered (connection.h, docs/ibverbs.md).
#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "transport/file_descriptor.h"
#include "transport/ibverbs/connection.h"

namespace chorus::transport::ibverbs {
namespace {

// RDMA reads go in pieces of this size, several in flight (up to the
// initiator depth). One 2 MB read took 2.4 s on Soft-RoCE (a burst of read
// responses that it retransmits after a timeout), 32 KiB pieces 46 ms.
constexpr size_t kReadChunkBytes = 32 * 1024;

}  // namespace

void Connection::post_one_sided_locked(Request& request, bool put, std::byte* local, size_t bytes,
                                       RemoteMemory remote) {
  if (peer_said_goodbye_) {
    request.fail(closed_context_error(put ? " before this rank's put" : " before this rank's get"));
    return;
  }
  if (bytes == 0) {
    request.complete();
    return;
  }
  if (remote.key > UINT32_MAX)
    throw InvalidArgument(cat("rank ", owner_.rank(), ": remote key 0x", std::hex, remote.key, std::dec,
                              " for ", peer_label_, " is not an RDMA key"));
  OneSided operation;
  operation.request = &request;
  operation.put = put;
  operation.local = local;
  operation.bytes = bytes;
  operation.remote = remote;
  operation.region = owner_.region_for(local, bytes);
  const uint32_t id = next_one_sided_id_++;
  one_sided_[id] = std::move(operation);
  one_sided_queue_.push_back(id);
  pump_locked();
}

bool Connection::post_next_one_sided_locked(OneSided& operation, uint32_t id) {
  const size_t limit = operation.put ? max_message_bytes_ : std::min(max_message_bytes_, kReadChunkBytes);
  const size_t chunk = std::min(operation.bytes - operation.posted, limit);
  const bool last = operation.posted + chunk == operation.bytes;
  ibv_sge sge{reinterpret_cast<uintptr_t>(operation.local + operation.posted), static_cast<uint32_t>(chunk),
              operation.region->lkey()};
  ibv_send_wr request{};
  request.wr_id = work_id(id_, last ? WorkKind::one_sided_last : WorkKind::one_sided, id);
  request.sg_list = &sge;
  request.num_sge = 1;
  request.opcode = operation.put ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
  request.send_flags = IBV_SEND_SIGNALED;
  request.wr.rdma.remote_addr = operation.remote.address + operation.posted;
  request.wr.rdma.rkey = static_cast<uint32_t>(operation.remote.key);
  ibv_send_wr* bad = nullptr;
  if (const int error = ibv_post_send(cm_id_->qp, &request, &bad); error != 0) {
    owner_.fail_locked(std::make_exception_ptr(IoError(cat("rank ", owner_.rank(), ": cannot post an RDMA ",
                                                           operation.put ? "write" : "read", " to ", peer_label_,
                                                           ": ", errno_text(error)),
                                                       peer_rank_)));
    return false;
  }
  operation.posted += chunk;
  ++sends_in_flight_;
  return true;
}

}  // namespace chorus::transport::ibverbs
