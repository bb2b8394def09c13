// RedisStore: the Store interface on a Redis server that a cluster already
// runs. Every key lives under "<namespace>/" and is written with an expiry
// (SET ... PX, INCRBY + PEXPIRE in one round trip), so a job that finishes or
// crashes leaves nothing behind once the TTL passes. Redis has no "wait for a
// key" that works for plain string keys without keyspace notifications
// (which are off by default and server-wide), so blocking calls poll with a
// 1 to 20 ms backoff: rendezvous keys appear within milliseconds.
#include "rendezvous/redis_store.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "rendezvous/redis_connection.h"
#include "rendezvous/store_common.h"

namespace chorus {

using redis_detail::Command;
using redis_detail::Reply;
using redis_detail::Resend;

namespace {

// Sleeps before the next poll: 1, 2, 4, ... 20 ms, never past the deadline.
class Backoff {
 public:
  void sleep(Deadline deadline) {
    std::this_thread::sleep_for(std::min(delay_, deadline.remaining() + std::chrono::milliseconds(1)));
    delay_ = std::min(delay_ * 2, std::chrono::milliseconds(20));
  }

 private:
  std::chrono::milliseconds delay_{1};
};

std::string as_string(std::span<const std::byte> value) {
  return std::string(reinterpret_cast<const char*>(value.data()), value.size());
}

std::vector<std::byte> as_bytes(const redisReply& reply) {
  std::vector<std::byte> value(reply.len);
  std::copy_n(reinterpret_cast<const std::byte*>(reply.str), reply.len, value.data());
  return value;
}

std::string reply_text(const redisReply& reply) { return std::string(reply.str, reply.len); }

// Redis glob patterns treat * ? [ ] \ specially; a namespace is matched literally.
std::string glob_escape(const std::string& text) {
  std::string escaped;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return escaped;
}

}  // namespace

struct RedisStore::Impl {
  RedisStoreOptions options;
  redis_detail::RedisConnection connection;

  explicit Impl(RedisStoreOptions given)
      : options(std::move(given)),
        connection({options.host, options.port, options.database, options.password}, options.connect_timeout,
                   options.reply_timeout) {}

  const std::string& name() const { return connection.name(); }
  std::string full_key(const std::string& key) const { return options.key_namespace + "/" + key; }

  // Anything but the expected reply type: an error reply or a key of another
  // type under our namespace, i.e. something else writes there.
  [[noreturn]] void unexpected(const redisReply& reply, const std::string& what, const std::string& key) const {
    std::string got = reply.type == REDIS_REPLY_ERROR ? "error '" + reply_text(reply) + "'"
                                                      : cat("a reply of type ", reply.type);
    throw IoError(cat(name(), ": ", what, " of key '", key, "' got ", got));
  }

  // The value, or nullopt for a missing key.
  std::optional<std::vector<std::byte>> value_of(const redisReply& reply, const std::string& key) const {
    if (reply.type == REDIS_REPLY_NIL) return std::nullopt;
    if (reply.type != REDIS_REPLY_STRING) unexpected(reply, "GET", key);
    return as_bytes(reply);
  }

  std::string ttl_text() const { return std::to_string(options.key_ttl.count()); }
};

RedisStore::RedisStore(RedisStoreOptions options) {
  if (options.key_namespace.empty()) {
    throw InvalidArgument(cat("RedisStore ", options.host, ":", options.port,
                              ": key_namespace is empty (use the job id, so jobs sharing a Redis never read each "
                              "other's keys)"));
  }
  if (options.key_ttl.count() < 0)
    throw InvalidArgument(cat("RedisStore: key_ttl must not be negative (got ", options.key_ttl.count(), " ms)"));
  if (options.database < 0)
    throw InvalidArgument(cat("RedisStore: database must not be negative (got ", options.database, ")"));
  impl_ = std::make_unique<Impl>(std::move(options));
}

RedisStore::~RedisStore() = default;

void RedisStore::set(const std::string& key, std::span<const std::byte> value) {
  Command command{"SET", impl_->full_key(key), as_string(value)};
  if (impl_->options.key_ttl.count() > 0) {
    command.push_back("PX");
    command.push_back(impl_->ttl_text());
  }
  auto replies = impl_->connection.round_trip({command}, Resend::safe);
  if (replies[0]->type != REDIS_REPLY_STATUS) impl_->unexpected(*replies[0], "SET", key);
}

std::vector<std::byte> RedisStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  Deadline deadline = store_detail::deadline_after(timeout);
  Command command{"GET", impl_->full_key(key)};
  Backoff backoff;
  while (true) {
    auto replies = impl_->connection.round_trip({command}, Resend::safe, deadline);
    if (auto value = impl_->value_of(*replies[0], key)) return std::move(*value);
    if (deadline.expired()) store_detail::throw_key_timeout(impl_->name(), {key}, timeout);
    backoff.sleep(deadline);
  }
}

std::vector<std::vector<std::byte>> RedisStore::get_many(const std::vector<std::string>& keys,
                                                         std::chrono::milliseconds timeout) {
  std::vector<std::vector<std::byte>> values(keys.size());
  if (keys.empty()) return values;
  Deadline deadline = store_detail::deadline_after(timeout);
  // Indices of keys not read yet; each poll MGETs only those.
  std::vector<size_t> pending(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) pending[i] = i;
  Backoff backoff;
  while (true) {
    Command command{"MGET"};
    for (size_t i : pending) command.push_back(impl_->full_key(keys[i]));
    auto replies = impl_->connection.round_trip({command}, Resend::safe, deadline);
    const redisReply& reply = *replies[0];
    if (reply.type != REDIS_REPLY_ARRAY || reply.elements != pending.size())
      impl_->unexpected(reply, "MGET", keys[pending[0]]);
    std::vector<size_t> still_missing;
    for (size_t j = 0; j < pending.size(); ++j) {
      if (auto value = impl_->value_of(*reply.element[j], keys[pending[j]])) {
        values[pending[j]] = std::move(*value);
      } else {
        still_missing.push_back(pending[j]);
      }
    }
    pending = std::move(still_missing);
    if (pending.empty()) return values;
    if (deadline.expired()) {
      std::vector<std::string> missing;
      for (size_t i : pending) missing.push_back(keys[i]);
      store_detail::throw_key_timeout(impl_->name(), missing, timeout);
    }
    backoff.sleep(deadline);
  }
}

void RedisStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  if (keys.empty()) return;
  Deadline deadline = store_detail::deadline_after(timeout);
  std::vector<size_t> pending(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) pending[i] = i;
  Backoff backoff;
  while (true) {
    // One EXISTS per key, pipelined: EXISTS of many keys only returns a count,
    // and a timeout must name the missing ones.
    std::vector<Command> commands;
    for (size_t i : pending) commands.push_back({"EXISTS", impl_->full_key(keys[i])});
    auto replies = impl_->connection.round_trip(commands, Resend::safe, deadline);
    std::vector<size_t> still_missing;
    for (size_t j = 0; j < pending.size(); ++j) {
      if (replies[j]->type != REDIS_REPLY_INTEGER) impl_->unexpected(*replies[j], "EXISTS", keys[pending[j]]);
      if (replies[j]->integer == 0) still_missing.push_back(pending[j]);
    }
    pending = std::move(still_missing);
    if (pending.empty()) return;
    if (deadline.expired()) {
      std::vector<std::string> missing;
      for (size_t i : pending) missing.push_back(keys[i]);
      store_detail::throw_key_timeout(impl_->name(), missing, timeout);
    }
    backoff.sleep(deadline);
  }
}

int64_t RedisStore::add(const std::string& key, int64_t delta) {
  std::vector<Command> commands{{"INCRBY", impl_->full_key(key), std::to_string(delta)}};
  if (impl_->options.key_ttl.count() > 0) commands.push_back({"PEXPIRE", impl_->full_key(key), impl_->ttl_text()});
  // Not resent after a drop mid-flight: the first INCRBY may have counted.
  auto replies = impl_->connection.round_trip(commands, Resend::unsafe);
  const redisReply& sum = *replies[0];
  if (sum.type == REDIS_REPLY_ERROR) {
    // "value is not an integer" or "increment or decrement would overflow":
    // the caller's mistake, worded like the other stores' add().
    throw InvalidArgument(cat(impl_->name(), ": add of ", delta, " to key '", key, "' refused: ", reply_text(sum)));
  }
  if (sum.type != REDIS_REPLY_INTEGER) impl_->unexpected(sum, "INCRBY", key);
  return sum.integer;
}

bool RedisStore::remove(const std::string& key) {
  auto replies = impl_->connection.round_trip({{"DEL", impl_->full_key(key)}}, Resend::safe);
  if (replies[0]->type != REDIS_REPLY_INTEGER) impl_->unexpected(*replies[0], "DEL", key);
  return replies[0]->integer > 0;
}

size_t RedisStore::remove_namespace() {
  const std::string pattern = glob_escape(impl_->options.key_namespace + "/") + "*";
  size_t removed = 0;
  std::string cursor = "0";
  // SCAN walks the keyspace in slices without blocking the server (KEYS would).
  do {
    auto replies = impl_->connection.round_trip({{"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}}, Resend::safe);
    const redisReply& page = *replies[0];
    if (page.type != REDIS_REPLY_ARRAY || page.elements != 2 || page.element[0]->type != REDIS_REPLY_STRING ||
        page.element[1]->type != REDIS_REPLY_ARRAY) {
      impl_->unexpected(page, "SCAN", pattern);
    }
    cursor = reply_text(*page.element[0]);
    const redisReply& keys = *page.element[1];
    if (keys.elements == 0) continue;
    Command del{"DEL"};
    for (size_t i = 0; i < keys.elements; ++i) del.push_back(reply_text(*keys.element[i]));
    auto deleted = impl_->connection.round_trip({del}, Resend::safe);
    if (deleted[0]->type != REDIS_REPLY_INTEGER) impl_->unexpected(*deleted[0], "DEL", del[1]);
    removed += static_cast<size_t>(deleted[0]->integer);
  } while (cursor != "0");
  CHORUS_LOG(debug, -1, impl_->name(), ": removed ", removed, " keys under '", impl_->options.key_namespace, "/'");
  return removed;
}

}  // namespace chorus
