// Encoding and validating TcpStore frames (format in tcp_store_protocol.h).
#include "rendezvous/tcp_store_protocol.h"

#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "rendezvous/tcp_store.h"

namespace chorus::tcp_store {

const char* op_name(Op op) {
  switch (op) {
    case Op::set: return "set";
    case Op::get: return "get";
    case Op::wait: return "wait";
    case Op::add: return "add";
    case Op::remove: return "remove";
    case Op::cancel: return "cancel";
  }
  return "unknown op";
}

void put_u32(std::vector<std::byte>& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>(value >> (8 * i)));
}

void put_u64(std::vector<std::byte>& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(value >> (8 * i)));
}

uint32_t get_u32(const std::byte* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= uint32_t(std::to_integer<uint8_t>(in[i])) << (8 * i);
  return value;
}

uint64_t get_u64(const std::byte* in) {
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t(std::to_integer<uint8_t>(in[i])) << (8 * i);
  return value;
}

namespace {

// How many keys and value bytes each op may carry.
struct Shape {
  size_t min_keys, max_keys;
  size_t min_value, max_value;
};

bool shape_of(uint8_t op, Shape& shape) {
  switch (static_cast<Op>(op)) {
    case Op::set: shape = {1, 1, 0, kMaxValueBytes}; return true;
    case Op::get:
    case Op::wait: shape = {0, kMaxKeysPerRequest, 0, 0}; return true;
    case Op::add: shape = {1, 1, 8, 8}; return true;
    case Op::remove: shape = {1, 1, 0, 0}; return true;
    case Op::cancel: shape = {0, 0, 0, 0}; return true;
  }
  return false;
}

}  // namespace

std::vector<std::byte> encode_request(Op op, const std::vector<std::string>& keys, std::span<const std::byte> value) {
  Shape shape{};
  shape_of(static_cast<uint8_t>(op), shape);
  if (keys.size() > shape.max_keys) {
    throw InvalidArgument(cat("TcpStore: ", op_name(op), " of ", keys.size(), " keys (at most ", shape.max_keys,
                              " per request)"));
  }
  if (value.size() > shape.max_value) {
    throw InvalidArgument(cat("TcpStore: value of ", value.size(), " bytes is too large (at most ", shape.max_value,
                              " bytes)"));
  }
  size_t total_keys = 0;
  for (const auto& key : keys) {
    if (key.size() > kMaxKeyBytes) {
      throw InvalidArgument(cat("TcpStore: key of ", key.size(), " bytes is too long (at most ", kMaxKeyBytes,
                                " bytes): '", key.substr(0, 64), "...'"));
    }
    total_keys += key.size();
  }
  if (total_keys > kMaxTotalKeyBytes) {
    throw InvalidArgument(cat("TcpStore: ", op_name(op), " of keys totalling ", total_keys, " bytes (at most ",
                              kMaxTotalKeyBytes, ")"));
  }
  std::vector<std::byte> out;
  out.reserve(4 + 1 + 4 + keys.size() * 4 + total_keys + 8 + value.size());
  put_u32(out, kMagic);
  out.push_back(static_cast<std::byte>(op));
  put_u32(out, static_cast<uint32_t>(keys.size()));
  for (const auto& key : keys) {
    put_u32(out, static_cast<uint32_t>(key.size()));
    const auto* bytes = reinterpret_cast<const std::byte*>(key.data());
    out.insert(out.end(), bytes, bytes + key.size());
  }
  put_u64(out, value.size());
  out.insert(out.end(), value.begin(), value.end());
  return out;
}

ParseOutcome parse_request(std::span<const std::byte> buffer, Request& out) {
  ParseOutcome outcome;
  auto invalid = [&](std::string why) {
    outcome.state = ParseState::invalid;
    outcome.error = std::move(why);
    return outcome;
  };
  size_t at = 0;
  auto have = [&](size_t bytes) { return buffer.size() - at >= bytes; };

  if (!have(4)) return outcome;
  uint32_t magic = get_u32(buffer.data());
  if (magic != kMagic) return invalid(cat("bad magic 0x", std::hex, magic, " (not a TcpStore client?)"));
  at = 4;
  if (!have(1)) return outcome;
  uint8_t op = std::to_integer<uint8_t>(buffer[at]);
  Shape shape{};
  if (!shape_of(op, shape)) return invalid(cat("unknown op ", unsigned(op)));
  at += 1;
  if (!have(4)) return outcome;
  size_t key_count = get_u32(buffer.data() + at);
  at += 4;
  if (key_count < shape.min_keys || key_count > shape.max_keys) {
    return invalid(cat(op_name(Op(op)), " with ", key_count, " keys"));
  }
  std::vector<std::pair<size_t, size_t>> key_spans;  // offset, length
  key_spans.reserve(std::min<size_t>(key_count, 1024));
  size_t total_keys = 0;
  for (size_t i = 0; i < key_count; ++i) {
    if (!have(4)) return outcome;
    size_t length = get_u32(buffer.data() + at);
    at += 4;
    if (length > kMaxKeyBytes) return invalid(cat("key of ", length, " bytes (limit ", kMaxKeyBytes, ")"));
    total_keys += length;
    if (total_keys > kMaxTotalKeyBytes) return invalid(cat("keys exceed ", kMaxTotalKeyBytes, " bytes"));
    if (!have(length)) return outcome;
    key_spans.emplace_back(at, length);
    at += length;
  }
  if (!have(8)) return outcome;
  uint64_t value_length = get_u64(buffer.data() + at);
  at += 8;
  if (value_length < shape.min_value || value_length > shape.max_value) {
    return invalid(cat(op_name(Op(op)), " with a value of ", value_length, " bytes"));
  }
  if (!have(value_length)) return outcome;

  out.op = static_cast<Op>(op);
  out.keys.clear();
  out.keys.reserve(key_count);
  for (auto [offset, length] : key_spans) out.keys.emplace_back(reinterpret_cast<const char*>(buffer.data() + offset), length);
  out.value.assign(buffer.begin() + static_cast<ptrdiff_t>(at), buffer.begin() + static_cast<ptrdiff_t>(at + value_length));
  outcome.state = ParseState::complete;
  outcome.consumed = at + value_length;
  return outcome;
}

void append_reply(std::vector<std::byte>& out, Status status, const std::vector<std::span<const std::byte>>& items) {
  size_t total = kReplyHeaderBytes;
  for (auto item : items) total += 8 + item.size();
  out.reserve(out.size() + total);
  put_u32(out, kMagic);
  out.push_back(static_cast<std::byte>(status));
  put_u32(out, static_cast<uint32_t>(items.size()));
  for (auto item : items) {
    put_u64(out, item.size());
    out.insert(out.end(), item.begin(), item.end());
  }
}

namespace {

constexpr std::string_view kClientPurpose = "chorus store client";
constexpr std::string_view kServerPurpose = "chorus store server";

std::string mismatch(const JobSecret& secret, const char* who) {
  return secret.configured() ? cat("the ", who, "'s proof does not match this job's secret (CHORUS_SECRET)")
                             : cat("the ", who, "'s proof does not match (it has a job secret, this side has none)");
}

}  // namespace

std::vector<std::byte> encode_server_challenge(const Challenge& challenge, bool tls) {
  std::vector<std::byte> out;
  put_u32(out, kAuthMagic);
  out.push_back(static_cast<std::byte>(kAuthVersion));
  out.push_back(static_cast<std::byte>(tls ? 1 : 0));
  out.insert(out.end(), challenge.begin(), challenge.end());
  return out;
}

std::string decode_server_challenge(std::span<const std::byte> bytes, Challenge& challenge, bool* tls) {
  if (bytes.size() != kServerChallengeBytes) return cat("a greeting of ", bytes.size(), " bytes");
  if (get_u32(bytes.data()) != kAuthMagic) return "not a chorus store greeting (bad magic)";
  const unsigned version = std::to_integer<unsigned>(bytes[4]);
  if (version != kAuthVersion)
    return cat("store protocol version ", version, ", this side speaks ", unsigned{kAuthVersion});
  const unsigned flags = std::to_integer<unsigned>(bytes[5]);
  if (flags > 1) return cat("unknown greeting flags 0x", std::hex, flags);
  if (tls) *tls = flags == 1;
  std::copy(bytes.begin() + 6, bytes.end(), challenge.begin());
  return "";
}

std::vector<std::byte> encode_client_proof(const Challenge& server_challenge, const Challenge& client_challenge,
                                           const JobSecret& secret) {
  std::vector<std::byte> out;
  put_u32(out, kAuthMagic);
  out.insert(out.end(), client_challenge.begin(), client_challenge.end());
  const Proof proof = secret.prove(kClientPurpose, {server_challenge, out});
  out.insert(out.end(), proof.begin(), proof.end());
  return out;
}

std::string check_client_proof(std::span<const std::byte> bytes, const Challenge& server_challenge,
                               const JobSecret& secret) {
  if (bytes.size() != kClientProofBytes) return cat("an authentication of ", bytes.size(), " bytes");
  if (get_u32(bytes.data()) != kAuthMagic) return "not a chorus store client (bad magic)";
  const size_t fields = 4 + kChallengeBytes;
  if (!secret.verify(bytes.subspan(fields), kClientPurpose, {server_challenge, bytes.first(fields)}))
    return mismatch(secret, "client");
  return "";
}

std::vector<std::byte> encode_server_proof(const Challenge& server_challenge, std::span<const std::byte> client_proof,
                                           const JobSecret& secret) {
  std::vector<std::byte> out;
  put_u32(out, kAuthMagic);
  const Proof proof = secret.prove(kServerPurpose, {server_challenge, client_proof});
  out.insert(out.end(), proof.begin(), proof.end());
  return out;
}

std::string check_server_proof(std::span<const std::byte> bytes, const Challenge& server_challenge,
                               std::span<const std::byte> client_proof, const JobSecret& secret) {
  if (bytes.size() != kServerProofBytes) return cat("an answer of ", bytes.size(), " bytes");
  if (get_u32(bytes.data()) != kAuthMagic) return "not a chorus store (bad magic)";
  if (!secret.verify(bytes.subspan(4), kServerPurpose, {server_challenge, client_proof}))
    return mismatch(secret, "server");
  return "";
}

}  // namespace chorus::tcp_store
