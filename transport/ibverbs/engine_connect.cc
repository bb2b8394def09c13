// Connection setup of the verbs device (engine.h): the higher rank dials
// (address and route resolution, then the connection request), the lower
// accepts, and both prove the job secret over the new queue pair before it
// carries a message. rdma_cm events arrive on the progress thread.
#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "transport/ibverbs/engine.h"

namespace chorus::transport::ibverbs {
namespace {

// A connection that has not proved the job secret by then is not one of ours.
constexpr auto kHandshakeTimeout = std::chrono::seconds(5);
// Between attempts to reach a peer that did not answer yet.
constexpr auto kDialRetry = std::chrono::milliseconds(100);
constexpr int kResolveTimeoutMs = 2000;
// A flush reaches the completion queue a moment before the disconnect event
// that explains it; a second is ample even in the Soft-RoCE VM.
constexpr auto kFlushExplanationGrace = std::chrono::seconds(1);

const char* event_name(rdma_cm_event_type type) { return rdma_event_str(type); }

}  // namespace

// ---------------------------------------------------------------- connections

Connection* Engine::add_connection_locked(rdma_cm_id* id, bool dialer, int peer_rank, int stream) {
  const auto index = static_cast<uint32_t>(connections_.size());
  if (index >= (1u << 24)) throw IoError(cat("rank ", rank(), ": too many RDMA connection attempts"));
  connections_.push_back(std::make_unique<Connection>(*this, index, id, dialer, peer_rank, stream));
  by_cm_id_[id] = index;
  return connections_.back().get();
}

void Engine::destroy_connection_locked(uint32_t id) {
  if (id < connections_.size() && connections_[id]) {
    by_cm_id_.erase(connections_[id]->cm_id());
    connections_[id].reset();
  }
  unproven_.erase(id);
}

rdma_conn_param Engine::connection_parameters(const std::byte* private_data, uint8_t bytes) const {
  rdma_conn_param parameters{};
  parameters.private_data = private_data;
  parameters.private_data_len = bytes;
  parameters.responder_resources = max_read_atoms_;
  parameters.initiator_depth = max_read_atoms_;
  parameters.retry_count = 7;
  // Credits keep a receive posted for every message; one retry covers a
  // device that reports a re-posted receive late, and no more is relied on.
  parameters.rnr_retry_count = 1;
  return parameters;
}

std::unique_ptr<Pair> Engine::connect(int peer_rank, std::span<const std::byte> peer_address, Deadline deadline,
                                      int stream) {
  check_peer(peer_rank, peer_address);
  if (stream < 0 || stream >= options_.streams)
    throw InvalidArgument(cat("rank ", rank(), ": stream ", stream, " to peer rank ", peer_rank,
                              " does not exist (this device keeps ", options_.streams, " per peer)"));
  const VerbsAddress peer = decode_address(peer_address, rank(), peer_rank);
  // One side dials, so no two connections race for one link: the higher
  // rank, as with tcp.
  return rank() > peer_rank ? dial(peer, stream, deadline) : wait_for_dialer(peer, stream, deadline);
}

std::unique_ptr<Pair> Engine::dial(const VerbsAddress& peer, int stream, Deadline deadline) {
  const auto started = Clock::now();
  std::string last_error = "no answer";
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (failure_) std::rethrow_exception(failure_);
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(channel_.get(), &id, nullptr, RDMA_PS_TCP) != 0)
      throw IoError(cat("rank ", rank(), ": cannot create an RDMA connection id: ", errno_text(errno)), peer.rank);
    Connection* connection = add_connection_locked(id, true, peer.rank, stream);
    connection->set_peer_label(cat("peer rank ", peer.rank, " (", peer.to_string(),
                                   options_.streams > 1 ? cat(", stream ", stream) : std::string(), ")"));
    connection->my_challenge = fresh_challenge();
    connection->acceptor_nonce = peer.nonce;
    const uint32_t index = connection->id();
    sockaddr_storage source = listen_address_;
    reinterpret_cast<sockaddr_in*>(&source)->sin_port = 0;  // sin6_port sits at the same offset
    sockaddr_storage destination = peer.ip;
    const int timeout_ms = static_cast<int>(std::clamp<int64_t>(deadline.remaining().count(), 1, kResolveTimeoutMs));
    if (rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&source), reinterpret_cast<sockaddr*>(&destination),
                          timeout_ms) != 0) {
      last_error = cat("cannot resolve its address: ", errno_text(errno));
      destroy_connection_locked(index);
    } else {
      // Only dial() destroys a dialing connection, but the device's own
      // cleanup may clear them all once it fails: a missing one is failed.
      changed_.wait_until(lock, deadline.at(), [&] {
        const Connection* c = connections_[index].get();
        return failure_ || !c || c->state() == LinkState::ready || c->state() == LinkState::failed;
      });
      Connection* c = connections_[index].get();
      if (!c) {
        if (failure_) std::rethrow_exception(failure_);
        last_error = "the connection attempt was dropped";
      } else if (c->state() == LinkState::ready) {
        linked_[{peer.rank, stream}] = index;
        return make_pair_locked(*c);
      }
      if (c && c->state() == LinkState::failed) last_error = c->why_failed;
      destroy_connection_locked(index);
      if (failure_) std::rethrow_exception(failure_);
    }
    if (deadline.expired() || Clock::now() + kDialRetry >= deadline.at()) break;
    changed_.wait_for(lock, kDialRetry, [&] { return failure_ != nullptr; });
  }
  const auto waited = std::chrono::duration<double>(Clock::now() - started).count();
  throw TimeoutError(cat("rank ", rank(), ": gave up connecting to peer rank ", peer.rank, " at ", peer.to_string(),
                         " over RDMA after ", waited, " s (", last_error, ")"));
}

std::unique_ptr<Pair> Engine::wait_for_dialer(const VerbsAddress& peer, int stream, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::pair<int, int> link{peer.rank, stream};
  const auto waited = wait_for_dialer_locked(lock, deadline, [&] { return admitted_.count(link) > 0; });
  auto found = admitted_.find(link);
  if (found == admitted_.end()) {
    throw TimeoutError(cat("rank ", rank(), ": timed out after ", std::chrono::duration<double>(waited).count(),
                           " s waiting for peer rank ", peer.rank,
                           " (", peer.to_string(), ") to connect over RDMA",
                           options_.streams > 1 ? cat(" (stream ", stream, ")") : std::string()));
  }
  const uint32_t index = found->second;
  admitted_.erase(found);
  linked_[link] = index;
  return make_pair_locked(*connections_[index]);
}


bool Engine::on_proof_locked(Connection& connection, std::span<const std::byte> proof) {
  // An acceptor may see the dialer's proof before its own ESTABLISHED event:
  // the queue pair was ready to receive when it accepted.
  const bool awaited = connection.state() == LinkState::proving ||
                       (!connection.dialer() && connection.state() == LinkState::connecting);
  if (!awaited || proof.size() != kProofBytes) return false;
  const Proof expected = connection.proof(!connection.dialer(), options_.secret);
  if (!std::equal(proof.begin(), proof.end(), expected.begin())) return false;
  connection.set_state(LinkState::ready);
  unproven_.erase(connection.id());
  if (!connection.dialer()) {
    const std::pair<int, int> link{connection.peer_rank(), connection.stream()};
    if (admitted_.count(link) || linked_.count(link)) {
      connection.set_state(LinkState::proving);
      return false;  // a second connection for a link that has one
    }
    connection.send_proof_locked(connection.proof(false, options_.secret));
    admitted_[link] = connection.id();
  }
  changed_.notify_all();
  return true;
}

void Engine::drop_locked(Connection& connection, const std::string& why) {
  if (connection.dialer() && connection.state() != LinkState::ready) {
    // A dial attempt: dial() reads the reason and destroys it.
    connection.why_failed = why;
    connection.set_state(LinkState::failed);
    changed_.notify_all();
    return;
  }
  if (connection.state() == LinkState::ready) return;  // a linked connection fails the device instead
  const sockaddr* peer = rdma_get_peer_addr(connection.cm_id());
  if (rejections_.admit(ip_text(peer)))
    CHORUS_LOG(warn, rank(), "ibverbs: dropped a connection from ", ip_text(peer), " claiming to be rank ",
               connection.peer_rank(), ": ", why);
  else
    CHORUS_LOG(debug, rank(), "ibverbs: dropped a connection from ", ip_text(peer), " claiming to be rank ",
               connection.peer_rank(), ": ", why);
  if (std::optional<std::string> summary = rejections_.summary()) CHORUS_LOG(warn, rank(), "ibverbs: ", *summary);
  rdma_disconnect(connection.cm_id());
  destroy_connection_locked(connection.id());
}

void Engine::expire_handshakes_locked() {
  const auto now = Clock::now();
  std::vector<uint32_t> expired;
  for (const auto& [id, give_up] : unproven_)
    if (now >= give_up) expired.push_back(id);
  for (uint32_t id : expired)
    if (connections_[id]) drop_locked(*connections_[id], "it did not prove the job secret in time");
  // A flushed work request waits this long for the disconnect that explains it.
  if (failure_) return;
  const auto explained_by = now - kFlushExplanationGrace;
  for (const auto& connection : connections_)
    if (connection && connection->flush_unexplained_since(explained_by))
      return fail_locked(std::make_exception_ptr(
          IoError(cat("rank ", rank(), ": the connection to ", connection->peer_label(),
                      " failed: the device flushed its work requests and no disconnect followed within ",
                      std::chrono::duration_cast<std::chrono::milliseconds>(kFlushExplanationGrace).count(), " ms"),
                  connection->peer_rank())));
}

void Engine::handle_cm_events() {
  while (true) {
    rdma_cm_event* raw = nullptr;
    if (rdma_get_cm_event(channel_.get(), &raw) != 0) return;
    CmEvent event;
    event.type = raw->event;
    event.status = raw->status;
    event.id = raw->id;
    event.listen_id = raw->listen_id;
    if (raw->param.conn.private_data && raw->param.conn.private_data_len) {
      const auto* data = static_cast<const std::byte*>(raw->param.conn.private_data);
      event.private_data.assign(data, data + raw->param.conn.private_data_len);
    }
    rdma_ack_cm_event(raw);
    std::lock_guard<std::mutex> lock(mutex_);
    on_cm_event_locked(event);
  }
}

void Engine::on_cm_event_locked(const CmEvent& event) {
  if (event.type == RDMA_CM_EVENT_CONNECT_REQUEST) return on_connect_request_locked(event);
  if (event.type == RDMA_CM_EVENT_DEVICE_REMOVAL)
    return fail_locked(std::make_exception_ptr(IoError(cat("rank ", rank(), ": the RDMA device was removed"))));
  auto found = by_cm_id_.find(event.id);
  if (found == by_cm_id_.end() || !connections_[found->second]) return;
  const uint32_t index = found->second;
  Connection* connection = connections_[index].get();
  // Closed in order, or failed and cleaned up: what follows is the peer's side of it.
  if (connection->state() == LinkState::failed || connection->state() == LinkState::closed) return;
  switch (event.type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(connection->cm_id(), kResolveTimeoutMs) != 0)
        drop_locked(*connection, cat("cannot resolve a route to it: ", errno_text(errno)));
      return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      if (connection->cm_id()->verbs != verbs_)
        return drop_locked(*connection, cat("its address is reached through RDMA device ",
                                            ibv_get_device_name(connection->cm_id()->verbs->device),
                                            ", not this rank's ", ibv_get_device_name(verbs_->device)));
      const std::string error =
          connection->create_queue_pair_locked(pd_.get(), cq_.get(), max_send_wr_, max_message_bytes_);
      if (!error.empty()) return drop_locked(*connection, error);
      ConnectRequest request;
      request.stream = static_cast<uint16_t>(connection->stream());
      request.dialer_rank = static_cast<uint32_t>(rank());
      request.acceptor_rank = static_cast<uint32_t>(connection->peer_rank());
      request.challenge = connection->my_challenge;
      request.acceptor_nonce = connection->acceptor_nonce;
      std::byte data[kConnectRequestBytes];
      encode_request(request, data);
      rdma_conn_param parameters = connection_parameters(data, sizeof(data));
      connection->set_state(LinkState::connecting);
      if (rdma_connect(connection->cm_id(), &parameters) != 0)
        drop_locked(*connection, cat("cannot send the connection request: ", errno_text(errno)));
      return;
    }
    case RDMA_CM_EVENT_ESTABLISHED:
      return on_established_locked(*connection, event);
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_CONNECT_ERROR:
      if (connection->state() == LinkState::ready) break;
      return drop_locked(*connection, cat(event_name(event.type), " (status ", event.status, ")"));
    case RDMA_CM_EVENT_DISCONNECTED:
      break;
    default:
      return;
  }
  // The link is gone. Whatever the peer sent before leaving is in the
  // completion queue already: land it before judging. Landing it can drop
  // the connection (an acceptor's, for a proof that does not verify or a
  // receive flushed before it was proven), so it is looked up again.
  poll_completions_locked(1 << 20);
  connection = connections_[index].get();
  if (!connection) return;
  if (connection->state() != LinkState::ready) {
    drop_locked(*connection, connection->dialer()
                                 ? "it closed the connection before proving itself (does it have another job secret?)"
                                 : "it disconnected before proving the job secret");
    return;
  }
  rdma_disconnect(connection->cm_id());
  if (failure_) {
    // The device failed already (maybe by this very peer's abort message,
    // just landed): the cleanup fails every request with that reason, which
    // says more than "closed its context".
    connection->set_state(LinkState::closed);
    return;
  }
  if (connection->peer_said_goodbye()) {
    connection->set_state(LinkState::closed);
    connection->on_peer_closed_locked();
    changed_.notify_all();
    return;
  }
  fail_locked(std::make_exception_ptr(
      PeerLostError(cat("rank ", rank(), ": lost the connection to ", connection->peer_label(),
                  ": it went away without closing its context (killed, or its host or link failed)"),
              connection->peer_rank())));
}

void Engine::on_connect_request_locked(const CmEvent& event) {
  const sockaddr* from = rdma_get_peer_addr(event.id);
  auto refuse = [&](const std::string& why) {
    if (rejections_.admit(ip_text(from)))
      CHORUS_LOG(warn, rank(), "ibverbs: refused a connection request from ", ip_text(from), ": ", why);
    else
      CHORUS_LOG(debug, rank(), "ibverbs: refused a connection request from ", ip_text(from), ": ", why);
    if (std::optional<std::string> summary = rejections_.summary()) CHORUS_LOG(warn, rank(), "ibverbs: ", *summary);
    rdma_reject(event.id, nullptr, 0);
    rdma_destroy_id(event.id);
  };
  const std::optional<ConnectRequest> request = decode_request(event.private_data);
  if (!request) return refuse("it is not a chorus connection request");
  if (request->version != kWireVersion) return refuse(cat("wire version ", request->version, ", expected ", kWireVersion));
  if (request->acceptor_nonce != published_.nonce || request->acceptor_rank != static_cast<uint32_t>(rank()))
    return refuse("it names another device (a stale or foreign job)");
  if (request->dialer_rank <= static_cast<uint32_t>(rank()) || request->dialer_rank >= static_cast<uint32_t>(options_.size) ||
      request->stream >= options_.streams)
    return refuse(cat("rank ", request->dialer_rank, " stream ", request->stream, " does not dial rank ", rank()));
  if (failure_ || loop_.stopping()) return refuse("this device is closing");
  if (unproven_.size() >= kMaxUnproven) return refuse("too many connections are proving themselves already");
  if (event.id->verbs != verbs_) return refuse("it arrived on another RDMA device");
  Connection* connection = add_connection_locked(event.id, false, static_cast<int>(request->dialer_rank),
                                                 request->stream);
  connection->set_peer_label(cat("peer rank ", request->dialer_rank, " (", ip_text(from), " via ",
                                 ibv_get_device_name(verbs_->device),
                                 options_.streams > 1 ? cat(", stream ", request->stream) : std::string(), ")"));
  connection->peer_challenge = request->challenge;
  connection->my_challenge = fresh_challenge();
  const std::string error = connection->create_queue_pair_locked(pd_.get(), cq_.get(), max_send_wr_, max_message_bytes_);
  if (!error.empty()) {
    CHORUS_LOG(warn, rank(), "ibverbs: cannot accept ", connection->peer_label(), ": ", error);
    rdma_reject(event.id, nullptr, 0);
    destroy_connection_locked(connection->id());
    return;
  }
  ConnectReply reply;
  reply.challenge = connection->my_challenge;
  std::byte data[kConnectReplyBytes];
  encode_reply(reply, data);
  rdma_conn_param parameters = connection_parameters(data, sizeof(data));
  connection->set_state(LinkState::connecting);
  unproven_[connection->id()] = Clock::now() + kHandshakeTimeout;
  if (rdma_accept(event.id, &parameters) != 0) drop_locked(*connection, cat("rdma_accept: ", errno_text(errno)));
}

void Engine::on_established_locked(Connection& connection, const CmEvent& event) {
  if (connection.state() != LinkState::connecting) return;
  connection.set_state(LinkState::proving);
  if (!connection.dialer()) return;  // waits for the dialer's proof
  const std::optional<ConnectReply> reply = decode_reply(event.private_data);
  if (!reply || reply->version != kWireVersion)
    return drop_locked(connection, "its reply is not a chorus connection reply");
  connection.peer_challenge = reply->challenge;
  connection.send_proof_locked(connection.proof(true, options_.secret));
}

}  // namespace chorus::transport::ibverbs
