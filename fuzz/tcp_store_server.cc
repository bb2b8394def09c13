// The TcpStore server (rendezvous/tcp_store_server.cc), all of it: a real
// TcpStoreServer on loopback, three client connections driven by the input,
// and a model of what the server must answer.
//
// The input is a script of steps, each on one of the connections: send a
// well-formed request (set, get, wait, add, remove, cancel on a few keys),
// send one in two parts, send raw bytes, or hang up. The model parses each
// connection's bytes with the protocol's parser (fuzzed on its own by
// tcp_store_request) and applies the server's rules, written again here from
// tcp_store_protocol.h: values, counters, parked get/wait answered when their
// last key is set, cancel, and a dropped connection for anything invalid.
//
// Checks: every reply, on every connection, is the one the model predicts,
// byte for byte (an error reply's text excepted); a connection the server
// must drop is closed, and nothing else is; nothing arrives unasked.
//
// After each step the harness waits until the server has handled it: for the
// replies it expects, for the end of a dropped connection, or else for the
// answer on a fresh connection (a wait for no keys), which the server handles
// after everything sent before it (it serves connections in the order they
// were accepted).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <deque>
#include <map>
#include <optional>

#include "fuzz/fuzz_common.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_store_protocol.h"

using namespace chorus;
using namespace chorus::fuzz;
using tcp_store::Op;

namespace {

constexpr int kConnections = 3;
constexpr int kWaitMs = 10000;  // a reply the server owes; slow only on a loaded machine

using Bytes = std::vector<std::byte>;

Bytes bytes_of(std::string_view text) {
  Bytes out(text.size());
  if (!text.empty()) std::memcpy(out.data(), text.data(), text.size());
  return out;
}

struct Reply {
  uint8_t status = 0;
  std::vector<Bytes> items;
  bool any_text = false;  // an error: one item, whatever the server's words
};

std::string describe(const Reply& reply) {
  std::string text = cat("status ", unsigned(reply.status), ", ", reply.items.size(), " items");
  for (const auto& item : reply.items) text += cat(" [", item.size(), " bytes]");
  return text;
}

// add()'s counters, as tcp_store_protocol.h describes them: decimal text.
std::optional<int64_t> counter(const Bytes& value) {
  std::string text(reinterpret_cast<const char*>(value.data()), value.size());
  size_t at = text.size() > 0 && text[0] == '-' ? 1 : 0;
  if (at == text.size()) return std::nullopt;
  __int128 number = 0;
  for (; at < text.size(); ++at) {
    if (text[at] < '0' || text[at] > '9') return std::nullopt;
    number = number * 10 + (text[at] - '0');
    if (number > (__int128{1} << 64)) return std::nullopt;
  }
  if (text[0] == '-') number = -number;
  if (number > INT64_MAX || number < INT64_MIN) return std::nullopt;
  return static_cast<int64_t>(number);
}

// poll(), again when a signal interrupts it (libFuzzer's timer sends SIGALRM).
int poll_one(int fd, short events, int timeout_ms) {
  pollfd entry{fd, events, 0};
  while (true) {
    const int ready = ::poll(&entry, 1, timeout_ms);
    if (ready >= 0 || errno != EINTR) return ready;
  }
}

class Client {
 public:
  explicit Client(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int result = fd_ < 0 ? -1 : ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    if (result != 0 && errno == EINTR) {
      // The connection goes on in the background: wait for it.
      int error = 0;
      socklen_t length = sizeof(error);
      if (poll_one(fd_, POLLOUT, kWaitMs) == 1 && ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &length) == 0)
        result = error == 0 ? 0 : -1;
      errno = error;
    }
    if (result != 0) fuzz_fail(cat("cannot connect to the server: ", std::strerror(errno)));
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    // Hang up with a reset: thousands of connections must not sit in TIME_WAIT.
    linger no_linger{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &no_linger, sizeof(no_linger));
    // The store's challenge-response first (neither side has a secret), so
    // what the input sends next reaches the request parser.
    std::array<std::byte, tcp_store::kServerChallengeBytes> greeting{};
    Challenge challenge{};
    if (!receive(greeting.data(), greeting.size(), "challenge") ||
        !tcp_store::decode_server_challenge(greeting, challenge).empty())
      fuzz_fail("the server did not open with its challenge");
    const auto proof = tcp_store::encode_client_proof(challenge, fresh_challenge(), JobSecret());
    send(proof);
    std::array<std::byte, tcp_store::kServerProofBytes> answer{};
    if (!receive(answer.data(), answer.size(), "proof") ||
        !tcp_store::check_server_proof(answer, challenge, proof, JobSecret()).empty())
      fuzz_fail("the server did not prove the (empty) secret back");
  }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void send(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // the server hung up: the model knows whether it should have
      bytes = bytes.subspan(static_cast<size_t>(n));
    }
  }

  // Exactly `count` bytes within the wait; false at the end of the stream.
  bool receive(std::byte* out, size_t count, const char* what) {
    while (count > 0) {
      const int ready = poll_one(fd_, POLLIN, kWaitMs);
      if (ready == 0) fuzz_fail(cat("no ", what, " from the server within ", kWaitMs, " ms"));
      ssize_t n = ::recv(fd_, out, count, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      out += n;
      count -= static_cast<size_t>(n);
    }
    return true;
  }

  Reply read_reply() {
    std::array<std::byte, 9> header;
    FUZZ_CHECK(receive(header.data(), header.size(), "reply"), "the connection closed instead of replying");
    Reply reply;
    FUZZ_CHECK(tcp_store::get_u32(header.data()) == tcp_store::kMagic, "a reply without the magic");
    reply.status = std::to_integer<uint8_t>(header[4]);
    const uint32_t count = tcp_store::get_u32(header.data() + 5);
    FUZZ_CHECK(count <= 1024, cat("a reply of ", count, " items"));
    for (uint32_t i = 0; i < count; ++i) {
      std::array<std::byte, 8> length;
      FUZZ_CHECK(receive(length.data(), 8, "reply item"), "a reply cut short");
      const uint64_t bytes = tcp_store::get_u64(length.data());
      FUZZ_CHECK(bytes <= (1u << 20), cat("a reply item of ", bytes, " bytes"));
      Bytes item(bytes);
      FUZZ_CHECK(receive(item.data(), item.size(), "reply item"), "a reply cut short");
      reply.items.push_back(std::move(item));
    }
    return reply;
  }

  // The server closed this connection (a clean end or a reset).
  void expect_closed() {
    std::byte byte;
    FUZZ_CHECK(poll_one(fd_, POLLIN, kWaitMs) == 1, "the server did not close a connection it had to drop");
    ssize_t n;
    do {
      n = ::recv(fd_, &byte, 1, 0);
    } while (n < 0 && errno == EINTR);
    FUZZ_CHECK(n == 0 || (n < 0 && errno == ECONNRESET), "bytes after the last reply of a dropped connection");
  }

  // Nothing has arrived, and the connection is open.
  void expect_quiet() {
    std::byte byte;
    ssize_t n = ::recv(fd_, &byte, 1, MSG_DONTWAIT);
    FUZZ_CHECK(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
               n == 0 ? "the server closed a connection that broke no rule" : "a reply nobody asked for");
  }

 private:
  int fd_ = -1;
};

struct Parked {
  Op op;
  std::vector<std::string> keys;
};

struct Connection {
  std::unique_ptr<Client> client;
  Bytes in;  // what the model has not parsed yet
  std::optional<Parked> parked;
  bool dead = false;
  std::deque<Reply> expected;
};

class Script {
 public:
  Script() : server_("127.0.0.1", 0) {}

  void run(ByteReader& in) {
    while (!in.empty()) {
      const int index = in.u8() % kConnections;
      Connection& c = open(index);
      switch (in.u8() % 4) {
        case 0: send(index, c, well_formed(in), {}); break;
        case 1: {
          Bytes request = well_formed(in);
          const size_t split = request.empty() ? 0 : in.u16() % request.size();
          send(index, c, Bytes(request.begin(), request.begin() + split), Bytes(request.begin() + split, request.end()));
          break;
        }
        case 2: {
          auto raw = in.bytes(in.u8());
          send(index, c, Bytes(raw.begin(), raw.end()), {});
          break;
        }
        case 3:
          // Hanging up; the server forgets the connection and its parked request.
          connections_[index] = Connection{};
          break;
      }
    }
    sync();
    for (auto& c : connections_)
      if (c.client && !c.dead) c.client->expect_quiet();
  }

 private:
  Connection& open(int index) {
    Connection& c = connections_[index];
    if (!c.client || c.dead) {
      c = Connection{};
      c.client = std::make_unique<Client>(server_.port());
    }
    return c;
  }

  std::string key(ByteReader& in) {
    const uint8_t pick = in.u8();
    if (pick < 240) return std::string(1, static_cast<char>('a' + pick % 4));
    return in.short_text();
  }

  Bytes well_formed(ByteReader& in) {
    const Op op = static_cast<Op>(1 + in.u8() % 6);
    std::vector<std::string> keys;
    Bytes value;
    switch (op) {
      case Op::set: {
        keys.push_back(key(in));
        const uint8_t kind = in.u8();
        // A counter's text now and then, so add() meets its own format and others.
        if (kind % 4 == 0) {
          value = bytes_of(std::to_string(static_cast<int64_t>(in.u64()) >> (in.u8() % 64)));
        } else {
          auto raw = in.bytes(in.u8());
          value.assign(raw.begin(), raw.end());
        }
        break;
      }
      case Op::get:
      case Op::wait:
        for (int n = in.u8() % 4; n > 0; --n) keys.push_back(key(in));
        break;
      case Op::add: {
        keys.push_back(key(in));
        const uint8_t kind = in.u8();
        const int64_t delta = kind % 2 ? static_cast<int64_t>(in.u64()) : static_cast<int8_t>(in.u8());
        tcp_store::put_u64(value, static_cast<uint64_t>(delta));
        break;
      }
      case Op::remove: keys.push_back(key(in)); break;
      case Op::cancel: break;
    }
    return tcp_store::encode_request(op, keys, value);
  }

  void send(int index, Connection& c, const Bytes& first, const Bytes& second) {
    c.client->send(first);
    model(c, first);
    settle(index);
    if (second.empty() || c.dead) return;
    c.client->send(second);
    model(c, second);
    settle(index);
  }

  // Waits until the server has handled what `index` sent, checking the replies.
  void settle(int index) {
    bool waited = false;
    for (auto& c : connections_) {
      while (!c.expected.empty()) {
        const Reply expected = std::move(c.expected.front());
        c.expected.pop_front();
        const Reply got = c.client->read_reply();
        waited = true;
        bool same = got.status == expected.status && got.items.size() == expected.items.size();
        if (same && !expected.any_text) same = got.items == expected.items;
        FUZZ_CHECK(same, "the server replied " + describe(got) + ", expected " + describe(expected));
      }
    }
    Connection& c = connections_[index];
    if (c.dead && c.client) {
      c.client->expect_closed();
      c.client.reset();
      return;
    }
    if (!waited) sync();
  }

  // Everything sent so far has been handled once a fresh connection's wait
  // for no keys is answered.
  void sync() {
    Client probe(server_.port());
    probe.send(tcp_store::encode_request(Op::wait, {}, {}));
    const Reply reply = probe.read_reply();
    FUZZ_CHECK(reply.status == 0 && reply.items.empty(), "a wait for no keys was not answered ok");
  }

  // ------------------------------------------------------------ the model

  void model(Connection& c, const Bytes& bytes) {
    if (c.dead) return;
    c.in.insert(c.in.end(), bytes.begin(), bytes.end());
    size_t offset = 0;
    while (!c.dead) {
      tcp_store::Request request;
      const auto outcome = tcp_store::parse_request(std::span(c.in).subspan(offset), request);
      if (outcome.state == tcp_store::ParseState::incomplete) break;
      if (outcome.state == tcp_store::ParseState::invalid) return drop(c);
      offset += outcome.consumed;
      handle(c, request);
    }
    if (!c.dead) c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(offset));
  }

  void drop(Connection& c) {
    c.dead = true;
    c.parked.reset();
    c.in.clear();
  }

  void handle(Connection& c, tcp_store::Request& request) {
    if (c.parked) {
      if (request.op != Op::cancel) return drop(c);
      Reply reply{1, {}, false};
      for (const auto& key : c.parked->keys)
        if (!values_.count(key)) reply.items.push_back(bytes_of(key));
      c.expected.push_back(std::move(reply));
      c.parked.reset();
      return;
    }
    const std::string first = request.keys.empty() ? std::string() : request.keys[0];
    switch (request.op) {
      case Op::set:
        values_[first] = request.value;
        c.expected.push_back({0, {}, false});
        wake();
        return;
      case Op::get:
      case Op::wait:
        if (all_present(request.keys)) {
          c.expected.push_back(present(request.op, request.keys));
        } else {
          c.parked = Parked{request.op, request.keys};
        }
        return;
      case Op::add: {
        const int64_t delta = static_cast<int64_t>(tcp_store::get_u64(request.value.data()));
        int64_t base = 0;
        if (auto found = values_.find(first); found != values_.end()) {
          auto parsed = counter(found->second);
          if (!parsed) return c.expected.push_back({2, {Bytes()}, true});
          base = *parsed;
        }
        int64_t sum = 0;
        if (__builtin_add_overflow(base, delta, &sum)) return c.expected.push_back({2, {Bytes()}, true});
        values_[first] = bytes_of(std::to_string(sum));
        Bytes encoded;
        tcp_store::put_u64(encoded, static_cast<uint64_t>(sum));
        c.expected.push_back({0, {encoded}, false});
        wake();
        return;
      }
      case Op::remove:
        c.expected.push_back({0, {Bytes{std::byte{static_cast<unsigned char>(values_.erase(first))}}}, false});
        return;
      case Op::cancel:
        return;
    }
  }

  bool all_present(const std::vector<std::string>& keys) const {
    for (const auto& key : keys)
      if (!values_.count(key)) return false;
    return true;
  }

  Reply present(Op op, const std::vector<std::string>& keys) const {
    Reply reply;
    if (op == Op::get)
      for (const auto& key : keys) reply.items.push_back(values_.at(key));
    return reply;
  }

  void wake() {
    for (auto& c : connections_) {
      if (!c.client || c.dead || !c.parked || !all_present(c.parked->keys)) continue;
      c.expected.push_back(present(c.parked->op, c.parked->keys));
      c.parked.reset();
    }
  }

  TcpStoreServer server_;
  std::array<Connection, kConnections> connections_;
  std::map<std::string, Bytes> values_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return run_script<Script>(data, size); }
