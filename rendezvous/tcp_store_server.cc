// TcpStoreServer: one thread, one poll() loop, non-blocking sockets. get and
// wait requests whose keys are missing are parked here and answered the moment
// the last key is set, so clients never poll. Each parked request waits on one
// missing key at a time, so waking costs O(keys) per request in total.
// A connection that breaks the protocol is dropped; everyone else is served on.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>

#include "base/error.h"
#include "base/log.h"
#include "base/rejection_log.h"
#include "base/socket_owner.h"
#include "rendezvous/store.h"
#include "rendezvous/store_common.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_store_protocol.h"
#include "rendezvous/tcp_store_socket.h"

namespace chorus {

using tcp_store::Op;
using tcp_store::Status;
using tcp_store::UniqueFd;

namespace {

constexpr size_t kReadChunkBytes = size_t{256} << 10;
// A client that has not proven the job secret by then is dropped.
constexpr auto kAuthTimeout = std::chrono::seconds(10);
// Bytes read from one connection per poll round, so one fast sender cannot starve the rest.
constexpr size_t kReadBudgetBytes = size_t{4} << 20;

}  // namespace

struct TcpStoreServer::Impl {
  // Nested, not in an anonymous namespace: g++ warns (-Wsubobject-linkage)
  // when this class, declared in a header, holds fields of internal-linkage
  // types from a file that is not the main one, as in a unity build.
  struct Parked {
    Op op;
    std::vector<std::string> keys;
    std::string waiting_on;  // the missing key this request is registered under
    uint64_t generation;     // tells a live registration from a stale one
  };

  struct Connection {
    UniqueFd fd;
    // With TLS: made once the client proved the secret; until its handshake
    // is done (tls_handshaking) nothing is read as a request.
    std::unique_ptr<TlsSession> tls;
    bool tls_handshaking = false;
    bool tls_wants_write = false;
    std::string peer;
    std::string peer_host;  // the address without the port: a source for the rejection log
    bool authenticated = false;
    Challenge challenge{};
    Clock::time_point give_up_at{};
    std::vector<std::byte> in;
    std::vector<std::byte> out;
    size_t out_sent = 0;
    std::optional<Parked> parked;
    bool dead = false;

    bool has_pending_output() const {
      return out_sent < out.size() || (tls && !tls_handshaking && tls->unsent_output());
    }
    // Whether the client has not yet proven the secret or finished TLS.
    bool admitting() const { return !authenticated || tls_handshaking; }
  };

  struct WaiterRef {
    uint64_t connection;
    uint64_t generation;
  };

  UniqueFd listener;
  UniqueFd wake_read;
  UniqueFd wake_write;
  uint16_t port = 0;
  std::string where;
  JobSecret secret;
  std::shared_ptr<const TlsContext> tls;
  size_t max_stored_bytes = 0;
  size_t stored_bytes = 0;  // keys and values held
  std::thread thread;

  // Everything below is touched by the serving thread only.
  std::unordered_map<std::string, std::vector<std::byte>> values;
  std::unordered_map<std::string, std::vector<WaiterRef>> waiters;
  std::map<uint64_t, Connection> connections;
  std::vector<uint64_t> ready;  // connections whose buffered input can be processed again
  std::vector<std::byte> scratch;
  std::vector<pollfd> polled;
  std::vector<uint64_t> polled_ids;
  uint64_t next_connection = 1;
  uint64_t next_generation = 1;
  Clock::time_point accept_paused_until{};
  // Clients refused (bad bytes, no proof): a line per address per 10 s, the
  // rest summed up (base/rejection_log.h).
  RejectionLog rejections;

  void serve();
  bool serve_once();  // one poll round; false when asked to stop
  int poll_timeout_ms(bool accepting);
  void expire_unauthenticated();
  // Checks a client's proof; false when the connection was dropped or its proof is incomplete.
  bool authenticate(uint64_t id, Connection& c);
  // Stores `value` under `key` if the limit allows; else the error text.
  std::string store_value(const std::string& key, std::vector<std::byte> value);
  void accept_all();
  void read_from(uint64_t id, Connection& c);
  void continue_tls(uint64_t id, Connection& c);
  void process_input(uint64_t id, Connection& c);
  void handle(uint64_t id, Connection& c, tcp_store::Request& request);
  void reply(uint64_t id, Connection& c, Status status, const std::vector<std::span<const std::byte>>& items);
  void answer_present(uint64_t id, Connection& c, Op op, const std::vector<std::string>& keys);
  void flush(uint64_t id, Connection& c);
  void drop(uint64_t id, Connection& c, const std::string& reason, bool unexpected);
  void unregister(uint64_t id, Connection& c);
  void wake(const std::string& key);
  const std::string* first_missing(const std::vector<std::string>& keys) const;
};

namespace {
TcpStoreServerOptions unauthenticated(const std::string& host, uint16_t port) {
  TcpStoreServerOptions options;
  options.host = host;
  options.port = port;
  return options;
}
}  // namespace

TcpStoreServer::TcpStoreServer(const std::string& host, uint16_t port)
    : TcpStoreServer(unauthenticated(host, port)) {}

TcpStoreServer::TcpStoreServer(const TcpStoreServerOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->listener = tcp_store::listen_on(options.host, options.port);
  impl_->port = tcp_store::local_port(impl_->listener.get());
  impl_->where = tcp_store::host_port(options.host, impl_->port);
  impl_->secret = options.secret;
  impl_->tls = options.tls;
  impl_->max_stored_bytes = options.max_stored_bytes;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC) != 0) {
    throw IoError(cat("TcpStoreServer ", impl_->where, ": cannot create its wake-up pipe: ",
                      tcp_store::errno_text(errno)));
  }
  impl_->wake_read = UniqueFd(pipe_fds[0]);
  impl_->wake_write = UniqueFd(pipe_fds[1]);
  impl_->thread = std::thread([impl = impl_.get()] { impl->serve(); });
  CHORUS_LOG(debug, -1, "TcpStoreServer listening on ", impl_->where);
}

TcpStoreServer::~TcpStoreServer() {
  char byte = 1;
  while (::write(impl_->wake_write.get(), &byte, 1) < 0 && errno == EINTR) {
  }
  impl_->thread.join();
}

uint16_t TcpStoreServer::port() const { return impl_->port; }

void TcpStoreServer::Impl::serve() {
  while (true) {
    try {
      if (!serve_once()) return;
    } catch (const std::exception& error) {
      // Nothing may kill the serving thread: every rank of the job depends on it.
      CHORUS_LOG(error, -1, "TcpStoreServer ", where, ": ", error.what());
    }
  }
}

bool TcpStoreServer::Impl::serve_once() {
  polled.clear();
  polled_ids.clear();
  bool accepting = Clock::now() >= accept_paused_until;
  polled.push_back({wake_read.get(), POLLIN, 0});
  polled.push_back({listener.get(), static_cast<short>(accepting ? POLLIN : 0), 0});
  for (auto& [id, c] : connections) {
    const bool wants_write = c.has_pending_output() || (c.tls_handshaking && c.tls_wants_write);
    polled.push_back({c.fd.get(), static_cast<short>(wants_write ? POLLOUT : POLLIN), 0});
    polled_ids.push_back(id);
  }
  int count = ::poll(polled.data(), polled.size(), poll_timeout_ms(accepting));
  if (count < 0) {
    if (errno != EINTR) CHORUS_LOG(error, -1, "TcpStoreServer ", where, ": poll: ", tcp_store::errno_text(errno));
    return true;
  }
  if (polled[0].revents != 0) return false;  // the destructor asks us to stop
  if (polled[1].revents & POLLIN) accept_all();
  for (size_t i = 0; i < polled_ids.size(); ++i) {
    short events = polled[i + 2].revents;
    if (events == 0) continue;
    uint64_t id = polled_ids[i];
    auto found = connections.find(id);
    if (found == connections.end() || found->second.dead) continue;
    Connection& c = found->second;
    if (c.has_pending_output()) {
      flush(id, c);
    } else if (c.tls_handshaking) {
      continue_tls(id, c);
    } else {
      read_from(id, c);
    }
  }
  while (!ready.empty()) {
    uint64_t id = ready.back();
    ready.pop_back();
    auto found = connections.find(id);
    if (found != connections.end() && !found->second.dead) process_input(id, found->second);
  }
  expire_unauthenticated();
  if (std::optional<std::string> summary = rejections.summary())
    CHORUS_LOG(warn, -1, "TcpStoreServer ", where, ": ", *summary);
  std::erase_if(connections, [](const auto& entry) { return entry.second.dead; });
  return true;
}

int TcpStoreServer::Impl::poll_timeout_ms(bool accepting) {
  auto earliest = std::min(accepting ? Clock::time_point::max() : accept_paused_until, rejections.summary_due());
  for (const auto& [id, c] : connections)
    if (c.admitting()) earliest = std::min(earliest, c.give_up_at);
  if (earliest == Clock::time_point::max()) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(earliest - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left + 1, 0, 60'000));
}

void TcpStoreServer::Impl::expire_unauthenticated() {
  const auto now = Clock::now();
  for (auto& [id, c] : connections)
    if (!c.dead && c.admitting() && c.give_up_at <= now)
      drop(id, c,
           cat("refused: no proof of the job secret", tls ? " and TLS handshake" : "", " within ",
               kAuthTimeout.count(), " s"),
           true);
}

bool TcpStoreServer::Impl::authenticate(uint64_t id, Connection& c) {
  // Anything else (a port scanner, an HTTP probe) is turned away at its first four bytes.
  if (c.in.size() >= 4 && tcp_store::get_u32(c.in.data()) != tcp_store::kAuthMagic) {
    drop(id, c, "refused: not a chorus store client (it did not answer the authentication challenge)", true);
    return false;
  }
  if (c.in.size() < tcp_store::kClientProofBytes) return false;
  const auto proof = std::span<const std::byte>(c.in).first(tcp_store::kClientProofBytes);
  if (std::string why = tcp_store::check_client_proof(proof, c.challenge, secret); !why.empty()) {
    drop(id, c, "refused: " + why, true);
    return false;
  }
  // Without a secret the proof shows only that the client speaks chorus;
  // the kernel's word on its user is the job's proof (base/socket_owner.h).
  // Asked now, not at accept: the client is waiting for our answer, so its
  // socket is open, and a knock or a scan that closes at once costs nothing.
  if (!secret.configured()) {
    if (std::string why = same_user_refusal(c.fd.get(), "the client"); !why.empty()) {
      drop(id, c, "refused: " + why, true);
      return false;
    }
  }
  c.authenticated = true;
  const std::vector<std::byte> answer = tcp_store::encode_server_proof(c.challenge, proof, secret);
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(tcp_store::kClientProofBytes));
  c.out.insert(c.out.end(), answer.begin(), answer.end());
  CHORUS_LOG(trace, -1, "TcpStoreServer ", where, ": ", c.peer, " proved the job secret");
  flush(id, c);
  if (c.dead || !tls) return !c.dead;
  // The client waits for our answer before it starts TLS: anything it sent
  // meanwhile is not a TLS client's.
  if (!c.in.empty()) {
    drop(id, c, "refused: it sent requests in the clear to a store that uses TLS", true);
    return false;
  }
  c.tls = tls->open(c.fd.get(), TlsRole::server);
  c.tls_handshaking = true;
  return false;  // no request before the handshake is done
}

std::string TcpStoreServer::Impl::store_value(const std::string& key, std::vector<std::byte> value) {
  auto found = values.find(key);
  const size_t old_bytes = found == values.end() ? 0 : key.size() + found->second.size();
  const size_t new_bytes = key.size() + value.size();
  if (stored_bytes - old_bytes + new_bytes > max_stored_bytes)
    return cat("the store is full: it holds ", stored_bytes, " bytes of keys and values and may hold at most ",
               max_stored_bytes, " (TcpStoreServerOptions::max_stored_bytes); key '", key, "' with ", value.size(),
               " bytes does not fit");
  stored_bytes = stored_bytes - old_bytes + new_bytes;
  if (found == values.end()) values.emplace(key, std::move(value));
  else found->second = std::move(value);
  return "";
}

void TcpStoreServer::Impl::accept_all() {
  while (true) {
    int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // Out of descriptors (or memory): stop accepting for a moment instead of spinning.
      CHORUS_LOG(warn, -1, "TcpStoreServer ", where, ": accept: ", tcp_store::errno_text(errno));
      accept_paused_until = Clock::now() + std::chrono::milliseconds(100);
      return;
    }
    tcp_store::make_nonblocking_nodelay(fd);
    Connection c;
    c.fd = UniqueFd(fd);
    c.peer = tcp_store::peer_name(fd);
    c.peer_host = c.peer.substr(0, c.peer.rfind(':'));
    c.challenge = fresh_challenge();
    c.give_up_at = Clock::now() + kAuthTimeout;
    c.out = tcp_store::encode_server_challenge(c.challenge, tls != nullptr);
    CHORUS_LOG(trace, -1, "TcpStoreServer ", where, ": connection from ", c.peer);
    const uint64_t id = next_connection++;
    flush(id, connections.emplace(id, std::move(c)).first->second);
  }
}

void TcpStoreServer::Impl::continue_tls(uint64_t id, Connection& c) {
  switch (c.tls->handshake()) {
    case TlsSession::Step::done:
      c.tls_handshaking = false;
      if (!c.tls->send_confirmation()) return drop(id, c, "cannot confirm the TLS handshake", false);
      CHORUS_LOG(trace, -1, "TcpStoreServer ", where, ": TLS with ", c.peer, " is up");
      return;
    case TlsSession::Step::failed:
      return drop(id, c, "refused: " + c.tls->error(), true);
    case TlsSession::Step::want_read:
      c.tls_wants_write = false;
      return;
    case TlsSession::Step::want_write:
      c.tls_wants_write = true;
      return;
  }
}

void TcpStoreServer::Impl::read_from(uint64_t id, Connection& c) {
  // Reads land in one shared scratch buffer and only the bytes received are
  // kept per connection: thousands of idle ranks must not cost a chunk each.
  scratch.resize(kReadChunkBytes);
  size_t budget = kReadBudgetBytes;
  // Bytes TLS already decrypted are announced by no readiness: take them all.
  while (budget > 0 || (c.tls && c.tls->buffered_input())) {
    ssize_t n = c.tls ? c.tls->read(scratch.data(), scratch.size()) : ::recv(c.fd.get(), scratch.data(), scratch.size(), 0);
    if (n > 0) {
      try {
        c.in.insert(c.in.end(), scratch.begin(), scratch.begin() + n);
      } catch (const std::bad_alloc&) {
        drop(id, c, "out of memory buffering its request", true);
        return;
      }
      budget -= std::min(budget, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      // What arrived before the close is judged first: a client that sends
      // and half-closes at once (or garbage then FIN) must get the same
      // answer as one whose bytes were read before its FIN, however slow
      // this server is to read.
      process_input(id, c);
      if (!c.dead) drop(id, c, "closed the connection", false);
      return;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    drop(id, c, errno == EPROTO && c.tls ? c.tls->error() : tcp_store::errno_text(errno), errno == EPROTO);
    return;
  }
  process_input(id, c);
}

void TcpStoreServer::Impl::process_input(uint64_t id, Connection& c) {
  size_t offset = 0;
  if (!c.authenticated && !authenticate(id, c)) return;
  // A client that does not read its replies gets no new ones: TCP back-pressure
  // then bounds what it can make us buffer.
  while (!c.dead && !c.has_pending_output()) {
    tcp_store::Request request;
    auto outcome = tcp_store::parse_request(std::span(c.in).subspan(offset), request);
    if (outcome.state == tcp_store::ParseState::incomplete) break;
    if (outcome.state == tcp_store::ParseState::invalid) {
      drop(id, c, "sent an invalid request: " + outcome.error, true);
      return;
    }
    offset += outcome.consumed;
    try {
      handle(id, c, request);
    } catch (const std::exception& error) {
      drop(id, c, cat("request failed: ", error.what()), true);
      return;
    }
  }
  if (!c.dead && offset > 0) c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(offset));
  if (c.in.empty() && c.in.capacity() > kReadChunkBytes) c.in.shrink_to_fit();  // after a large set
}

const std::string* TcpStoreServer::Impl::first_missing(const std::vector<std::string>& keys) const {
  for (const auto& key : keys)
    if (values.find(key) == values.end()) return &key;
  return nullptr;
}

void TcpStoreServer::Impl::handle(uint64_t id, Connection& c, tcp_store::Request& request) {
  if (c.parked) {
    if (request.op != Op::cancel) {
      drop(id, c, cat("sent ", tcp_store::op_name(request.op), " while its previous request was still waiting"), true);
      return;
    }
    std::vector<std::span<const std::byte>> missing;
    for (const auto& key : c.parked->keys) {
      if (values.find(key) == values.end())
        missing.push_back(std::as_bytes(std::span(key.data(), key.size())));
    }
    // `missing` points into the parked keys: reply before letting go of them.
    unregister(id, c);
    reply(id, c, Status::timed_out, missing);
    c.parked.reset();
    return;
  }
  switch (request.op) {
    case Op::set: {
      const std::string& key = request.keys[0];
      if (std::string full = store_value(key, std::move(request.value)); !full.empty()) {
        reply(id, c, Status::error, {std::as_bytes(std::span(full.data(), full.size()))});
        return;
      }
      reply(id, c, Status::ok, {});
      wake(key);
      return;
    }
    case Op::get:
    case Op::wait: {
      const std::string* missing = first_missing(request.keys);
      if (missing == nullptr) {
        answer_present(id, c, request.op, request.keys);
        return;
      }
      uint64_t generation = next_generation++;
      std::string waiting_on = *missing;
      waiters[waiting_on].push_back({id, generation});
      c.parked = Parked{request.op, std::move(request.keys), std::move(waiting_on), generation};
      return;
    }
    case Op::add: {
      const std::string& key = request.keys[0];
      auto delta = static_cast<int64_t>(tcp_store::get_u64(request.value.data()));
      auto found = values.find(key);
      int64_t sum = 0;
      try {
        sum = store_detail::add_to_counter("TcpStore", key, found == values.end() ? nullptr : &found->second, delta);
      } catch (const InvalidArgument& error) {
        std::string message = error.what();
        reply(id, c, Status::error, {std::as_bytes(std::span(message.data(), message.size()))});
        return;
      }
      if (std::string full = store_value(key, store_detail::format_counter(sum)); !full.empty()) {
        reply(id, c, Status::error, {std::as_bytes(std::span(full.data(), full.size()))});
        return;
      }
      std::vector<std::byte> encoded;
      tcp_store::put_u64(encoded, static_cast<uint64_t>(sum));
      reply(id, c, Status::ok, {encoded});
      wake(key);
      return;
    }
    case Op::remove: {
      auto found = values.find(request.keys[0]);
      std::byte existed{static_cast<unsigned char>(found != values.end())};
      if (found != values.end()) {
        stored_bytes -= found->first.size() + found->second.size();
        values.erase(found);
      }
      reply(id, c, Status::ok, {std::span(&existed, 1)});
      return;
    }
    case Op::cancel:
      return;  // its request was answered already; cancel is never answered itself
  }
}

void TcpStoreServer::Impl::answer_present(uint64_t id, Connection& c, Op op, const std::vector<std::string>& keys) {
  std::vector<std::span<const std::byte>> items;
  if (op == Op::get) {
    items.reserve(keys.size());
    for (const auto& key : keys) items.push_back(values.at(key));
  }
  reply(id, c, Status::ok, items);
}

void TcpStoreServer::Impl::reply(uint64_t id, Connection& c, Status status,
                                 const std::vector<std::span<const std::byte>>& items) {
  tcp_store::append_reply(c.out, status, items);
  flush(id, c);
}

void TcpStoreServer::Impl::flush(uint64_t id, Connection& c) {
  while (c.has_pending_output()) {
    ssize_t n;
    if (!c.tls || c.tls_handshaking) {
      // In the clear: everything before TLS is up (the challenge, the proof).
      n = ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
    } else if (c.out_sent < c.out.size()) {
      n = c.tls->write(c.out.data() + c.out_sent, c.out.size() - c.out_sent);
    } else {
      n = -1;
      errno = c.tls->flush();  // a sealed record the socket did not take yet
      if (errno == 0) continue;
    }
    if (n > 0) {
      c.out_sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    drop(id, c, cat("send failed: ", errno == EPROTO && c.tls ? c.tls->error() : tcp_store::errno_text(errno)), false);
    return;
  }
  c.out.clear();
  c.out_sent = 0;
  if (c.out.capacity() > kReadChunkBytes) c.out.shrink_to_fit();  // after a large get
  if (!c.in.empty()) ready.push_back(id);
}

void TcpStoreServer::Impl::unregister(uint64_t id, Connection& c) {
  if (!c.parked) return;
  auto found = waiters.find(c.parked->waiting_on);
  if (found == waiters.end()) return;
  std::erase_if(found->second, [&](const WaiterRef& ref) { return ref.connection == id; });
  if (found->second.empty()) waiters.erase(found);
}

void TcpStoreServer::Impl::drop(uint64_t id, Connection& c, const std::string& reason, bool unexpected) {
  if (c.dead) return;
  if (unexpected && rejections.admit(c.peer_host)) {
    CHORUS_LOG(warn, -1, "TcpStoreServer ", where, ": dropping connection from ", c.peer, ": ", reason);
  } else if (unexpected) {
    CHORUS_LOG(debug, -1, "TcpStoreServer ", where, ": dropping connection from ", c.peer, ": ", reason);
  } else {
    CHORUS_LOG(debug, -1, "TcpStoreServer ", where, ": connection from ", c.peer, " ended: ", reason);
  }
  // A closed client's parked request must not linger in the waiter lists.
  unregister(id, c);
  c.parked.reset();
  c.dead = true;
  c.tls.reset();  // before the socket it uses
  c.fd.reset();
  c.in.clear();
  c.out.clear();
  c.out_sent = 0;
}

void TcpStoreServer::Impl::wake(const std::string& key) {
  auto found = waiters.find(key);
  if (found == waiters.end()) return;
  std::vector<WaiterRef> woken = std::move(found->second);
  waiters.erase(found);
  for (const WaiterRef& ref : woken) {
    auto entry = connections.find(ref.connection);
    if (entry == connections.end()) continue;
    Connection& c = entry->second;
    if (c.dead || !c.parked || c.parked->generation != ref.generation) continue;
    if (const std::string* missing = first_missing(c.parked->keys)) {
      c.parked->waiting_on = *missing;
      waiters[*missing].push_back(ref);
      continue;
    }
    Parked parked = std::move(*c.parked);
    c.parked.reset();
    answer_present(ref.connection, c, parked.op, parked.keys);
  }
}

}  // namespace chorus
