// The TcpStore wire format, shared by client and server. Little-endian, no
// padding. Every length is checked against the limits below before anything
// is allocated, so hostile bytes cost the sender its connection and nothing else.
//
//   request: u32 magic | u8 op | u32 key_count | key_count x (u32 key_len | key)
//            | u64 value_len | value
//   reply:   u32 magic | u8 status | u32 item_count | item_count x (u64 len | bytes)
//
// Replies by op (status ok): set -> no items; get -> one value per key;
// wait -> no items; add -> the new value as 8 bytes; remove -> 1 byte (existed).
// get/wait park on the server until every key exists. The client enforces its
// own timeout: when it expires it sends cancel, and the parked request is then
// answered with status timed_out listing the keys still missing (cancel itself
// is never answered). status error carries one item: the message.
//
// Before any request, the connection authenticates (base/job_secret.h):
//   server -> client: u32 auth magic | u16 version | 16-byte challenge
//   client -> server: u32 auth magic | 16-byte challenge | proof over the
//                     server's challenge and the client's first 20 bytes
//   server -> client: u32 auth magic | proof over both messages
// The server reads nothing else from a connection until its proof checks
// out, and the client sends nothing else until the server's does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/job_secret.h"

namespace chorus::tcp_store {

inline constexpr uint32_t kMagic = 0x54534843;  // "CHST" on the wire
inline constexpr size_t kMaxKeyBytes = 4096;
inline constexpr size_t kMaxValueBytes = size_t{64} << 20;
inline constexpr size_t kMaxKeysPerRequest = size_t{1} << 20;
inline constexpr size_t kMaxTotalKeyBytes = size_t{64} << 20;
inline constexpr size_t kReplyHeaderBytes = 9;

inline constexpr uint32_t kAuthMagic = 0x41534843;  // "CHSA"
// Version 2: the greeting's sixth byte says whether TLS follows the exchange.
inline constexpr uint8_t kAuthVersion = 2;
inline constexpr size_t kServerChallengeBytes = 6 + kChallengeBytes;
inline constexpr size_t kClientProofBytes = 4 + kChallengeBytes + kProofBytes;
inline constexpr size_t kServerProofBytes = 4 + kProofBytes;

// The greeting: magic u32 | version u8 | flags u8 (bit 0: a TLS handshake
// follows the exchange) | challenge. The flag lets a client without TLS (or
// with it, against a server without) fail at once with the reason, instead
// of seeing its requests dropped; it decides nothing on its own: each side
// speaks TLS only if its own configuration says so.
std::vector<std::byte> encode_server_challenge(const Challenge& challenge, bool tls = false);
// Why the bytes are not a server challenge (empty when they are).
std::string decode_server_challenge(std::span<const std::byte> bytes, Challenge& challenge, bool* tls = nullptr);
std::vector<std::byte> encode_client_proof(const Challenge& server_challenge, const Challenge& client_challenge,
                                           const JobSecret& secret);
// Why the client's message does not prove the secret over this challenge (empty when it does).
std::string check_client_proof(std::span<const std::byte> bytes, const Challenge& server_challenge,
                               const JobSecret& secret);
std::vector<std::byte> encode_server_proof(const Challenge& server_challenge, std::span<const std::byte> client_proof,
                                           const JobSecret& secret);
std::string check_server_proof(std::span<const std::byte> bytes, const Challenge& server_challenge,
                               std::span<const std::byte> client_proof, const JobSecret& secret);

enum class Op : uint8_t { set = 1, get = 2, wait = 3, add = 4, remove = 5, cancel = 6 };
enum class Status : uint8_t { ok = 0, timed_out = 1, error = 2 };

const char* op_name(Op op);

struct Request {
  Op op = Op::set;
  std::vector<std::string> keys;
  std::vector<std::byte> value;
};

// Throws InvalidArgument if the request breaks a limit (caller's bad input).
std::vector<std::byte> encode_request(Op op, const std::vector<std::string>& keys,
                                      std::span<const std::byte> value);

enum class ParseState { incomplete, complete, invalid };
struct ParseOutcome {
  ParseState state = ParseState::incomplete;
  size_t consumed = 0;   // bytes of the complete request
  std::string error;     // why it is invalid
};

// Parses one request from the front of `buffer`. Cheap to repeat as bytes
// arrive: it reads headers and keys, and only copies the value once complete.
ParseOutcome parse_request(std::span<const std::byte> buffer, Request& out);

// Appends a reply to `out`.
void append_reply(std::vector<std::byte>& out, Status status, const std::vector<std::span<const std::byte>>& items);

void put_u32(std::vector<std::byte>& out, uint32_t value);
void put_u64(std::vector<std::byte>& out, uint64_t value);
uint32_t get_u32(const std::byte* in);
uint64_t get_u64(const std::byte* in);

}  // namespace chorus::tcp_store
