// The TcpStore client (rendezvous/tcp_store_client.cc) against a server that
// answers with the input: a real TcpStore, a fake server on loopback.
//
// Input: the call (set, get, get_many, wait, add, remove, on keys a to c),
// then a script per connection the client opens: the replies to send, one
// per request received (the second one answers a cancel), and whether to
// hang up after the last. A reply is either built from fields (status,
// items) or raw bytes. Connections beyond the script are hung up at once.
//
// Checks: the call ends the way a model of the client's documented rules
// says (tcp_store_client.cc's header, tcp_store_protocol.h): the values of a
// well-formed reply, InvalidArgument with the server's text for an error
// reply, IoError for an invalid reply or a lost connection (add is never
// sent twice), TimeoutError when no reply comes (get and wait cancel first
// and report the keys the cancel's answer names). The client's timeouts are
// short, so on a loaded machine any call may also end in TimeoutError, and a
// call that had to reconnect in IoError; never in anything else, and never in
// an exception that is not a chorus::Error.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <variant>

#include "fuzz/fuzz_common.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_store_protocol.h"

using namespace chorus;
using namespace chorus::fuzz;

namespace {

using Bytes = std::vector<std::byte>;
constexpr auto kTimeout = std::chrono::milliseconds(30);

struct ConnectionScript {
  std::vector<Bytes> replies;  // one per request received, in order
  bool hang_up = false;        // after the last reply (else: keep the connection open)
};

// The fake server: one thread, answering each connection of the current
// input from its script.
class FakeServer {
 public:
  FakeServer() {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::listen(listener_, 128) != 0 || ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0)
      fuzz_fail("cannot listen on loopback");
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }

  uint16_t port() const { return port_; }
  // Connections the client opened for the current input.
  size_t accepted() const { return accepted_.load(); }

  // Forgets every connection so far (the previous input's), then serves `scripts`.
  void reset(std::vector<ConnectionScript> scripts) {
    std::unique_lock lock(mutex_);
    scripts_ = std::move(scripts);
    ++generation_;
    changed_.wait(lock, [&] { return served_generation_ == generation_; });
  }

 private:
  struct Peer {
    int fd = -1;
    size_t number = 0;  // of the input's connections
    Challenge challenge{};
    bool authenticated = false;  // the store's challenge-response (no secret on either side) is done
    Bytes in;
    size_t answered = 0;
    bool hung_up = false;
  };

  void serve() {
    std::vector<Peer> peers;
    uint64_t generation = 0;
    while (true) {
      {
        std::lock_guard lock(mutex_);
        if (generation != generation_) {
          for (Peer& peer : peers) ::close(peer.fd);
          peers.clear();
          // Connections still waiting to be accepted are the previous input's too.
          while (true) {
            int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) break;
            ::close(fd);
          }
          generation = generation_;
          served_generation_ = generation;
          accepted_.store(0);
          changed_.notify_all();
        }
      }
      std::vector<pollfd> polled{{listener_, POLLIN, 0}};
      for (const Peer& peer : peers) polled.push_back({peer.fd, POLLIN, 0});
      ::poll(polled.data(), polled.size(), 5);
      if (polled[0].revents & POLLIN) accept_all(peers);
      for (size_t i = 1; i < polled.size(); ++i)
        if (polled[i].revents) read_from(peers[i - 1]);
      std::erase_if(peers, [](const Peer& peer) {
        if (peer.fd >= 0) return false;
        return true;
      });
    }
  }

  void accept_all(std::vector<Peer>& peers) {
    while (true) {
      int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      Peer peer;
      peer.fd = fd;
      peer.number = accepted_.fetch_add(1);
      // Every connection starts with the server's challenge; the script
      // begins once the client proved itself (read_from).
      peer.challenge = fresh_challenge();
      const auto greeting = tcp_store::encode_server_challenge(peer.challenge);
      (void)::send(fd, greeting.data(), greeting.size(), MSG_NOSIGNAL);
      peers.push_back(std::move(peer));
    }
  }

  void read_from(Peer& peer) {
    std::byte buffer[4096];
    while (true) {
      ssize_t n = ::recv(peer.fd, buffer, sizeof(buffer), 0);
      if (n > 0) {
        peer.in.insert(peer.in.end(), buffer, buffer + n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      ::close(peer.fd);  // the client hung up
      peer.fd = -1;
      return;
    }
    if (!peer.authenticated) {
      if (peer.in.size() < tcp_store::kClientProofBytes) return;
      const std::span<const std::byte> proof(peer.in.data(), tcp_store::kClientProofBytes);
      if (!tcp_store::check_client_proof(proof, peer.challenge, JobSecret()).empty())
        fuzz_fail("the client's proof of an empty secret does not check out");
      const auto answer = tcp_store::encode_server_proof(peer.challenge, proof, JobSecret());
      (void)::send(peer.fd, answer.data(), answer.size(), MSG_NOSIGNAL);
      peer.in.erase(peer.in.begin(), peer.in.begin() + static_cast<ptrdiff_t>(tcp_store::kClientProofBytes));
      peer.authenticated = true;
      std::lock_guard lock(mutex_);
      if (peer.number >= scripts_.size()) ::shutdown(peer.fd, SHUT_WR);  // beyond the script: hung up at once
    }
    // One reply per complete request.
    while (true) {
      tcp_store::Request request;
      auto outcome = tcp_store::parse_request(peer.in, request);
      if (outcome.state != tcp_store::ParseState::complete) break;
      peer.in.erase(peer.in.begin(), peer.in.begin() + static_cast<ptrdiff_t>(outcome.consumed));
      std::lock_guard lock(mutex_);
      if (peer.number >= scripts_.size() || peer.hung_up) continue;
      const ConnectionScript& script = scripts_[peer.number];
      if (peer.answered < script.replies.size()) {
        const Bytes& reply = script.replies[peer.answered];
        size_t sent = 0;
        while (sent < reply.size()) {
          ssize_t n = ::send(peer.fd, reply.data() + sent, reply.size() - sent, MSG_NOSIGNAL);
          if (n < 0 && errno == EINTR) continue;  // libFuzzer's timer (SIGALRM)
          if (n <= 0) break;
          sent += static_cast<size_t>(n);
        }
      }
      ++peer.answered;
      if (script.hang_up && peer.answered >= script.replies.size()) {
        ::shutdown(peer.fd, SHUT_WR);
        peer.hung_up = true;
      }
    }
  }

  int listener_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<ConnectionScript> scripts_;
  uint64_t generation_ = 0;
  uint64_t served_generation_ = 0;
  std::atomic<size_t> accepted_{0};  // written by the serving thread, read by the check
};

FakeServer& server() {
  static FakeServer* instance = new FakeServer();  // lives as long as the process
  return *instance;
}

// ------------------------------------------------------------ the model

enum class Call : uint8_t { set, get, get_many, wait, add, remove };

struct Outcome {
  std::string kind;  // "" (returned), "IoError", "InvalidArgument", "TimeoutError"
  std::vector<Bytes> values;  // get, get_many
  int64_t sum = 0;            // add
  bool removed = false;       // remove
  std::string text;           // InvalidArgument's message
};

struct Parsed {
  enum { complete, invalid, truncated } state = truncated;
  uint8_t status = 0;
  std::vector<Bytes> items;
};

Outcome ending(const char* kind) {
  Outcome outcome;
  outcome.kind = kind;
  return outcome;
}

// The reply format (tcp_store_protocol.h), read by hand.
Parsed parse_reply(const Bytes& bytes, size_t max_items) {
  Parsed parsed;
  auto get = [&](size_t at, size_t width) {
    uint64_t value = 0;
    for (size_t i = 0; i < width; ++i) value |= std::to_integer<uint64_t>(bytes[at + i]) << (8 * i);
    return value;
  };
  if (bytes.size() < 9) return parsed;
  parsed.status = std::to_integer<uint8_t>(bytes[4]);
  const uint64_t count = get(5, 4);
  if (get(0, 4) != 0x54534843 || parsed.status > 2 || count > max_items) {
    parsed.state = Parsed::invalid;
    return parsed;
  }
  size_t at = 9;
  for (uint64_t i = 0; i < count; ++i) {
    if (bytes.size() - at < 8) return parsed;
    const uint64_t length = get(at, 8);
    at += 8;
    if (length > tcp_store::kMaxValueBytes) {
      parsed.state = Parsed::invalid;
      return parsed;
    }
    if (bytes.size() - at < length) return parsed;
    parsed.items.emplace_back(bytes.begin() + static_cast<ptrdiff_t>(at),
                              bytes.begin() + static_cast<ptrdiff_t>(at + length));
    at += length;
  }
  parsed.state = Parsed::complete;
  return parsed;
}

// TcpStore's check() and what each call makes of the items.
Outcome answer(Call call, size_t keys, const Parsed& reply) {
  Outcome outcome;
  if (reply.status == 2) {
    outcome.kind = "InvalidArgument";
    outcome.text = reply.items.empty() ? "unknown error"
                                       : std::string(reinterpret_cast<const char*>(reply.items[0].data()),
                                                     reply.items[0].size());
    return outcome;
  }
  size_t expected = 0;
  switch (call) {
    case Call::get: case Call::get_many: expected = keys; break;
    case Call::add: case Call::remove: expected = 1; break;
    default: break;
  }
  if (reply.status != 0 || reply.items.size() != expected) {
    outcome.kind = "IoError";
    return outcome;
  }
  if (call == Call::get || call == Call::get_many) outcome.values = reply.items;
  if (call == Call::add) {
    if (reply.items[0].size() != 8) outcome.kind = "IoError";
    else outcome.sum = static_cast<int64_t>(tcp_store::get_u64(reply.items[0].data()));
  }
  if (call == Call::remove) {
    if (reply.items[0].size() != 1) outcome.kind = "IoError";
    else outcome.removed = reply.items[0][0] != std::byte{0};
  }
  return outcome;
}

// The client's rules; `reconnected` says whether it got there through a
// reconnect (then running out of time there is an IoError too), `used` how
// many connections the rules open.
Outcome predict(Call call, size_t keys, const std::vector<ConnectionScript>& scripts, bool& reconnected,
                size_t& used) {
  const bool parks = call == Call::get || call == Call::get_many || call == Call::wait;
  const size_t max_items = std::max<size_t>(keys, 1);
  reconnected = false;
  for (size_t number = 0; number < scripts.size(); ++number) {
    reconnected = number > 0;
    used = number + 1;
    const ConnectionScript& script = scripts[number];
    const Parsed reply = parse_reply(script.replies.at(0), max_items);
    if (reply.state == Parsed::complete) return answer(call, keys, reply);
    if (reply.state == Parsed::invalid) return ending("IoError");
    if (script.hang_up && script.replies.size() == 1) {
      if (call == Call::add) return ending("IoError");  // may have been applied: never sent twice
      continue;                                   // lost: sent again on a new connection
    }
    // Nothing more comes (or only after a cancel): the call's time runs out.
    if (!parks) return ending("TimeoutError");
    const Parsed cancel = script.replies.size() > 1 ? parse_reply(script.replies[1], max_items) : Parsed{};
    if (cancel.state == Parsed::invalid) return ending("IoError");
    if (cancel.state == Parsed::complete && cancel.status != 1) return answer(call, keys, cancel);
    return ending("TimeoutError");
  }
  reconnected = true;
  return ending("IoError");  // every connection lost: the time runs out reconnecting
}

Bytes build_reply(ByteReader& in) {
  Bytes reply;
  const uint8_t mode = in.u8();
  if (mode % 4 == 3) {
    auto raw = in.bytes(in.u8());
    return Bytes(raw.begin(), raw.end());
  }
  tcp_store::put_u32(reply, mode % 8 == 7 ? in.u32() : tcp_store::kMagic);
  reply.push_back(static_cast<std::byte>(in.u8() % 4));
  const uint8_t count = in.u8() % 5;
  tcp_store::put_u32(reply, count);
  for (uint8_t i = 0; i < count; ++i) {
    auto item = in.bytes(in.u8() % 16);
    const uint8_t lie = in.u8();
    tcp_store::put_u64(reply, lie >= 250 ? in.u64() : item.size());
    reply.insert(reply.end(), item.begin(), item.end());
  }
  // Cut short now and then.
  if (mode % 4 == 2 && !reply.empty()) reply.resize(in.u16() % reply.size());
  return reply;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  quiet_logs();
  server();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  const Call call = static_cast<Call>(in.u8() % 6);
  std::vector<std::string> keys{"a"};
  if (call == Call::get_many || call == Call::wait)
    for (int n = in.u8() % 3; n > 0; --n) keys.push_back(std::string(1, static_cast<char>('b' + n)));
  const int64_t delta = static_cast<int8_t>(in.u8());
  std::vector<ConnectionScript> scripts(1 + in.u8() % 3);
  for (auto& script : scripts) {
    const uint8_t flags = in.u8();
    script.hang_up = (flags & 1) == 0;
    script.replies.push_back(build_reply(in));
    if (flags & 2) script.replies.push_back(build_reply(in));
  }

  bool reconnected = false;
  size_t used = 0;
  const Outcome expected = predict(call, keys.size(), scripts, reconnected, used);
  server().reset(scripts);

  Outcome got;
  try {
    TcpStore store("127.0.0.1", server().port(), kTimeout);
    const Bytes value{std::byte{1}, std::byte{2}};
    switch (call) {
      case Call::set: store.set(keys[0], value); break;
      case Call::get: got.values = {store.get(keys[0], kTimeout)}; break;
      case Call::get_many: got.values = store.get_many(keys, kTimeout); break;
      case Call::wait: store.wait(keys, kTimeout); break;
      case Call::add: got.sum = store.add(keys[0], delta); break;
      case Call::remove: got.removed = store.remove(keys[0]); break;
    }
  } catch (const InvalidArgument& error) {
    got.kind = "InvalidArgument";
    got.text = error.what();
  } catch (...) {
    got.kind = chorus_error_kind(std::current_exception(), "TcpStore");
  }

  // Slow machine: a reply may miss the client's short deadline, and a
  // reconnect may not fit in what is left of it; an authentication that
  // missed its deadline makes the client reconnect where the rules did not
  // (the extra connection is hung up: IoError).
  const bool reconnected_anyway = server().accepted() > used;
  if (got.kind == "TimeoutError" || ((reconnected || reconnected_anyway) && got.kind == "IoError")) return 0;
  FUZZ_CHECK(got.kind == expected.kind,
             cat("call ", int(call), " ended in '", got.kind, "', the rules say '", expected.kind, "'"));
  if (got.kind == "InvalidArgument")  // what() is a C string: the text up to its first NUL
    FUZZ_CHECK(got.text == expected.text.substr(0, expected.text.find('\0')),
               "an error reply's text was not passed on: '" + got.text + "'");
  if (!got.kind.empty()) return 0;
  FUZZ_CHECK(got.values == expected.values && got.sum == expected.sum && got.removed == expected.removed,
             "a call returned other values than the server sent");
  return 0;
}
