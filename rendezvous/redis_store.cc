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
#include "rendezvous/redis_replies.h"
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
  redis_detail::check_set(*replies[0], impl_->name(), key);
}

std::vector<std::byte> RedisStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  Deadline deadline = store_detail::deadline_after(timeout);
  Command command{"GET", impl_->full_key(key)};
  Backoff backoff;
  while (true) {
    auto replies = impl_->connection.round_trip({command}, Resend::safe, deadline);
    if (auto value = redis_detail::get_value(*replies[0], impl_->name(), key)) return std::move(*value);
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
    std::vector<std::string> asked;
    for (size_t i : pending) {
      command.push_back(impl_->full_key(keys[i]));
      asked.push_back(keys[i]);
    }
    auto replies = impl_->connection.round_trip({command}, Resend::safe, deadline);
    auto got = redis_detail::mget_values(*replies[0], impl_->name(), asked);
    std::vector<size_t> still_missing;
    for (size_t j = 0; j < pending.size(); ++j) {
      if (got[j]) {
        values[pending[j]] = std::move(*got[j]);
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
      if (!redis_detail::exists(*replies[j], impl_->name(), keys[pending[j]])) still_missing.push_back(pending[j]);
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
  // An error ("value is not an integer", "increment or decrement would
  // overflow") is the caller's mistake, worded like the other stores' add().
  return redis_detail::incrby_result(*replies[0], impl_->name(), key, delta);
}

bool RedisStore::remove(const std::string& key) {
  auto replies = impl_->connection.round_trip({{"DEL", impl_->full_key(key)}}, Resend::safe);
  return redis_detail::deleted(*replies[0], impl_->name(), key) > 0;
}

size_t RedisStore::remove_namespace() {
  const std::string pattern = glob_escape(impl_->options.key_namespace + "/") + "*";
  size_t removed = 0;
  std::string cursor = "0";
  // SCAN walks the keyspace in slices without blocking the server (KEYS would).
  do {
    auto replies = impl_->connection.round_trip({{"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}}, Resend::safe);
    redis_detail::ScanPage page = redis_detail::scan_page(*replies[0], impl_->name(), pattern);
    cursor = std::move(page.cursor);
    if (page.keys.empty()) continue;
    Command del{"DEL"};
    for (std::string& key : page.keys) del.push_back(std::move(key));
    auto deleted = impl_->connection.round_trip({del}, Resend::safe);
    removed += redis_detail::deleted(*deleted[0], impl_->name(), del[1]);
  } while (cursor != "0");
  CHORUS_LOG(debug, -1, impl_->name(), ": removed ", removed, " keys under '", impl_->options.key_namespace, "/'");
  return removed;
}

}  // namespace chorus
