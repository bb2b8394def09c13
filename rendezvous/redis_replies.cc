// Reading Redis replies for RedisStore (see redis_replies.h).
#include "rendezvous/redis_replies.h"

#include <hiredis/hiredis.h>

#include <algorithm>

#include "base/error.h"
#include "base/log.h"

namespace chorus::redis_detail {
namespace {

std::vector<std::byte> as_bytes(const redisReply& reply) {
  std::vector<std::byte> value(reply.len);
  std::copy_n(reinterpret_cast<const std::byte*>(reply.str), reply.len, value.data());
  return value;
}

bool has_text(const redisReply& reply) {
  return reply.type == REDIS_REPLY_STRING || reply.type == REDIS_REPLY_STATUS || reply.type == REDIS_REPLY_ERROR;
}

}  // namespace

std::string reply_text(const redisReply& reply) {
  if (!has_text(reply) || reply.str == nullptr) return std::string();
  return std::string(reply.str, reply.len);
}

void unexpected_reply(const redisReply& reply, std::string_view store, std::string_view command,
                      std::string_view key) {
  std::string got = reply.type == REDIS_REPLY_ERROR ? "error '" + reply_text(reply) + "'"
                                                    : cat("a reply of type ", reply.type);
  throw IoError(cat(store, ": ", command, " of key '", key, "' got ", got));
}

void check_set(const redisReply& reply, std::string_view store, std::string_view key) {
  if (reply.type != REDIS_REPLY_STATUS) unexpected_reply(reply, store, "SET", key);
}

std::optional<std::vector<std::byte>> get_value(const redisReply& reply, std::string_view store,
                                                std::string_view key) {
  if (reply.type == REDIS_REPLY_NIL) return std::nullopt;
  if (reply.type != REDIS_REPLY_STRING) unexpected_reply(reply, store, "GET", key);
  return as_bytes(reply);
}

std::vector<std::optional<std::vector<std::byte>>> mget_values(const redisReply& reply, std::string_view store,
                                                               const std::vector<std::string>& keys) {
  const std::string_view first = keys.empty() ? std::string_view() : std::string_view(keys[0]);
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != keys.size()) unexpected_reply(reply, store, "MGET", first);
  std::vector<std::optional<std::vector<std::byte>>> values;
  values.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) values.push_back(get_value(*reply.element[i], store, keys[i]));
  return values;
}

bool exists(const redisReply& reply, std::string_view store, std::string_view key) {
  if (reply.type != REDIS_REPLY_INTEGER) unexpected_reply(reply, store, "EXISTS", key);
  return reply.integer != 0;
}

int64_t incrby_result(const redisReply& reply, std::string_view store, std::string_view key, int64_t delta) {
  if (reply.type == REDIS_REPLY_ERROR)
    throw InvalidArgument(cat(store, ": add of ", delta, " to key '", key, "' refused: ", reply_text(reply)));
  if (reply.type != REDIS_REPLY_INTEGER) unexpected_reply(reply, store, "INCRBY", key);
  return reply.integer;
}

size_t deleted(const redisReply& reply, std::string_view store, std::string_view key) {
  if (reply.type != REDIS_REPLY_INTEGER || reply.integer < 0) unexpected_reply(reply, store, "DEL", key);
  return static_cast<size_t>(reply.integer);
}

ScanPage scan_page(const redisReply& reply, std::string_view store, std::string_view pattern) {
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 2 || reply.element[0]->type != REDIS_REPLY_STRING ||
      reply.element[1]->type != REDIS_REPLY_ARRAY) {
    unexpected_reply(reply, store, "SCAN", pattern);
  }
  ScanPage page;
  page.cursor = reply_text(*reply.element[0]);
  const redisReply& keys = *reply.element[1];
  page.keys.reserve(keys.elements);
  for (size_t i = 0; i < keys.elements; ++i) {
    // Keys are strings; anything else is not a SCAN reply (and would be DELeted as "").
    if (keys.element[i]->type != REDIS_REPLY_STRING) unexpected_reply(reply, store, "SCAN", pattern);
    page.keys.push_back(reply_text(*keys.element[i]));
  }
  return page;
}

}  // namespace chorus::redis_detail
