// One hiredis connection to a Redis server, as RedisStore needs it: pipelined
// round trips (many commands, one write, their replies), a bounded wait for
// replies, one reconnect when the connection has dropped, and errors that
// name the server and the hiredis error. Thread-safe: one round trip at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/deadline.h"

struct redisContext;
struct redisReply;

namespace chorus::redis_detail {

struct ReplyDeleter {
  void operator()(redisReply* reply) const;
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// Binary-safe arguments of one command: {"SET", key, value}.
using Command = std::vector<std::string>;

// Whether a batch may be sent a second time after the connection dropped
// with the first one in flight (SET may, INCRBY may not: it could count twice).
enum class Resend { safe, unsafe };

struct ServerAddress {
  std::string host;
  uint16_t port = 0;
  int database = 0;
  std::string password;
};

class RedisConnection {
 public:
  // Connects at once: IoError naming host:port when the server is not there.
  RedisConnection(ServerAddress address, std::chrono::milliseconds connect_timeout,
                  std::chrono::milliseconds reply_timeout);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends `commands` in one write and returns their replies in order. Replies
  // are awaited up to reply_timeout, or less when `deadline` (a caller's
  // blocking get) is nearer. Redis error replies are returned, not thrown.
  // TimeoutError when no reply comes; IoError when the connection is lost and
  // one reconnect (and, if `resend` allows, one resend) does not help.
  std::vector<Reply> round_trip(const std::vector<Command>& commands, Resend resend,
                                Deadline deadline = Deadline::never());

  // "RedisStore 127.0.0.1:6379" (with "/db" when not 0), for messages.
  const std::string& name() const { return name_; }

 private:
  enum class Outcome { ok, lost_before_sending, lost_after_sending, timed_out };
  struct Failure {
    Outcome outcome = Outcome::ok;
    std::string error;
  };

  // `lost`: why this call dropped the previous connection (empty if it did not).
  void connect_locked(const std::string& lost);
  void disconnect_locked();
  bool looks_dropped_locked() const;
  Failure exchange_locked(const std::vector<Command>& commands, std::chrono::milliseconds reply_wait,
                          std::vector<Reply>& replies);
  std::string describe_commands(const std::vector<Command>& commands) const;

  ServerAddress address_;
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds reply_timeout_;
  std::string name_;
  std::mutex mutex_;
  redisContext* context_ = nullptr;
  std::chrono::milliseconds socket_timeout_{-1};  // what the socket is set to now
};

}  // namespace chorus::redis_detail
