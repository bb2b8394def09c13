// Redis replies: the input is what a server sent (RESP), turned into replies
// by hiredis's reader exactly as RedisConnection's context does, then read
// by each of RedisStore's reply functions (rendezvous/redis_replies.cc).
//
// Checks, for every reply and every function: it either returns what the
// reply says (GET: a string's bytes or nothing for nil; MGET: one of those
// per key, for an array of as many; EXISTS, DEL: an integer's meaning;
// INCRBY: the integer; SCAN: the cursor and the string keys of a two-element
// array) or throws IoError, and InvalidArgument only for INCRBY's error
// replies: never anything else, whatever the reply's type and shape.
//
// hiredis allocates an array's element pointers when it reads the count, so
// a count of billions asks calloc for gigabytes before any element arrives:
// hiredis's behaviour, not ours. This harness lets such a calloc fail
// (allocator_may_return_null, below) and hiredis then reports "out of
// memory"; scripts/fuzz.sh runs it with a malloc limit above those sizes.
#include <hiredis/hiredis.h>

#include <cstring>

#include "fuzz/fuzz_common.h"
#include "rendezvous/redis_replies.h"

using namespace chorus;
using namespace chorus::fuzz;
using namespace chorus::redis_detail;

extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

namespace {

const std::string kStore = "RedisStore fuzz:6379";

bool is_io_error(const std::string& kind) { return kind == "IoError"; }

bool string_bytes_equal(const std::vector<std::byte>& value, const redisReply& reply) {
  return value.size() == reply.len && (reply.len == 0 || std::memcmp(value.data(), reply.str, reply.len) == 0);
}

void check(const redisReply& reply) {
  // GET
  {
    std::optional<std::vector<std::byte>> value;
    const std::string kind = run_expecting_chorus_errors("get_value", [&] { value = get_value(reply, kStore, "k"); });
    if (reply.type == REDIS_REPLY_NIL) FUZZ_CHECK(kind.empty() && !value, "GET of nil is not 'missing'");
    else if (reply.type == REDIS_REPLY_STRING) FUZZ_CHECK(kind.empty() && value && string_bytes_equal(*value, reply), "GET lost the string");
    else FUZZ_CHECK(is_io_error(kind), "GET accepted a reply of type " + std::to_string(reply.type));
  }
  // MGET, asking for as many keys as the array has (and one more).
  for (size_t extra = 0; extra < 2; ++extra) {
    const size_t count = (reply.type == REDIS_REPLY_ARRAY ? reply.elements : 1) + extra;
    if (count > 4096) break;
    std::vector<std::string> keys(count, "k");
    std::vector<std::optional<std::vector<std::byte>>> values;
    const std::string kind = run_expecting_chorus_errors("mget_values", [&] { values = mget_values(reply, kStore, keys); });
    bool sound = reply.type == REDIS_REPLY_ARRAY && reply.elements == count;
    for (size_t i = 0; sound && i < reply.elements; ++i)
      sound = reply.element[i]->type == REDIS_REPLY_NIL || reply.element[i]->type == REDIS_REPLY_STRING;
    if (!sound) {
      FUZZ_CHECK(is_io_error(kind), "MGET accepted a reply that is not an array of strings and nils of its keys");
      continue;
    }
    FUZZ_CHECK(kind.empty() && values.size() == count, "MGET refused a sound reply");
    for (size_t i = 0; i < count; ++i) {
      const redisReply& element = *reply.element[i];
      if (element.type == REDIS_REPLY_NIL) FUZZ_CHECK(!values[i], "MGET: nil is not 'missing'");
      else FUZZ_CHECK(values[i] && string_bytes_equal(*values[i], element), "MGET lost a string");
    }
  }
  // EXISTS, DEL
  {
    bool present = false;
    const std::string kind = run_expecting_chorus_errors("exists", [&] { present = exists(reply, kStore, "k"); });
    if (reply.type == REDIS_REPLY_INTEGER) FUZZ_CHECK(kind.empty() && present == (reply.integer != 0), "EXISTS misread");
    else FUZZ_CHECK(is_io_error(kind), "EXISTS accepted a non-integer");
  }
  {
    size_t count = 0;
    const std::string kind = run_expecting_chorus_errors("deleted", [&] { count = deleted(reply, kStore, "k"); });
    if (reply.type == REDIS_REPLY_INTEGER && reply.integer >= 0)
      FUZZ_CHECK(kind.empty() && count == static_cast<size_t>(reply.integer), "DEL misread");
    else FUZZ_CHECK(is_io_error(kind), "DEL accepted a reply that is no count");
  }
  // INCRBY
  {
    int64_t sum = 0;
    const std::string kind = run_expecting_chorus_errors("incrby_result", [&] { sum = incrby_result(reply, kStore, "k", 5); });
    if (reply.type == REDIS_REPLY_INTEGER) FUZZ_CHECK(kind.empty() && sum == reply.integer, "INCRBY misread");
    else if (reply.type == REDIS_REPLY_ERROR) FUZZ_CHECK(kind == "InvalidArgument", "INCRBY's error is not the caller's");
    else FUZZ_CHECK(is_io_error(kind), "INCRBY accepted a non-integer");
  }
  // SET
  {
    const std::string kind = run_expecting_chorus_errors("check_set", [&] { check_set(reply, kStore, "k"); });
    FUZZ_CHECK(kind.empty() == (reply.type == REDIS_REPLY_STATUS), "SET misread");
    if (!kind.empty()) FUZZ_CHECK(is_io_error(kind), "SET refused with " + kind);
  }
  // SCAN
  {
    ScanPage page;
    const std::string kind = run_expecting_chorus_errors("scan_page", [&] { page = scan_page(reply, kStore, "ns/*"); });
    bool sound = reply.type == REDIS_REPLY_ARRAY && reply.elements == 2 && reply.element[0]->type == REDIS_REPLY_STRING &&
                 reply.element[1]->type == REDIS_REPLY_ARRAY;
    for (size_t i = 0; sound && i < reply.element[1]->elements; ++i)
      sound = reply.element[1]->element[i]->type == REDIS_REPLY_STRING;
    if (!sound) {
      FUZZ_CHECK(is_io_error(kind), "SCAN accepted a reply that is not a cursor and a list of keys");
    } else {
      FUZZ_CHECK(kind.empty(), "SCAN refused a sound reply");
      FUZZ_CHECK(page.cursor == std::string(reply.element[0]->str, reply.element[0]->len), "SCAN misread the cursor");
      FUZZ_CHECK(page.keys.size() == reply.element[1]->elements, "SCAN lost keys");
      for (size_t i = 0; i < page.keys.size(); ++i) {
        const redisReply& key = *reply.element[1]->element[i];
        FUZZ_CHECK(page.keys[i] == std::string(key.str, key.len), "SCAN misread a key");
      }
    }
  }
  // The error text of any reply (what RedisConnection reports for AUTH and SELECT).
  const std::string text = reply_text(reply);
  if (reply.type == REDIS_REPLY_STRING || reply.type == REDIS_REPLY_STATUS || reply.type == REDIS_REPLY_ERROR)
    FUZZ_CHECK(text == std::string(reply.str, reply.len), "reply_text lost the text");
  else
    FUZZ_CHECK(text.empty(), "reply_text of a reply without text");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  redisReader* reader = redisReaderCreate();
  if (!reader) return 0;
  // Fed in two parts, as replies arrive over a socket.
  const size_t half = size / 2;
  bool second_part_fed = false;
  if (redisReaderFeed(reader, reinterpret_cast<const char*>(data), half) != REDIS_OK) {
    redisReaderFree(reader);
    return 0;
  }
  while (true) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader, &raw) != REDIS_OK) break;  // a protocol error: the connection is dropped
    if (raw == nullptr) {
      if (second_part_fed) break;
      second_part_fed = true;
      if (redisReaderFeed(reader, reinterpret_cast<const char*>(data) + half, size - half) != REDIS_OK) break;
      continue;
    }
    check(*static_cast<redisReply*>(raw));
    freeReplyObject(raw);
  }
  redisReaderFree(reader);
  return 0;
}
