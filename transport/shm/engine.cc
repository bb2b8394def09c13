// The shared-memory device: listening, connecting, the progress thread,
// polling (engine.h); admitting dialers is in engine_admit.cc, aborting and
// closing in engine_close.cc.
#include "transport/shm/engine.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>

#include "base/error.h"
#include "transport/abort_report.h"
#include "transport/connection_pair.h"
#include "transport/engine_device.h"
#include "transport/epoll_token.h"
#include "transport/nonce.h"

namespace chorus::transport::shm {
namespace {

// Memory on one host: a message costs a few microseconds of bookkeeping and
// wake-ups; bytes move at memory bandwidth shared by the host's ranks.
// Fitted to the 4-rank loopback sweep in benchmarks/README.md.
constexpr LinkModel shared_memory_link_model{.alpha_seconds = 4e-6, .beta_seconds_per_byte = 1.0 / 4e9};

}  // namespace

Engine::Engine(const ShmDeviceOptions& options) : EngineCore(options), options_(options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size)
    throw InvalidArgument(cat("shm device: rank ", options.rank, " is not within a job of size ", options.size));
  by_peer_.reset(new std::atomic<Connection*>[static_cast<size_t>(options.size)]);
  for (int peer = 0; peer < options.size; ++peer) by_peer_[static_cast<size_t>(peer)].store(nullptr);
  address_ = this_process_address();
  address_.nonce = random_nonce();
  for (size_t i = 0; i < address_.socket_token.size(); i += 8) {
    const uint64_t word = random_nonce();
    for (size_t j = 0; j < 8; ++j) address_.socket_token[i + j] = static_cast<std::byte>(word >> (8 * j));
  }
  address_.ring_bytes = options.ring_bytes;
  link_model_ = options.link_model.value_or(shared_memory_link_model);
  probe_value_ = random_nonce();
  listener_ = listen_on(address_.socket_name(), rank());
  loop_.open(rank(), "shm", listener_.get(), epoll_token(TokenKind::listener, 0), epoll_token(TokenKind::doorbell, 0));
}

Engine::~Engine() {
  loop_.stop();
}

void Engine::start() {
  loop_.start([this] { run(); });
}


std::vector<Connection*> Engine::connections() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Connection*> all;
  for (const auto& connection : connections_) all.push_back(connection.get());
  return all;
}

// ---------------------------------------------------------------- connecting

void Engine::check_peer(int peer_rank, std::span<const std::byte> peer_address) const {
  if (peer_rank < 0 || peer_rank >= options_.size || peer_rank == rank())
    throw InvalidArgument(cat("rank ", rank(), ": cannot connect to peer rank ", peer_rank, " in a job of size ",
                              options_.size));
  const ShmAddress peer = decode_address(peer_address, rank(), peer_rank);
  if (!same_machine(address_, peer))
    throw InvalidArgument(cat("rank ", rank(), ": peer rank ", peer_rank,
                              " cannot share memory with this rank (another kernel, user or network namespace)"));
  if (peer.ring_bytes != options_.ring_bytes)
    throw InvalidArgument(cat("rank ", rank(), " uses shared-memory rings of ", options_.ring_bytes,
                              " bytes but peer rank ", peer_rank, " uses ", peer.ring_bytes,
                              ": every rank must run the same chorus build"));
  std::lock_guard<std::mutex> lock(published_mutex_);
  if (published_pids_.empty()) published_pids_.resize(static_cast<size_t>(options_.size));
  published_pids_[static_cast<size_t>(peer_rank)] = peer.pid;
}

std::optional<uint32_t> Engine::published_pid(int peer_rank) const {
  std::lock_guard<std::mutex> lock(published_mutex_);
  if (published_pids_.empty()) return std::nullopt;
  return published_pids_[static_cast<size_t>(peer_rank)];
}

bool Engine::probe(pid_t pid, uint64_t address, uint64_t value) const {
  if (!options_.single_copy) return false;
  uint64_t read = 0;
  iovec local{&read, sizeof(read)};
  iovec remote{reinterpret_cast<void*>(address), sizeof(read)};
  const ssize_t copied = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (copied != static_cast<ssize_t>(sizeof(read))) {
    CHORUS_LOG(info, rank(), "shm: cannot read pid ", pid, "'s memory (", copied < 0 ? errno_text(errno) : "short read",
               "): large messages to this rank go through the ring");
    return false;
  }
  return read == value;
}

std::unique_ptr<Pair> Engine::connect(int peer_rank, std::span<const std::byte> peer_address, Deadline deadline,
                                      int stream) {
  if (stream != 0)
    throw InvalidArgument(cat("rank ", rank(), ": the shm transport keeps one connection per peer, not stream ",
                              stream));
  check_peer(peer_rank, peer_address);
  const ShmAddress peer = decode_address(peer_address, rank(), peer_rank);
  if (auto error = failure()) std::rethrow_exception(error);
  if (by_peer_[static_cast<size_t>(peer_rank)].load())
    throw InvalidArgument(cat("rank ", rank(), ": already connected to peer rank ", peer_rank));
  auto impostor = [&](const Credentials& found) {
    return IoError(cat("rank ", rank(), ": the process behind peer rank ", peer_rank, "'s shared-memory socket is pid ",
                       found.pid, " (uid ", found.uid, "), but rank ", peer_rank, " published pid ", peer.pid, " (uid ",
                       peer.uid, ")"),
                   peer_rank);
  };

  ConnectionSetup setup;
  setup.peer_rank = peer_rank;
  setup.peer_pid = static_cast<pid_t>(peer.pid);
  setup.pull_threshold = options_.pull_threshold;
  // Never more than half what a receiver buffers before it fails.
  setup.eager_window = eager_window(options_.eager_window_bytes, options_.max_unexpected_bytes);
  if (rank() < peer_rank) {
    // The higher rank dials; this rank's thread already ran the handshake.
    std::unique_lock<std::mutex> lock(mutex_);
    const auto waited = wait_for_dialer_locked(lock, deadline, [&] { return admitted_.count(peer_rank) > 0; });
    auto found = admitted_.find(peer_rank);
    if (found == admitted_.end()) {
      throw TimeoutError(cat("rank ", rank(), ": timed out after ",
                             std::chrono::duration_cast<std::chrono::milliseconds>(waited).count(),
                             " ms waiting for peer rank ", peer_rank,
                             " (pid ", peer.pid, ") to connect over shared memory (has it started and called connect?)"));
    }
    Admitted admitted = std::move(found->second);
    admitted_.erase(found);
    lock.unlock();
    if (admitted.credentials.pid != static_cast<pid_t>(peer.pid) || admitted.credentials.uid != peer.uid)
      throw impostor(admitted.credentials);
    setup.side = std::move(admitted.side);
    setup.peer_doorbell = std::move(admitted.doorbell);
    setup.segment = std::move(admitted.segment);
    setup.listener = true;
    setup.peer_pulls = admitted.dialer_pulls;
    setup.we_pull = admitted.listener_pulls;
    return add_connection(std::move(setup));
  }

  Fd side = dial(peer.socket_name(), rank(), peer_rank, deadline);
  Credentials credentials;
  if (!peer_credentials(side.get(), credentials))
    throw IoError(cat("rank ", rank(), ": cannot read the credentials of peer rank ", peer_rank, "'s socket: ",
                      errno_text(errno)),
                  peer_rank);
  if (credentials.pid != static_cast<pid_t>(peer.pid) || credentials.uid != peer.uid) throw impostor(credentials);
  std::vector<std::byte> message;
  std::vector<Fd> fds;
  auto receive = [&](const char* what, size_t max_fds) {
    if (!wait_readable(side.get(), deadline))
      throw TimeoutError(cat("rank ", rank(), ": timed out waiting for ", what, " of peer rank ", peer_rank,
                             "'s shared-memory listener"));
    const ssize_t received = receive_side(side.get(), message, fds, max_fds);
    if (received <= 0)
      throw IoError(cat("rank ", rank(), ": peer rank ", peer_rank, " refused this rank's shared-memory connection (",
                        received == 0 ? "it closed the socket: a different job secret (CHORUS_SECRET)? see its log"
                                      : errno_text(errno),
                        ")"),
                    peer_rank);
  };
  SideKind kind{};
  Challenge listener_challenge{};
  receive("the challenge", 0);
  std::string why = check_side_message(message, kind);
  if (why.empty() && kind != SideKind::challenge)
    why = cat("message kind ", static_cast<int>(kind), " instead of a challenge");
  if (why.empty()) why = decode_challenge(message, listener_challenge);
  if (!why.empty())
    throw IoError(cat("rank ", rank(), ": peer rank ", peer_rank, " opened the shared-memory handshake with ", why),
                  peer_rank);
  Hello hello;
  hello.listener_nonce = peer.nonce;
  hello.dialer_rank = rank();
  hello.listener_rank = peer_rank;
  hello.probe_address = reinterpret_cast<uint64_t>(&probe_value_);
  hello.probe_value = probe_value_;
  hello.dialer_challenge = fresh_challenge();
  std::vector<std::byte> hello_message = encode_hello(hello);
  sign_side_message(hello_message, options_.secret, kShmHelloPurpose, {listener_challenge});
  const int my_doorbell = loop_.wake_fd();
  if (int error = send_side(side.get(), hello_message, std::span<const int>(&my_doorbell, 1)))
    throw IoError(cat("rank ", rank(), ": cannot send the shared-memory hello to peer rank ", peer_rank, ": ",
                      errno_text(error)),
                  peer_rank);
  receive("the ack", 2);
  Ack ack;
  std::span<const std::byte> body;
  why = check_side_message(message, kind);
  if (why.empty() && kind != SideKind::ack) why = cat("message kind ", static_cast<int>(kind), " instead of an ack");
  if (why.empty())
    why = verify_side_message(message, options_.secret, kShmAckPurpose, {listener_challenge, hello_message}, body);
  if (why.empty()) why = decode_ack(body, ack);
  if (why.empty() && (ack.listener_rank != peer_rank || ack.dialer_rank != rank()))
    why = cat("an ack from rank ", ack.listener_rank, " to rank ", ack.dialer_rank);
  if (why.empty() && ack.ring_bytes != options_.ring_bytes) why = cat("rings of ", ack.ring_bytes, " bytes");
  if (why.empty() && fds.size() != 2) why = cat(fds.size(), " descriptors instead of 2");
  if (!why.empty())
    throw IoError(cat("rank ", rank(), ": peer rank ", peer_rank, " answered the shared-memory hello with ", why),
                  peer_rank);
  try {
    setup.segment = Segment::open(std::move(fds[0]), options_.ring_bytes);
  } catch (const std::runtime_error& error) {
    throw IoError(cat("rank ", rank(), ": the shared-memory segment from peer rank ", peer_rank,
                      " is not usable: ", error.what()),
                  peer_rank);
  }
  setup.peer_doorbell = std::move(fds[1]);
  setup.we_pull = probe(static_cast<pid_t>(peer.pid), ack.probe_address, ack.probe_value);
  setup.peer_pulls = ack.listener_pulls != 0;
  Confirm confirm;
  confirm.dialer_pulls = setup.we_pull ? 1 : 0;
  if (int error = send_side(side.get(), encode_confirm(confirm)))
    throw IoError(cat("rank ", rank(), ": cannot confirm the shared-memory connection to peer rank ", peer_rank, ": ",
                      errno_text(error)),
                  peer_rank);
  if (::fcntl(side.get(), F_SETFL, O_NONBLOCK) != 0)
    throw IoError(cat("rank ", rank(), ": fcntl: ", errno_text(errno)));
  setup.side = std::move(side);
  setup.listener = false;
  return add_connection(std::move(setup));
}

std::unique_ptr<Pair> Engine::add_connection(ConnectionSetup setup) {
  const int peer = setup.peer_rank;
  auto connection = std::make_unique<Connection>(*this, std::move(setup));
  Connection& added = *connection;
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_) std::rethrow_exception(failure_);
  connections_.push_back(std::move(connection));
  by_peer_[static_cast<size_t>(peer)].store(&added, std::memory_order_release);
  if (!loop_.watch(added.side_fd(), epoll_token(TokenKind::side, static_cast<uint64_t>(peer)),
                   EPOLLIN | EPOLLRDHUP))
    throw IoError(cat("rank ", rank(), ": epoll_ctl for ", added.peer_label(), " failed: ", errno_text(errno)), peer);
  CHORUS_LOG(debug, rank(), "shm: connected to ", added.peer_label());
  // The thread asks the new peer for doorbells before it sleeps again.
  wake();
  return std::make_unique<ConnectionPair<Connection>>(shared_from_this(), added);
}

// ---------------------------------------------------------------- the device's thread

void Engine::run() {
  loop_.run<64>(*this);
  run_cleanup_if_needed();
  handshakes_.clear();
}

ProgressLoop::Turn Engine::before_wait() {
  using Turn = ProgressLoop::Turn;
  if (failed()) run_cleanup_if_needed();
  // Whoever polls moves the bytes; otherwise this thread does while a
  // caller waits (asking for doorbells before it sleeps), or once for work
  // a post left.
  if (polling_callers_.load(std::memory_order_acquire) > 0 || failed()) return Turn::wait;
  const bool pending = pending_work_.exchange(false, std::memory_order_acq_rel);
  if (waiting_callers_.load(std::memory_order_acquire) > 0) {
    if (progress_all() || !arm_all()) return Turn::again;
  } else if (pending) {
    // Until nothing moves; a send still queued behind a full ring waits
    // for its peer's doorbell on freed space, which brings this thread back.
    if (progress_all() || !arm_all()) {
      pending_work_.store(true, std::memory_order_release);
      return Turn::again;
    }
  }
  return Turn::wait;
}

bool Engine::wait_failed(std::exception_ptr error) {
  abort(std::move(error), LogLevel::error, false);
  return false;
}

void Engine::after_wait() {
  if (handshakes_.empty()) return;
  answer_awaiting_hellos();
  expire_handshakes();
}

void Engine::dispatch(uint64_t event_token, uint32_t /*events*/) {
  switch (epoll_token_kind<TokenKind>(event_token)) {
    case TokenKind::doorbell:
      return loop_.drain_wake();
    case TokenKind::listener: return accept_all();
    case TokenKind::handshake: return on_handshake_readable(epoll_token_value(event_token));
    case TokenKind::side: {
      const uint64_t peer = epoll_token_value(event_token);
      if (peer >= static_cast<uint64_t>(options_.size)) return;
      Connection* connection = by_peer_[peer].load(std::memory_order_acquire);
      if (connection && connection->on_side_readable()) loop_.unwatch(connection->side_fd());
      return;
    }
  }
}

bool Engine::progress_all() {
  bool moved = false;
  for (int peer = 0; peer < options_.size; ++peer)
    if (Connection* connection = by_peer_[static_cast<size_t>(peer)].load(std::memory_order_acquire))
      moved |= connection->progress();
  return moved;
}

bool Engine::arm_all() {
  bool idle = true;
  for (int peer = 0; peer < options_.size; ++peer)
    if (Connection* connection = by_peer_[static_cast<size_t>(peer)].load(std::memory_order_acquire))
      idle &= connection->arm_doorbells();
  return idle;
}

void Engine::disarm_all() {
  for (int peer = 0; peer < options_.size; ++peer)
    if (Connection* connection = by_peer_[static_cast<size_t>(peer)].load(std::memory_order_acquire))
      connection->disarm_doorbells();
}

bool Engine::progress() {
  if (failed()) return false;
  return progress_all();
}

void Engine::begin_polling() {
  if (polling_callers_.fetch_add(1, std::memory_order_acq_rel) == 0) disarm_all();
}

void Engine::end_polling() {
  // The last poller leaves while others sleep on this device: the thread takes over.
  if (polling_callers_.fetch_sub(1, std::memory_order_acq_rel) == 1 &&
      waiting_callers_.load(std::memory_order_acquire) > 0 && !arm_all())
    wake();
}

void Engine::begin_waiting() {
  waiting_callers_.fetch_add(1, std::memory_order_acq_rel);
  if (polling_callers_.load(std::memory_order_acquire) > 0) return;
  // The thread takes over. If work is already waiting (records, pulls,
  // queued sends), it must start now; else a peer's doorbell starts it.
  if (!arm_all()) wake();
}

void Engine::end_waiting() {
  if (waiting_callers_.fetch_sub(1, std::memory_order_acq_rel) == 1 &&
      polling_callers_.load(std::memory_order_acquire) == 0)
    disarm_all();
}

void Engine::wake() { loop_.wake(); }

KnockAnswer Engine::knock(int peer_rank, std::span<const std::byte> peer_address) const {
  return knock_listener(decode_address(peer_address, rank(), peer_rank).socket_name(), kKnockWindow);
}

bool can_connect(std::span<const std::byte> a, std::span<const std::byte> b) {
  try {
    return same_machine(decode_address(a, -1, -1), decode_address(b, -1, -1));
  } catch (const InvalidArgument&) {
    return false;  // check_peer reports what is wrong with it
  }
}

}  // namespace chorus::transport::shm
