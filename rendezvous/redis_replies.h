// What RedisStore makes of each reply (rendezvous/redis_store.cc): one
// function per command, taking the reply hiredis parsed from the server's
// bytes. A reply that command never gives (an error reply, another type, the
// wrong number of elements: something else writes under our keys, or the
// server is not Redis) is an IoError naming the store, the command and the
// key. Apart from RedisStore, fuzz/redis_reply.cc calls them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct redisReply;

namespace chorus::redis_detail {

// The text of a string, status or error reply ("" for the other types).
std::string reply_text(const redisReply& reply);

// IoError "<store>: <command> of key '<key>' got <what the reply is>".
[[noreturn]] void unexpected_reply(const redisReply& reply, std::string_view store, std::string_view command,
                                   std::string_view key);

// SET: a status reply.
void check_set(const redisReply& reply, std::string_view store, std::string_view key);
// GET: the value, or nullopt when the key is missing (a nil reply).
std::optional<std::vector<std::byte>> get_value(const redisReply& reply, std::string_view store,
                                                std::string_view key);
// MGET of keys.size() keys: one value (or nullopt) per key, in order.
std::vector<std::optional<std::vector<std::byte>>> mget_values(const redisReply& reply, std::string_view store,
                                                               const std::vector<std::string>& keys);
// EXISTS: whether the key exists.
bool exists(const redisReply& reply, std::string_view store, std::string_view key);
// INCRBY: the new value; an error reply ("not an integer", "would overflow")
// is the caller's mistake, InvalidArgument naming the delta.
int64_t incrby_result(const redisReply& reply, std::string_view store, std::string_view key, int64_t delta);
// DEL: how many of the keys existed.
size_t deleted(const redisReply& reply, std::string_view store, std::string_view key);

// SCAN: the next cursor ("0" when done) and the keys of this page.
struct ScanPage {
  std::string cursor;
  std::vector<std::string> keys;
};
ScanPage scan_page(const redisReply& reply, std::string_view store, std::string_view pattern);

}  // namespace chorus::redis_detail
