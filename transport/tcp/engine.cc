// The TCP device: listening, the epoll progress thread, connecting and
// polling; admitting dialers through the handshake is in engine_admit.cc,
// aborting and closing in engine_close.cc.
#include "transport/tcp/engine.h"

#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <array>

#include "base/error.h"
#include "transport/connection_pair.h"
#include "transport/engine_device.h"
#include "transport/epoll_token.h"
#include "transport/knock.h"
#include "transport/nonce.h"
#include "transport/tcp/abort_frame.h"

namespace chorus::transport::tcp {
namespace {

// How long connections stay parked after the last polling caller leaves (end_polling).
constexpr auto kParkLinger = std::chrono::milliseconds(1);
// How often a polling caller also reads the parked connections nobody waits
// on: an abort frame from a peer this rank expects nothing from is heard
// within about this long (docs/latency.md).
constexpr auto kIdleSweepInterval = std::chrono::microseconds(50);


// Same host (loopback, or a peer behind this host's own address, which the
// kernel also routes through lo): alpha is the per-message cost a collective
// step really pays when several ranks share a host's cores, fitted with the
// per-algorithm costs to the interleaved 4-rank allreduce sweep in
// benchmarks/README.md (a lone 2-rank ping-pong is cheaper). The network
// default assumes a 10 Gb/s Ethernet with kernel TCP. CHORUS_LINK_MODEL
// overrides both (applied above the transports, per level).
constexpr LinkModel same_host_link_model{.alpha_seconds = 70e-6, .beta_seconds_per_byte = 1.0 / 2.0e9};
constexpr LinkModel network_link_model{.alpha_seconds = 50e-6, .beta_seconds_per_byte = 1.0 / 1.1e9};

bool on_this_host(const SocketAddress& peer, const SocketAddress& self) {
  if (peer.is_loopback()) return true;
  if (peer.family() != self.family()) return false;
  SocketAddress a = peer, b = self;
  a.set_port(0);
  b.set_port(0);
  return a.to_string() == b.to_string();
}

}  // namespace

Engine::Engine(const TcpDeviceOptions& options)
    : EngineCore(options), options_(options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size)
    throw InvalidArgument(cat("tcp device: rank ", options.rank, " is not within a job of size ", options.size));
  // The hello carries the stream in one byte.
  if (options.streams < 1 || options.streams > 255)
    throw InvalidArgument(cat("tcp device: rank ", options.rank, ": ", options.streams,
                              " streams per peer is not within 1..255"));
  by_link_.reset(new std::atomic<Connection*>[links()]);
  for (size_t index = 0; index < links(); ++index) by_link_[index].store(nullptr);
  peer_on_host_.reset(new std::atomic<bool>[static_cast<size_t>(options.size)]);
  for (int peer = 0; peer < options.size; ++peer) peer_on_host_[static_cast<size_t>(peer)].store(false);
  ChosenAddress chosen = choose_local_address(options.interface, options.hostname, options.placement,
                                              /*loopback_usable=*/true, options.rank);
  listen_address_ = chosen.address;
  link_model_ = options.link_model.value_or(network_link_model);
  same_host_link_model_ = options.link_model.value_or(same_host_link_model);
  listener_ = open_listener(listen_address_, options.rank);
  nonce_ = random_nonce();
  loop_.open(rank(), "tcp", listener_.get(), epoll_token(TokenKind::listener, 0), epoll_token(TokenKind::wake, 0));
  CHORUS_LOG(info, rank(), "tcp: listening on ", listen_address_.to_string(), ": ", chosen.reason);
}

Engine::~Engine() {
  // shutdown() normally ran already (from the Device); this covers a core
  // whose Device never finished construction.
  loop_.stop();
}

void Engine::start() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    thread_running_ = true;
  }
  loop_.start([this] { run(); });
}

std::vector<std::byte> Engine::address() const {
  return encode_address({listen_address_, nonce_, rank(), options_.streams, options_.tls != nullptr});
}


// ---------------------------------------------------------------- connecting

void Engine::check_peer(int peer_rank, std::span<const std::byte> peer_address) const {
  if (peer_rank < 0 || peer_rank >= size() || peer_rank == rank())
    throw InvalidArgument(cat("rank ", rank(), ": cannot connect to peer rank ", peer_rank,
                              " in a job of size ", size()));
  ListenerAddress peer = decode_address(peer_address, rank(), peer_rank);
  // Checked before any socket is touched, so both ends fail at once, each
  // naming both counts, instead of one waiting for a stream the other never dials.
  if (peer.streams != options_.streams)
    throw InvalidArgument(cat("rank ", rank(), " uses ", options_.streams,
                              options_.streams == 1 ? " stream" : " streams", " per peer but peer rank ",
                              peer_rank, " uses ", peer.streams,
                              ": every rank must use the same ConnectOptions::streams / CHORUS_STREAMS"));
  const bool tls = options_.tls != nullptr;
  if (peer.tls != tls)
    throw InvalidArgument(cat("rank ", rank(), tls ? " uses TLS" : " does not use TLS", " but peer rank ", peer_rank,
                              peer.tls ? " does" : " does not",
                              ": set CHORUS_TLS_CERT, CHORUS_TLS_KEY and CHORUS_TLS_CA on every rank or on none"));
  // Known from the address, so the link model is right before the pair
  // connects (on demand, the job agrees on link models before any does).
  peer_on_host_[static_cast<size_t>(peer_rank)].store(on_this_host(peer.socket, listen_address_),
                                                      std::memory_order_relaxed);
}

std::unique_ptr<Pair> Engine::connect(int peer_rank, std::span<const std::byte> peer_address,
                                      Deadline deadline, int stream) {
  check_peer(peer_rank, peer_address);
  if (stream < 0 || stream >= options_.streams)
    throw InvalidArgument(cat("rank ", rank(), ": stream ", stream, " to peer rank ", peer_rank,
                              " does not exist (this device keeps ", options_.streams, " per peer)"));
  ListenerAddress peer = decode_address(peer_address, rank(), peer_rank);
  if (auto error = failure()) std::rethrow_exception(error);
  if (by_link_[link(peer_rank, stream)].load())
    throw InvalidArgument(cat("rank ", rank(), ": already connected to peer rank ", peer_rank,
                              stream > 0 ? cat(" on stream ", stream) : std::string()));

  // The higher rank dials so every pair is built exactly once, and a rank
  // never waits on a peer that is itself waiting.
  AdmittedSocket admitted =
      rank() > peer_rank ? dial_peer(peer, rank(), stream, options_.streams, options_.secret, options_.tls.get(), deadline)
                         : wait_for_dialer(peer, stream, deadline);

  auto connection = std::make_unique<Connection>(*this, peer_rank, stream, peer.socket, std::move(admitted));
  Connection& added = *connection;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_) std::rethrow_exception(failure_);
    // Registered under the mutex so an abort's cleanup sees either none or all of it.
    by_link_[link(peer_rank, stream)].store(&added);
    connections_.push_back(std::move(connection));
    if (!loop_.watch(added.fd(), epoll_token(TokenKind::connection, link(peer_rank, stream))))
      throw IoError(cat("rank ", rank(), ": epoll_ctl for ", added.peer_label(), " failed: ", errno_text(errno)),
                    peer_rank);
  }
  // TLS may have read frames along with the handshake's last message; no
  // readiness event will announce those.
  added.read_buffered_input();
  CHORUS_LOG(debug, rank(), "tcp: connected to ", added.peer_label());
  return std::make_unique<ConnectionPair<Connection>>(shared_from_this(), added);
}

AdmittedSocket Engine::wait_for_dialer(const ListenerAddress& peer, int stream, Deadline deadline) {
  const std::pair<int, int> key{peer.rank, stream};
  std::unique_lock<std::mutex> lock(mutex_);
  // Without a job secret anyone can pass the handshake claiming to be the
  // peer, so its failed TLS only explains a timeout; with one, it was the peer.
  const bool trust_refusals = options_.secret.configured();
  const auto waited = wait_for_dialer_locked(
      lock, deadline, [&] { return admitted_.count(key) || (trust_refusals && tls_refused_.count(key)); });
  auto refused = tls_refused_.find(key);
  const std::string tls_failure =
      refused == tls_refused_.end()
          ? std::string()
          : cat("TLS handshake failed: ", refused->second, " (CHORUS_TLS_CA='", options_.tls->files().authority,
                "': did the same CA issue its certificate?)");
  if (trust_refusals && !tls_failure.empty() && !admitted_.count(key))
    throw IoError(cat("rank ", rank(), ": peer rank ", peer.rank, " (", peer.socket.to_string(),
                      stream > 0 ? cat(", stream ", stream) : std::string(), ") proved the job secret but its ",
                      tls_failure),
                  peer.rank);
  auto found = admitted_.find(key);
  if (found == admitted_.end()) {
    throw TimeoutError(cat("rank ", rank(), ": timed out after ",
                           std::chrono::duration_cast<std::chrono::milliseconds>(waited).count(),
                           " ms waiting for peer rank ",
                           peer.rank, " (", peer.socket.to_string(),
                           stream > 0 ? cat(", stream ", stream) : std::string(),
                           ") to connect to this rank (",
                           tls_failure.empty() ? "has it started and called connect?"
                                               : "a dialer claiming to be it failed: " + tls_failure,
                           ")"));
  }
  AdmittedSocket admitted = std::move(found->second);
  admitted_.erase(found);
  return admitted;
}

// ---------------------------------------------------------------- progress thread

void Engine::run() {
  loop_.run<64>(*this);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    thread_running_ = false;
  }
  run_cleanup_if_needed();
  changed_.notify_all();
}

ProgressLoop::Turn Engine::before_wait() {
  if (failed()) run_cleanup_if_needed();
  return ProgressLoop::Turn::wait;
}

bool Engine::wait_failed(std::exception_ptr error) {
  abort(std::move(error), LogLevel::error);
  return false;
}

void Engine::after_wait() {
  if (!handshakes_.empty()) expire_handshakes();
  // The clock is read only while rejections wait for their summary line.
  if (const auto due = rejections_.summary_due(); due != Clock::time_point::max() && due <= Clock::now())
    log_rejection_summary();
  if (lingering_.load(std::memory_order_acquire)) unpark_if_idle();
}

void Engine::dispatch(uint64_t event_token, uint32_t events) {
  switch (epoll_token_kind<TokenKind>(event_token)) {
    case TokenKind::wake:
      return loop_.drain_wake();
    case TokenKind::listener:
      return accept_all();
    case TokenKind::handshake:
      return on_handshake_readable(epoll_token_value(event_token));
    case TokenKind::connection: {
      const uint64_t index = epoll_token_value(event_token);
      if (index >= links()) return;
      Connection* connection = by_link_[index].load(std::memory_order_acquire);
      if (!connection) return;
      // Errors and hang-ups are reported whatever the interest: read them here.
      const bool only_data = (events & (EPOLLERR | EPOLLHUP)) == 0;
      if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        if (!(only_data && park_if_polled(*connection))) connection->on_readable();
      if (events & EPOLLOUT) connection->on_writable();
      return;
    }
  }
}

int Engine::wait_timeout_ms() const {
  const int linger = lingering_.load(std::memory_order_acquire) ? static_cast<int>(kParkLinger.count()) : -1;
  // Rejections not yet summed up wake the loop when their line is due (base/rejection_log.h).
  auto earliest = rejections_.summary_due();
  if (handshakes_.empty() && earliest == Clock::time_point::max()) return linger;
  for (const auto& [id, incoming] : handshakes_) earliest = std::min(earliest, incoming->give_up_at());
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(earliest - Clock::now()).count();
  const int handshake = static_cast<int>(std::clamp<long long>(left + 1, 0, 60'000));
  return linger < 0 ? handshake : std::min(handshake, linger);
}

void Engine::set_write_interest(Connection& connection, bool writable) {
  std::lock_guard<std::mutex> lock(polling_mutex_);
  connection.epoll_interest().writable = writable;
  update_epoll_locked(connection);
}

void Engine::update_epoll_locked(Connection& connection) {
  const Connection::EpollInterest& interest = connection.epoll_interest();
  loop_.rewatch(connection.fd(), epoll_token(TokenKind::connection, link(connection.peer_rank(), connection.stream())),
                (interest.parked ? 0u : EPOLLIN) | (interest.writable ? EPOLLOUT : 0u));
}

bool Engine::park_if_polled(Connection& connection) {
  std::lock_guard<std::mutex> lock(polling_mutex_);
  if (polling_callers_ == 0) return false;
  park_locked(connection);  // an event queued before begin_polling parked it
  return true;
}

// Parking every connection up front costs two epoll_ctl calls per peer per
// collective; leaving the progress thread to park on the first EPOLLIN
// instead still costs one wake-up per peer per collective, which on 4 ranks
// over 2 cores measured slower (docs/latency.md). That holds for stream 0,
// which carries every message; the other streams carry only large striped
// ones, so they are parked on their first EPOLLIN (park_if_polled): parking
// them up front too doubled small-message latency with 4 streams, as every
// progress() call then read each of them (docs/streams.md).
void Engine::begin_polling() {
  std::lock_guard<std::mutex> lock(polling_mutex_);
  if (polling_callers_++ > 0) return;
  for (int peer = 0; peer < size(); ++peer)
    if (Connection* connection = by_link_[link(peer, 0)].load(std::memory_order_acquire)) park_locked(*connection);
}

void Engine::park_locked(Connection& connection) {
  if (connection.epoll_interest().parked) return;
  connection.epoll_interest().parked = true;
  connection.set_parked(true);
  parked_.push_back(&connection);
  update_epoll_locked(connection);
}

// The last caller leaves the connections parked: the next collective,
// which in a training loop or a benchmark follows within microseconds,
// finds them parked and pays no epoll_ctl (two per peer per collective
// otherwise, a fifth of an 8-byte allreduce over TCP). The progress thread
// takes them back once no caller has polled for kParkLinger, so bytes
// that arrive between collectives (a liveness probe, an abort, a peer's
// eager send) wait at most about that long; a caller that goes to sleep
// takes them back at once (begin_waiting).
void Engine::end_polling() {
  std::lock_guard<std::mutex> lock(polling_mutex_);
  if (--polling_callers_ > 0) return;
  polling_ended_ = Clock::now();
  // Only stream 0 lingers: the others, parked on their first bytes of a
  // striped message, would make every progress() of the next small
  // collectives read them too (docs/streams.md). Unparking those costs
  // system calls only after large messages.
  std::erase_if(parked_, [&](Connection* connection) {
    if (connection->stream() == 0) return false;
    unpark_locked(*connection);
    return true;
  });
  if (parked_.empty() || lingering_.load(std::memory_order_relaxed)) return;
  // The thread may sleep in epoll_wait without a timeout: it must start ticking.
  lingering_.store(true, std::memory_order_release);
  wake();
}

void Engine::begin_waiting() {
  std::lock_guard<std::mutex> lock(polling_mutex_);
  if (polling_callers_ == 0) unpark_all_locked();
}

void Engine::unpark_if_idle() {
  std::lock_guard<std::mutex> lock(polling_mutex_);
  if (polling_callers_ > 0 || Clock::now() - polling_ended_ < kParkLinger) return;
  unpark_all_locked();
}

void Engine::unpark_all_locked() {
  for (Connection* connection : parked_) unpark_locked(*connection);
  parked_.clear();
  lingering_.store(false, std::memory_order_release);
}

void Engine::unpark_locked(Connection& connection) {
  // Level-triggered: bytes that arrived meanwhile wake the progress thread at once.
  connection.epoll_interest().parked = false;
  connection.set_parked(false);
  update_epoll_locked(connection);
}

void Engine::stop_watching(Connection& connection) {
  loop_.unwatch(connection.fd());
}

KnockAnswer Engine::knock(int peer_rank, std::span<const std::byte> peer_address) const {
  const ListenerAddress peer = decode_address(peer_address, rank(), peer_rank);
  return transport::knock(peer.socket.get(), peer.socket.length(), SOCK_STREAM, kKnockWindow);
}

LinkModel Engine::link_model(int peer_rank) const {
  // Ranks that publish this host's network address still talk through lo.
  const bool on_host = peer_rank >= 0 && peer_rank < size() &&
                       peer_on_host_[static_cast<size_t>(peer_rank)].load(std::memory_order_relaxed);
  return on_host ? same_host_link_model_ : link_model_;
}


bool Engine::progress() {
  if (failed()) return false;
  // Relaxed: two callers sweeping at once, or one sweep late by a poll, is harmless.
  const int64_t now = Clock::now().time_since_epoch().count();
  const bool sweep_idle = now - last_idle_sweep_.load(std::memory_order_relaxed) >=
                          std::chrono::duration_cast<Clock::duration>(kIdleSweepInterval).count();
  if (sweep_idle) last_idle_sweep_.store(now, std::memory_order_relaxed);
  // Where several connections could have bytes (recursive doubling posts
  // every round's receive up front), one poll() says which do: an empty
  // poll of the caller's wait loop is then one system call, not a readv per
  // connection (docs/latency.md).
  constexpr size_t kBatch = 16;
  std::array<Connection*, kBatch> wanted;
  std::array<pollfd, kBatch> sockets;
  size_t count = 0;
  bool consumed = false;
  for (size_t index = 0; index < links(); ++index) {
    Connection* connection = by_link_[index].load(std::memory_order_acquire);
    if (!connection || !connection->wants_caller_read(sweep_idle)) continue;
    if (count == kBatch || connection->readiness_hidden()) {
      consumed |= connection->read_from_caller(sweep_idle);
      continue;
    }
    wanted[count] = connection;
    sockets[count] = {connection->socket_number(), POLLIN, 0};
    ++count;
  }
  if (count == 1) return wanted[0]->read_from_caller(sweep_idle) || consumed;
  if (count == 0) return consumed;
  const int ready = ::poll(sockets.data(), count, 0);
  for (size_t i = 0; i < count; ++i)
    if (ready < 0 || sockets[i].revents != 0) consumed |= wanted[i]->read_from_caller(sweep_idle);
  return consumed;
}

// One poll() over the sockets a caller waits on, readable for a pending
// receive or an awaited clear, writable for a queued send (whose completion
// the caller may wait for too; the progress thread does the writing).
bool Engine::await_arrival(std::chrono::microseconds limit) {
  if (failed()) return false;
  constexpr size_t kBatch = 16;
  std::array<pollfd, kBatch> sockets;
  size_t count = 0;
  for (size_t index = 0; index < links(); ++index) {
    Connection* connection = by_link_[index].load(std::memory_order_acquire);
    if (!connection) continue;
    const bool reads = connection->wants_caller_read(false);
    const bool writes = connection->sends_queued();
    if (!reads && !writes) continue;
    if (count == kBatch || connection->readiness_hidden()) return false;
    sockets[count++] = {connection->socket_number(),
                        static_cast<short>((reads ? POLLIN : 0) | (writes ? POLLOUT : 0)), 0};
  }
  if (count == 0) return false;
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(limit);
  const timespec timeout{static_cast<time_t>(seconds.count()),
                         static_cast<long>(std::chrono::nanoseconds(limit - seconds).count())};
  ::ppoll(sockets.data(), count, &timeout, nullptr);
  return true;
}

void Engine::wake() { loop_.wake(); }

}  // namespace chorus::transport::tcp
