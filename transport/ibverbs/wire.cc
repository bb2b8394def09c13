// Encoding of the verbs wire format (wire.h), little-endian throughout.
#include "transport/ibverbs/wire.h"

#include <cstring>

#include "base/little_endian.h"

namespace chorus::transport::ibverbs {
namespace {

constexpr uint32_t kRequestMagic = 0x52564243;  // "CBVR"
constexpr uint32_t kReplyMagic = 0x50564243;    // "CBVP"

}  // namespace

void encode_header(const MessageHeader& header, std::byte* out) {
  out[0] = static_cast<std::byte>(header.kind);
  out[1] = out[2] = out[3] = std::byte{0};
  store_le(out + 4, header.credits, 4);
  store_le(out + 8, header.a, 8);
  store_le(out + 16, header.b, 8);
  store_le(out + 24, header.c, 8);
  store_le(out + 32, header.d, 8);
  store_le(out + 40, header.e, 8);
}

std::optional<MessageHeader> decode_header(const std::byte* in) {
  const auto kind = static_cast<uint8_t>(in[0]);
  if (kind < static_cast<uint8_t>(MessageKind::proof) || kind > static_cast<uint8_t>(MessageKind::goodbye))
    return std::nullopt;
  if (in[1] != std::byte{0} || in[2] != std::byte{0} || in[3] != std::byte{0}) return std::nullopt;
  MessageHeader header;
  header.kind = static_cast<MessageKind>(kind);
  header.credits = static_cast<uint32_t>(load_le(in + 4, 4));
  header.a = load_le(in + 8, 8);
  header.b = load_le(in + 16, 8);
  header.c = load_le(in + 24, 8);
  header.d = load_le(in + 32, 8);
  header.e = load_le(in + 40, 8);
  return header;
}

void encode_request(const ConnectRequest& request, std::byte* out) {
  store_le(out + 0, kRequestMagic, 4);
  store_le(out + 4, request.version, 2);
  store_le(out + 6, request.stream, 2);
  store_le(out + 8, request.dialer_rank, 4);
  store_le(out + 12, request.acceptor_rank, 4);
  store_le(out + 16, request.acceptor_nonce, 8);
  std::memcpy(out + 24, request.challenge.data(), kChallengeBytes);
}

std::optional<ConnectRequest> decode_request(std::span<const std::byte> data) {
  // rdma_cm pads private data to its own minimum; the rest must be zero.
  if (data.size() < kConnectRequestBytes) return std::nullopt;
  for (size_t i = kConnectRequestBytes; i < data.size(); ++i)
    if (data[i] != std::byte{0}) return std::nullopt;
  const std::byte* in = data.data();
  if (load_le(in, 4) != kRequestMagic) return std::nullopt;
  ConnectRequest request;
  request.version = static_cast<uint16_t>(load_le(in + 4, 2));
  request.stream = static_cast<uint16_t>(load_le(in + 6, 2));
  request.dialer_rank = static_cast<uint32_t>(load_le(in + 8, 4));
  request.acceptor_rank = static_cast<uint32_t>(load_le(in + 12, 4));
  request.acceptor_nonce = load_le(in + 16, 8);
  std::memcpy(request.challenge.data(), in + 24, kChallengeBytes);
  return request;
}

void encode_reply(const ConnectReply& reply, std::byte* out) {
  store_le(out + 0, kReplyMagic, 4);
  store_le(out + 4, reply.version, 2);
  store_le(out + 6, 0, 2);
  std::memcpy(out + 8, reply.challenge.data(), kChallengeBytes);
}

std::optional<ConnectReply> decode_reply(std::span<const std::byte> data) {
  if (data.size() < kConnectReplyBytes) return std::nullopt;
  for (size_t i = kConnectReplyBytes; i < data.size(); ++i)
    if (data[i] != std::byte{0}) return std::nullopt;
  const std::byte* in = data.data();
  if (load_le(in, 4) != kReplyMagic || load_le(in + 6, 2) != 0) return std::nullopt;
  ConnectReply reply;
  reply.version = static_cast<uint16_t>(load_le(in + 4, 2));
  std::memcpy(reply.challenge.data(), in + 8, kChallengeBytes);
  return reply;
}

}  // namespace chorus::transport::ibverbs
