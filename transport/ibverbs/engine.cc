// The verbs device core (engine.h).
#include "transport/ibverbs/engine.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "transport/abort_report.h"
#include "transport/nonce.h"
#include "transport/receive_matching.h"

namespace chorus::transport::ibverbs {
namespace {

// How long an abort waits for its abort messages to leave, and for the
// queue pairs to flush once in the error state.
constexpr auto kAbortMessageBudget = std::chrono::milliseconds(250);
constexpr auto kFlushBudget = std::chrono::seconds(1);
constexpr auto kGoodbyeBudget = std::chrono::seconds(1);

enum Token : uint64_t { wake_token = 1, cm_token = 2, completion_token = 3, async_token = 4 };

// Until connections measure their links (the scale issue): a 100 Gb/s fabric.
constexpr LinkModel fabric_link_model{.alpha_seconds = 5e-6, .beta_seconds_per_byte = 1.0 / 10e9};

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

Engine::Engine(const IbverbsDeviceOptions& options) : EngineCore(options), options_(options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size)
    throw InvalidArgument(cat("ibverbs device: rank ", options.rank, " is not within a job of size ", options.size));
  if (options.streams < 1 || options.streams > 255)
    throw InvalidArgument(cat("ibverbs device: rank ", options.rank, ": ", options.streams,
                              " streams per peer is not within 1..255"));
  link_model_ = options.link_model.value_or(fabric_link_model);
  // Without the rdma_cm device there is no RDMA here: an empty address.
  if (::access("/dev/infiniband/rdma_cm", R_OK | W_OK) != 0) return;
  listen_address_ = choose_listen_address(options.ib_device, options.interface, options.hostname, options.placement,
                                          options.rank);
  channel_.reset(rdma_create_event_channel());
  if (!channel_) return;
  if (rdma_create_id(channel_.get(), &listener_, nullptr, RDMA_PS_TCP) != 0) return;
  if (rdma_bind_addr(listener_, reinterpret_cast<sockaddr*>(&listen_address_)) != 0 || !listener_->verbs) {
    // The address is not on an RDMA device (an Ethernet NIC without RoCE, loopback).
    CHORUS_LOG(debug, rank(), "ibverbs: no RDMA device serves ",
               ip_text(reinterpret_cast<sockaddr*>(&listen_address_)), ": not offered");
    rdma_destroy_id(listener_);
    listener_ = nullptr;
    return;
  }
  verbs_ = listener_->verbs;
  if (rdma_listen(listener_, 1024) != 0)
    throw IoError(cat("rank ", rank(), ": cannot listen for RDMA connections: ", errno_text(errno)));

  ibv_device_attr device{};
  ibv_port_attr port{};
  if (ibv_query_device(verbs_, &device) != 0 || ibv_query_port(verbs_, listener_->port_num, &port) != 0)
    throw IoError(cat("rank ", rank(), ": cannot query RDMA device ", ibv_get_device_name(verbs_->device), ": ",
                      errno_text(errno)));
  max_message_bytes_ = std::max<size_t>(port.max_msg_sz, 4096);
  max_send_wr_ = std::min<uint32_t>(kSendDepth, static_cast<uint32_t>(device.max_qp_wr));
  max_read_atoms_ = static_cast<uint8_t>(std::min(device.max_qp_rd_atom, 16));
  pd_.reset(ibv_alloc_pd(verbs_));
  completion_channel_.reset(ibv_create_comp_channel(verbs_));
  // Room for every connection's receives and sends, and the strangers'.
  const size_t wanted = (static_cast<size_t>(options.size - 1) * static_cast<size_t>(options.streams) + kMaxUnproven) *
                        (kSlots + max_send_wr_);
  const int entries = static_cast<int>(std::min<size_t>(wanted, static_cast<size_t>(device.max_cqe)));
  if (pd_ && completion_channel_) cq_.reset(ibv_create_cq(verbs_, entries, nullptr, completion_channel_.get(), 0));
  if (!pd_ || !completion_channel_ || !cq_)
    throw IoError(cat("rank ", rank(), ": cannot set up RDMA device ", ibv_get_device_name(verbs_->device), ": ",
                      errno_text(errno)));
  registrar_ = std::make_unique<Registrar>(pd_.get(), supports_on_demand_paging(verbs_), rank());
  cache_ = std::make_unique<RegistrationCache>(*registrar_, 1024);

  published_.ip = *reinterpret_cast<const sockaddr_storage*>(rdma_get_local_addr(listener_));
  published_.nonce = random_nonce();
  published_.rank = rank();
  published_.streams = options.streams;
  published_.device = ibv_get_device_name(verbs_->device);

  loop_.open(rank(), "ibverbs", wake_token);
  set_nonblocking(channel_->fd);
  set_nonblocking(completion_channel_->fd);
  set_nonblocking(verbs_->async_fd);
  if (!loop_.watch(channel_->fd, cm_token) || !loop_.watch(completion_channel_->fd, completion_token) ||
      !loop_.watch(verbs_->async_fd, async_token))
    throw IoError(cat("rank ", rank(), ": cannot watch the RDMA device: ", errno_text(errno)));
  CHORUS_LOG(debug, rank(), "ibverbs: listening on ", published_.to_string(), ", max message ", max_message_bytes_,
             " bytes, path MTU ", 128 << port.active_mtu, " bytes, on-demand paging ",
             registrar_->on_demand() ? "yes" : "no");
  // Last, once nothing here can throw: a destructor that never runs could not remove it.
  if (!registrar_->on_demand()) {
    long_lived_memory::add_listener(this);
    listens_for_retirement_ = true;
  }
}

Engine::~Engine() {
  if (listens_for_retirement_) long_lived_memory::remove_listener(this);
  shutdown();
  std::lock_guard<std::mutex> lock(mutex_);
  connections_.clear();  // queue pairs and ids first, then what they use
  cache_.reset();
  cq_.reset();
  completion_channel_.reset();
  pd_.reset();
  if (listener_) rdma_destroy_id(listener_);
  channel_.reset();
}

void Engine::start() {
  if (!available()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  thread_running_ = true;
  loop_.start([this] { loop_.run<8>(*this); });
}

std::vector<std::byte> Engine::address() const {
  if (!available()) return {};
  return encode_address(published_);
}

void Engine::check_peer(int peer_rank, std::span<const std::byte> peer_address) const {
  if (peer_rank < 0 || peer_rank >= options_.size || peer_rank == rank())
    throw InvalidArgument(cat("rank ", rank(), ": cannot connect to peer rank ", peer_rank, " in a job of size ",
                              options_.size));
  const VerbsAddress peer = decode_address(peer_address, rank(), peer_rank);
  if (peer.streams != options_.streams)
    throw InvalidArgument(cat("rank ", rank(), " uses ", options_.streams,
                              options_.streams == 1 ? " stream" : " streams", " per peer but peer rank ", peer_rank,
                              " uses ", peer.streams,
                              ": every rank must use the same ConnectOptions::streams / CHORUS_STREAMS"));
  if (!available())
    throw InvalidArgument(cat("rank ", rank(), ": has no RDMA device, so the ibverbs transport cannot reach peer rank ",
                              peer_rank));
}


void Engine::wake() { loop_.wake(); }

// ---------------------------------------------------------------- the progress thread

ProgressLoop::Turn Engine::before_wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  // An abort's messages go out even when the device is closed right after it.
  if (cleanup_pending_) cleanup(lock);
  if (loop_.stopping()) return ProgressLoop::Turn::stop;
  // While callers poll, completions are theirs; this thread keeps to
  // connection events (end_polling wakes it).
  if (polling_callers_.load(std::memory_order_acquire) == 0) {
    if (poll_completions_locked(64) > 0) return ProgressLoop::Turn::again;
    ibv_req_notify_cq(cq_.get(), 0);
    // Whatever completed between the last poll and arming.
    if (poll_completions_locked(64) > 0) return ProgressLoop::Turn::again;
  }
  expire_handshakes_locked();
  return ProgressLoop::Turn::wait;
}

void Engine::dispatch(uint64_t token, uint32_t /*events*/) {
  switch (token) {
    case wake_token: return loop_.drain_wake();
    case cm_token: return handle_cm_events();
    case completion_token: return drain_completion_channel();
    case async_token: return handle_async_events();
  }
}

void Engine::drain_completion_channel() {
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  unsigned events = 0;
  while (ibv_get_cq_event(completion_channel_.get(), &cq, &context) == 0) ++events;
  if (events) ibv_ack_cq_events(cq_.get(), events);
}

size_t Engine::poll_completions_locked(int budget) {
  ibv_wc completions[16];
  size_t handled = 0;
  while (budget > 0) {
    const int got = ibv_poll_cq(cq_.get(), std::min(budget, 16), completions);
    if (got <= 0) break;
    for (int i = 0; i < got; ++i) handle_completion_locked(completions[i]);
    handled += static_cast<size_t>(got);
    budget -= got;
  }
  return handled;
}

void Engine::handle_completion_locked(const ibv_wc& completion) {
  const uint32_t index = work_connection(completion.wr_id);
  if (index >= connections_.size() || !connections_[index]) return;  // a connection already dropped
  Connection& connection = *connections_[index];
  const bool keep = connection.on_completion_locked(
      completion, [&](std::span<const std::byte> proof) { return on_proof_locked(connection, proof); });
  if (!keep) drop_locked(connection, "it sent something other than a valid proof of the job secret");
}

void Engine::handle_async_events() {
  ibv_async_event event{};
  while (ibv_get_async_event(verbs_, &event) == 0) {
    const ibv_event_type type = event.event_type;
    std::string what;
    int peer = -1;
    std::optional<uint32_t> connection_id;
    switch (type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_PATH_MIG_ERR: {
        // Looked up after the event is acknowledged: destroying a queue pair
        // waits for that, and whoever destroys one holds the mutex.
        connection_id = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(event.element.qp->qp_context));
        what = "the connection";
        break;
      }
      case IBV_EVENT_CQ_ERR:
        what = "the completion queue (overrun)";
        break;
      case IBV_EVENT_PORT_ERR:
      case IBV_EVENT_DEVICE_FATAL:
        what = cat("RDMA device ", ibv_get_device_name(verbs_->device));
        break;
      default:
        break;
    }
    ibv_ack_async_event(&event);
    if (what.empty()) continue;
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_) continue;
    if (connection_id) {
      const Connection* connection = *connection_id < connections_.size() ? connections_[*connection_id].get() : nullptr;
      if (!connection || connection->state() != LinkState::ready) continue;  // an attempt, dropped already
      peer = connection->peer_rank();
      what = cat("the connection to ", connection->peer_label());
    }
    fail_locked(std::make_exception_ptr(
        IoError(cat("rank ", rank(), ": ", what, " failed: ", ibv_event_type_str(type)), peer)));
  }
}

// ---------------------------------------------------------------- posting

void Engine::post_send(Connection& connection, Request& request, Tag tag, std::span<const std::byte> data) {
  request.mark_pending();
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_) return request.fail(failure_);
  try {
    connection.post_send_locked(request, tag, data);
  } catch (...) {
    request.fail(std::current_exception());
  }
}

bool Engine::post_recv(Connection& connection, Request& request, Tag tag, std::span<std::byte> data,
                       bool only_if_arrived) {
  mark_pending_unless_only_if_arrived(request, only_if_arrived);
  std::lock_guard<std::mutex> lock(mutex_);
  return connection.post_recv_locked(request, tag, data, only_if_arrived, failure_);
}

std::optional<Tag> Engine::find_unclaimed(const Connection& connection, uint64_t group, size_t oldest, const UnclaimedFilter& wanted) {
  std::lock_guard<std::mutex> lock(mutex_);
  return connection.find_unclaimed_locked(group, oldest, wanted);
}

void Engine::post_one_sided(Connection& connection, Request& request, bool put, std::byte* local, size_t bytes,
                            RemoteMemory remote) {
  request.mark_pending();
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_) return request.fail(failure_);
  try {
    connection.post_one_sided_locked(request, put, local, bytes, remote);
  } catch (...) {
    request.fail(std::current_exception());
  }
}

void Engine::send_probe(Connection& connection, uint64_t probe, uint64_t group) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failure_) connection.send_probe_locked(probe, group);
}

void Engine::begin_polling() { polling_callers_.fetch_add(1, std::memory_order_acq_rel); }

void Engine::end_polling() {
  if (polling_callers_.fetch_sub(1, std::memory_order_acq_rel) == 1) wake();
}

bool Engine::progress() {
  if (!available()) return false;
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || cleanup_done_) return false;
  return poll_completions_locked(64) > 0;
}

// ---------------------------------------------------------------- failure and closing

void Engine::fail_locked(std::exception_ptr reason) {
  if (!record_failure_locked(std::move(reason))) return;
  cleanup_pending_ = true;
  callback_due_ = true;
  wake();
}

void Engine::abort(std::exception_ptr reason, bool wait) {
  std::unique_lock<std::mutex> lock(mutex_);
  fail_locked(abort_reason(rank(), std::move(reason)));
  if (!thread_running_ || loop_.on_thread()) {
    if (cleanup_pending_) cleanup(lock);
    return;
  }
  if (wait) changed_.wait(lock, [&] { return cleanup_done_; });
}

void Engine::cleanup(std::unique_lock<std::mutex>& lock) {
  cleanup_pending_ = false;
  const std::exception_ptr reason = failure_;
  log_abort(rank(), "ibverbs", reason, LogLevel::info);
  if (callback_due_) {
    callback_due_ = false;
    lock.unlock();
    run_failure_callback(reason);
    lock.lock();
  }
  // Tell every peer why, then let the abort messages leave.
  const AbortReport report = report_abort(reason);
  const auto* text = reinterpret_cast<const std::byte*>(report.text.data());
  for (auto& connection : connections_)
    if (connection && connection->state() == LinkState::ready && !connection->peer_said_goodbye())
      connection->queue_abort_locked({text, report.text.size()}, report.error_class, report.blamed_rank);
  auto all = [&](auto predicate) {
    return std::all_of(connections_.begin(), connections_.end(),
                       [&](const std::unique_ptr<Connection>& c) { return !c || predicate(*c); });
  };
  auto drive = [&](auto done, Clock::duration budget) {
    const auto give_up = Clock::now() + budget;
    while (!done() && Clock::now() < give_up) {
      if (poll_completions_locked(64) == 0) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        lock.lock();
      }
    }
  };
  drive([&] { return all([](const Connection& c) { return c.sends_drained_locked(); }); }, kAbortMessageBudget);
  // In the error state a queue pair takes no byte more; once every posted
  // request has flushed, nothing the peer sends can land in a user buffer.
  for (auto& connection : connections_)
    if (connection) connection->enter_error_state_locked();
  drive([&] { return all([](const Connection& c) { return c.flushed_locked(); }); }, kFlushBudget);
  for (auto& connection : connections_) {
    if (!connection) continue;
    connection->fail_requests_locked(reason);
    if (connection->state() == LinkState::ready) rdma_disconnect(connection->cm_id());
    connection->set_state(LinkState::failed);
  }
  admitted_.clear();
  unproven_.clear();
  cleanup_done_ = true;
  changed_.notify_all();
}

void Engine::shutdown() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (shut_down_) return;
  shut_down_ = true;
  if (!failure_ && thread_running_) {
    size_t pending = 0;
    for (auto& connection : connections_)
      if (connection && connection->state() == LinkState::ready) pending += connection->pending_requests_locked();
    if (pending > 0) {
      lock.unlock();
      abort(std::make_exception_ptr(IoError(cat("rank ", rank(), ": closed its context while ", pending,
                                                 " requests were pending"))),
            true);
      lock.lock();
    } else {
      for (auto& connection : connections_)
        if (connection && connection->state() == LinkState::ready) connection->queue_goodbye_locked();
      const auto give_up = Clock::now() + kGoodbyeBudget;
      while (Clock::now() < give_up &&
             !std::all_of(connections_.begin(), connections_.end(), [](const std::unique_ptr<Connection>& c) {
               return !c || c->state() != LinkState::ready || c->sends_drained_locked();
             }))
        changed_.wait_for(lock, std::chrono::milliseconds(1));
    }
  }
  // An abort still on its way (abort_async) finishes first: its peers hear why.
  if (cleanup_pending_ && !thread_running_) cleanup(lock);
  changed_.wait_for(lock, kAbortMessageBudget + kFlushBudget, [&] { return !cleanup_pending_; });
  lock.unlock();
  loop_.stop();
  lock.lock();
  thread_running_ = false;
  if (!failure_)
    record_failure_locked(destroyed_error(rank()));
  for (auto& connection : connections_) {
    if (!connection) continue;
    if (connection->state() == LinkState::ready) rdma_disconnect(connection->cm_id());
    connection->enter_error_state_locked();
    connection->fail_requests_locked(failure_);
    connection->set_state(LinkState::closed);
  }
  cleanup_done_ = true;
  changed_.notify_all();
}

}  // namespace chorus::transport::ibverbs
