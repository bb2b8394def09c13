// The verbs wire format: what the rdma_cm connection request and reply
// carry, and the header of every message sent into a receive slot.
//
// Every message but the last chunk of a large write is a send into one of
// the receiver's pre-posted slots: a 48-byte header, then (for eager data
// and abort texts) the payload. Its `credits` field returns slots the sender
// of the header has re-posted since it last said so. A large message's last
// RDMA write carries immediate data instead: the receiver's id of the
// receive it completes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "base/job_secret.h"

namespace chorus::transport::ibverbs {

// 1: the first version.
inline constexpr uint16_t kWireVersion = 1;

enum class MessageKind : uint8_t {
  proof = 1,        // a: unused; payload: the sender's HMAC proof (handshake)
  eager = 2,        // a group, b tag value, c signature, d bytes; payload: the data
  ready_to_send = 3,  // a group, b tag value, c signature, d bytes, e the sender's id of the send
  clear_to_send = 4,  // a the sender's send id, b address, c rkey, d bytes, e the receiver's receive id
  credit = 5,       // nothing but the credits
  probe = 6,        // a probe number, b group
  answer = 7,       // a probe number, b group, c position
  abort = 8,        // a error class, b blamed rank, d text bytes; payload: the text
  goodbye = 9,      // the sender closes its context in order
};

struct MessageHeader {
  MessageKind kind{};
  uint32_t credits = 0;
  uint64_t a = 0, b = 0, c = 0, d = 0, e = 0;
};
inline constexpr size_t kHeaderBytes = 48;

void encode_header(const MessageHeader& header, std::byte* out);
// Nullopt for an unknown kind.
std::optional<MessageHeader> decode_header(const std::byte* in);

// The connection request (dialer to acceptor), 40 bytes: which link it is,
// the nonce of the acceptor's published address (so a process that merely
// found the port is turned away before a queue pair is spent on it) and
// the dialer's challenge.
struct ConnectRequest {
  uint16_t version = kWireVersion;
  uint16_t stream = 0;
  uint32_t dialer_rank = 0;
  uint32_t acceptor_rank = 0;
  uint64_t acceptor_nonce = 0;
  Challenge challenge{};
};
inline constexpr size_t kConnectRequestBytes = 40;
void encode_request(const ConnectRequest& request, std::byte* out);
std::optional<ConnectRequest> decode_request(std::span<const std::byte> data);

// The acceptor's reply, 24 bytes: its challenge.
struct ConnectReply {
  uint16_t version = kWireVersion;
  Challenge challenge{};
};
inline constexpr size_t kConnectReplyBytes = 24;
void encode_reply(const ConnectReply& reply, std::byte* out);
std::optional<ConnectReply> decode_reply(std::span<const std::byte> data);

}  // namespace chorus::transport::ibverbs
