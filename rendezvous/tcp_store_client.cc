// TcpStore: the client of a TcpStoreServer. Each call takes an idle
// connection (or opens one), sends one request and reads one reply, so one
// TcpStore may be shared by threads: concurrent calls use separate connections.
//
// Timeouts are enforced here, not by the server. When a get/wait times out the
// client sends cancel and reads the answer to its parked request (the keys
// still missing, for the error message); if the server does not answer within
// a short grace, the connection is dropped instead.
//
// Lost connections (server restarted, network blip) are retried within the
// call's timeout: set, get, get_many, wait and remove are simply sent again.
// add is sent again only if the first request never left completely; once it
// has been sent, the server may have applied it, and adding twice would
// corrupt a counter, so the call fails with IoError instead. (remove retried
// after a lost reply may report false for a key the first attempt removed.)
#include <algorithm>
#include <mutex>
#include <optional>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/socket_owner.h"
#include "rendezvous/store.h"
#include "rendezvous/store_common.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_store_protocol.h"
#include "rendezvous/tcp_store_socket.h"

namespace chorus {

using tcp_store::IoResult;
using tcp_store::IoStatus;
using tcp_store::Op;
using tcp_store::Status;
using tcp_store::Link;

namespace {

// Sending a request, authenticating or cancelling one gets at least this
// long, even when the caller's timeout is 0 ("look once") or has just run
// out. A store serving hundreds of ranks at once answers in tens to
// hundreds of ms: at 200 ms, 256 local ranks polling a rendezvous lost their
// cancelled connections and then failed to authenticate new ones in time.
constexpr auto kIoGrace = std::chrono::milliseconds(2000);

Deadline at_least(Deadline deadline, std::chrono::milliseconds floor) {
  return Deadline(std::max(deadline.at(), Clock::now() + floor));
}

// A chorus store greets every connection the moment it accepts it. A
// listener that accepted but has not greeted for this long (or keeps closing
// connections without a greeting) is another program on the port: the
// client says so instead of retrying until the rendezvous times out.
constexpr auto kGreetingPatience = std::chrono::milliseconds(1500);

struct Reply {
  Status status = Status::ok;
  std::vector<std::vector<std::byte>> items;
};

struct Call {
  Op op;
  const std::vector<std::string>& keys;
  std::span<const std::byte> value;
  std::chrono::milliseconds timeout;
  bool parks;              // get/wait: the server holds the reply until the keys exist
  bool retry_after_send;   // false for add
  std::string what;        // "set of key 'a'", for messages
};

}  // namespace

struct TcpStore::Impl {
  std::string host;
  uint16_t port;
  std::chrono::milliseconds connect_timeout;
  JobSecret secret;
  std::shared_ptr<const TlsContext> tls;
  std::string where;
  std::mutex idle_mutex;
  std::vector<Link> idle;

  Link take_idle();
  void give_back(Link link);
  Link connect_with_retry(Deadline deadline, std::string& error);
  // The challenge-response of tcp_store_protocol.h on a fresh connection.
  // Returns false (error set) when the connection broke, with `greeted`
  // saying whether a store greeting came first; the greeting is waited for
  // until `greeting_deadline` at most. Throws IoError when a proof does not
  // match, which no retry can fix.
  bool authenticate(Link& link, Deadline deadline, Deadline greeting_deadline, std::string& error, bool& greeted);
  // With TLS: the client's handshake, after authentication. Throws IoError
  // when it fails (a certificate problem no retry fixes).
  void start_tls(Link& link, Deadline deadline);
  IoResult read_reply(Link& link, Deadline deadline, size_t max_items, Reply& reply);
  Reply call(const Call& call);
  Reply cancel(Link link, const Call& call);
  void check(const Reply& reply, size_t items, const Call& call);
};

TcpStore::TcpStore(const std::string& host, uint16_t port, std::chrono::milliseconds connect_timeout,
                   JobSecret secret, std::shared_ptr<const TlsContext> tls)
    : impl_(std::make_unique<Impl>()) {
  impl_->host = host;
  impl_->port = port;
  impl_->connect_timeout = connect_timeout;
  impl_->secret = std::move(secret);
  impl_->tls = std::move(tls);
  impl_->where = tcp_store::host_port(host, port);
  std::string error;
  Link link = impl_->connect_with_retry(store_detail::deadline_after(connect_timeout), error);
  if (!link) {
    throw IoError(cat("TcpStore: cannot connect to store server ", impl_->where, " within ",
                      connect_timeout.count(), " ms: ", error));
  }
  impl_->give_back(std::move(link));
}

TcpStore::~TcpStore() = default;

Link TcpStore::Impl::take_idle() {
  std::lock_guard lock(idle_mutex);
  while (!idle.empty()) {
    Link link = std::move(idle.back());
    idle.pop_back();
    // A server that restarted closed this connection while it sat idle; finding
    // out now, before sending, is what lets even an add be retried safely.
    if (!tcp_store::idle_connection_is_dead(link.fd.get())) return link;
  }
  return {};
}

void TcpStore::Impl::give_back(Link link) {
  std::lock_guard lock(idle_mutex);
  idle.push_back(std::move(link));
}

Link TcpStore::Impl::connect_with_retry(Deadline deadline, std::string& error) {
  // The server may start after its clients (rank 0 still starting up), so
  // "connection refused" means "not yet" until the deadline.
  auto backoff = std::chrono::milliseconds(10);
  std::optional<Deadline> greeting_deadline;  // from the first connection accepted
  while (true) {
    Link link{tcp_store::connect_once(host, port, deadline, error), nullptr};
    if (link) {
      if (!greeting_deadline) greeting_deadline = Deadline(Clock::now() + kGreetingPatience);
      bool greeted = false;
      if (authenticate(link, at_least(deadline, kIoGrace), *greeting_deadline, error, greeted)) {
        if (tls) start_tls(link, at_least(deadline, kIoGrace));
        return link;
      }
      if (!greeted && greeting_deadline->expired())
        throw IoError(cat("TcpStore: a process listens at ", where, " but it is not a chorus store: it sent no "
                          "store greeting within ", kGreetingPatience.count(), " ms (", error, "). Another program "
                          "holds the port: pick a free one for CHORUS_STORE / MASTER_PORT"));
    }
    link = Link{};
    if (deadline.expired()) return link;
    std::this_thread::sleep_for(std::min(backoff, deadline.remaining() + std::chrono::milliseconds(1)));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
}

void TcpStore::Impl::start_tls(Link& link, Deadline deadline) {
  link.tls = tls->open(link.fd.get(), TlsRole::client);
  std::string why = link.tls->handshake_until(deadline);
  if (why.empty()) why = link.tls->await_confirmation(deadline);
  if (!why.empty())
    throw IoError(cat("TcpStore: the TLS handshake with store server ", where, " failed: ", why,
                      " (CHORUS_TLS_CERT='", tls->files().certificate, "', CHORUS_TLS_CA='", tls->files().authority,
                      "': are the store's and this rank's certificates from the same CA?)"));
}

bool TcpStore::Impl::authenticate(Link& link, Deadline deadline, Deadline greeting_deadline, std::string& error,
                                  bool& greeted) {
  std::vector<std::byte> greeting(tcp_store::kServerChallengeBytes);
  IoResult result = tcp_store::receive_exact(link, greeting, Deadline(std::min(deadline.at(), greeting_deadline.at())));
  if (result.status != IoStatus::ok) {
    error = "no greeting from the server (" + result.error + ")";
    return false;
  }
  greeted = true;
  Challenge server_challenge{};
  bool server_uses_tls = false;
  if (std::string why = tcp_store::decode_server_challenge(greeting, server_challenge, &server_uses_tls); !why.empty())
    throw IoError(cat("TcpStore: ", where, " is not a chorus store of this version: ", why));
  if (server_uses_tls != (tls != nullptr))
    throw IoError(cat("TcpStore: store server ", where, server_uses_tls ? " uses TLS but this process does not"
                                                                         : " does not use TLS but this process does",
                      ": set CHORUS_TLS_CERT, CHORUS_TLS_KEY and CHORUS_TLS_CA for the store and every rank, or for "
                      "none"));
  // Without a secret nothing the server sends can prove it is the job's:
  // the kernel's word on its user does (base/socket_owner.h), so a store of
  // another user squatting the port is not used.
  if (!secret.configured()) {
    if (std::string why = same_user_refusal(link.fd.get(), cat("the store server at ", where)); !why.empty())
      throw IoError(cat("TcpStore: will not use ", where, ": ", why));
  }
  const std::vector<std::byte> proof = tcp_store::encode_client_proof(server_challenge, fresh_challenge(), secret);
  result = tcp_store::send_all(link, proof, deadline);
  if (result.status != IoStatus::ok) {
    error = "the connection broke during authentication (" + result.error + ")";
    return false;
  }
  std::vector<std::byte> answer(tcp_store::kServerProofBytes);
  result = tcp_store::receive_exact(link, answer, deadline);
  if (result.status == IoStatus::closed)
    throw IoError(cat("TcpStore: store server ", where, " refused this client's proof of the job secret: it "
                      "serves another job, CHORUS_SECRET differs between the store and this rank, or, with no "
                      "secret, the store runs as another user (the server's log names this client and why)"));
  if (result.status != IoStatus::ok) {
    error = "no answer to authentication (" + result.error + ")";
    return false;
  }
  if (std::string why = tcp_store::check_server_proof(answer, server_challenge, proof, secret); !why.empty())
    throw IoError(cat("TcpStore: store server ", where, " failed authentication: ", why));
  return true;
}

IoResult TcpStore::Impl::read_reply(Link& link, Deadline deadline, size_t max_items, Reply& reply) {
  std::byte header[tcp_store::kReplyHeaderBytes];
  IoResult result = tcp_store::receive_exact(link, header, deadline);
  if (result.status != IoStatus::ok) return result;
  uint32_t magic = tcp_store::get_u32(header);
  auto status = std::to_integer<uint8_t>(header[4]);
  size_t count = tcp_store::get_u32(header + 5);
  if (magic != tcp_store::kMagic || status > static_cast<uint8_t>(Status::error) || count > max_items) {
    throw IoError(cat("TcpStore: ", where, " sent an invalid reply (magic 0x", std::hex, magic, std::dec,
                      ", status ", unsigned(status), ", ", count, " items); is a chorus-store listening there?"));
  }
  reply.status = static_cast<Status>(status);
  reply.items.assign(count, {});
  for (auto& item : reply.items) {
    std::byte length_bytes[8];
    result = tcp_store::receive_exact(link, length_bytes, deadline);
    if (result.status != IoStatus::ok) return result;
    uint64_t length = tcp_store::get_u64(length_bytes);
    if (length > tcp_store::kMaxValueBytes) {
      throw IoError(cat("TcpStore: ", where, " sent an invalid reply (an item of ", length, " bytes)"));
    }
    item.resize(length);
    result = tcp_store::receive_exact(link, item, deadline);
    if (result.status != IoStatus::ok) return result;
  }
  return result;
}

Reply TcpStore::Impl::call(const Call& call) {
  std::vector<std::byte> request = tcp_store::encode_request(call.op, call.keys, call.value);
  Deadline deadline = store_detail::deadline_after(call.timeout);
  size_t max_items = std::max<size_t>(call.keys.size(), 1);
  auto backoff = std::chrono::milliseconds(5);
  std::string lost;  // why the previous attempt's connection was lost
  auto connection_lost = [&](const std::string& why) {
    return IoError(cat("TcpStore: lost the connection to store server ", where, " during ", call.what, " (", why,
                       ") and could not complete it within ", call.timeout.count(), " ms"));
  };
  while (true) {
    Link link = take_idle();
    if (!link) {
      std::string error;
      link = connect_with_retry(deadline, error);
      if (!link) {
        throw IoError(cat("TcpStore: cannot reach store server ", where, " for ", call.what, " within ",
                          call.timeout.count(), " ms: ", error, lost.empty() ? "" : " (connection lost: " + lost + ")"));
      }
    }
    IoResult sent = tcp_store::send_all(link, request, at_least(deadline, kIoGrace));
    if (sent.status == IoStatus::ok) {
      Reply reply;
      Deadline reply_deadline = call.parks ? deadline : at_least(deadline, kIoGrace);
      IoResult got = read_reply(link, reply_deadline, max_items, reply);
      if (got.status == IoStatus::ok) {
        give_back(std::move(link));
        return reply;
      }
      if (got.status == IoStatus::timed_out) {
        if (call.parks) return cancel(std::move(link), call);
        throw TimeoutError(cat("TcpStore: store server ", where, " did not answer ", call.what, " within ",
                               call.timeout.count(), " ms"));
      }
      if (!call.retry_after_send) {
        throw IoError(cat("TcpStore: lost the connection to store server ", where, " after sending ", call.what,
                          " (", got.error, "); not retried, because the server may already have applied it"));
      }
      lost = got.error;
    } else {
      // The server never got the whole request, so sending it again is safe for every op.
      lost = sent.error;
    }
    CHORUS_LOG(debug, -1, "TcpStore: connection to ", where, " lost during ", call.what, " (", lost, "); retrying");
    if (deadline.expired()) throw connection_lost(lost);
    std::this_thread::sleep_for(std::min(backoff, deadline.remaining()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
}

Reply TcpStore::Impl::cancel(Link link, const Call& call) {
  std::string store = cat("TcpStore ", where);
  Deadline grace = Deadline::after(kIoGrace);
  std::vector<std::byte> frame = tcp_store::encode_request(Op::cancel, {}, {});
  Reply reply;
  if (tcp_store::send_all(link, frame, grace).status == IoStatus::ok &&
      read_reply(link, grace, std::max<size_t>(call.keys.size(), 1), reply).status == IoStatus::ok) {
    give_back(std::move(link));
    if (reply.status != Status::timed_out) return reply;  // answered just as we gave up: use it
    std::vector<std::string> missing;
    for (const auto& item : reply.items) missing.emplace_back(reinterpret_cast<const char*>(item.data()), item.size());
    store_detail::throw_key_timeout(store, missing, call.timeout);
  }
  // No answer to the cancel either: the connection is out of step, so it is dropped.
  store_detail::throw_key_timeout(store, call.keys, call.timeout);
}

void TcpStore::Impl::check(const Reply& reply, size_t items, const Call& call) {
  if (reply.status == Status::error) {
    std::string message = reply.items.empty() ? "unknown error"
        : std::string(reinterpret_cast<const char*>(reply.items[0].data()), reply.items[0].size());
    throw InvalidArgument(message);
  }
  if (reply.status != Status::ok || reply.items.size() != items) {
    throw IoError(cat("TcpStore: ", where, " answered ", call.what, " with status ", int(reply.status), " and ",
                      reply.items.size(), " items (expected ", items, ")"));
  }
}

void TcpStore::set(const std::string& key, std::span<const std::byte> value) {
  std::vector<std::string> keys{key};
  Call call{Op::set, keys, value, impl_->connect_timeout, false, true, "set of key '" + key + "'"};
  impl_->check(impl_->call(call), 0, call);
}

std::vector<std::byte> TcpStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  return std::move(get_many({key}, timeout)[0]);
}

std::vector<std::vector<std::byte>> TcpStore::get_many(const std::vector<std::string>& keys,
                                                       std::chrono::milliseconds timeout) {
  if (keys.empty()) return {};
  Call call{Op::get, keys, {}, timeout, true, true,
            keys.size() == 1 ? "get of key '" + keys[0] + "'" : cat("get of ", keys.size(), " keys")};
  Reply reply = impl_->call(call);
  impl_->check(reply, keys.size(), call);
  return std::move(reply.items);
}

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  if (keys.empty()) return;
  Call call{Op::wait, keys, {}, timeout, true, true, cat("wait for ", store_detail::quote_keys(keys, 4))};
  impl_->check(impl_->call(call), 0, call);
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  std::vector<std::string> keys{key};
  std::vector<std::byte> encoded;
  tcp_store::put_u64(encoded, static_cast<uint64_t>(delta));
  Call call{Op::add, keys, encoded, impl_->connect_timeout, false, false, cat("add of ", delta, " to key '", key, "'")};
  Reply reply = impl_->call(call);
  impl_->check(reply, 1, call);
  if (reply.items[0].size() != 8) throw IoError(cat("TcpStore: ", impl_->where, " answered an add with ", reply.items[0].size(), " bytes"));
  return static_cast<int64_t>(tcp_store::get_u64(reply.items[0].data()));
}

bool TcpStore::remove(const std::string& key) {
  std::vector<std::string> keys{key};
  Call call{Op::remove, keys, {}, impl_->connect_timeout, false, true, "remove of key '" + key + "'"};
  Reply reply = impl_->call(call);
  impl_->check(reply, 1, call);
  if (reply.items[0].size() != 1) throw IoError(cat("TcpStore: ", impl_->where, " answered a remove with ", reply.items[0].size(), " bytes"));
  return reply.items[0][0] != std::byte{0};
}

}  // namespace chorus
