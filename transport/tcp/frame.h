// The TCP wire format: the header that precedes every message on an
// established connection (little-endian, base/little_endian.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/little_endian.h"

namespace chorus::transport::tcp {

inline constexpr uint32_t kFrameMagic = 0x46524843;  // "CHRF" on the wire
// 2: the header carries the tag's group (the Context a message belongs to).
// 3: the handshake proves the job secret (handshake.h).
// 4: the eager window's frames (announce, clear, announced_data, claimed).
inline constexpr uint16_t kWireVersion = 4;

enum class FrameKind : uint16_t {
  data = 1,     // a tagged user message; payload = the message
  abort = 2,    // the sender's device aborted; payload = the error text, tag = its class
  goodbye = 3,  // the sender is closing its context normally; no payload
  probe = 4,    // "are you alive, and where are you?" tag_value = the probe's number, tag_group = the
                // Context group it asks about; no payload
  probe_answer = 5,  // the receiving side's progress answers: tag_value and tag_group echoed,
                     // tag_signature = its position in that group (transport/positions.h)
  // The eager window (connection.h): a message the sender holds until the
  // receiver asks for it. tag = the message's; payload = kAnnouncementBytes:
  // its length and the sender's number for it, little-endian.
  announce = 6,
  clear = 7,           // the receiver's go-ahead: tag_value = the announcement's number; no payload
  announced_data = 8,  // the message, after its clear: tag_value = the announcement's number
  claimed = 9,         // tag_value = eager payload bytes this side's receives took from the peer, in total
};
inline constexpr size_t kAnnouncementBytes = 16;

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint16_t version = kWireVersion;
  FrameKind kind = FrameKind::data;
  uint64_t tag_value = 0;
  uint64_t tag_signature = 0;
  uint64_t payload_bytes = 0;
  uint64_t tag_group = 0;
};

inline constexpr size_t kFrameHeaderBytes = 40;
using EncodedHeader = std::array<std::byte, kFrameHeaderBytes>;

inline EncodedHeader encode_header(const FrameHeader& header) {
  EncodedHeader out;
  store_le(out.data() + 0, header.magic, 4);
  store_le(out.data() + 4, header.version, 2);
  store_le(out.data() + 6, static_cast<uint16_t>(header.kind), 2);
  store_le(out.data() + 8, header.tag_value, 8);
  store_le(out.data() + 16, header.tag_signature, 8);
  store_le(out.data() + 24, header.payload_bytes, 8);
  store_le(out.data() + 32, header.tag_group, 8);
  return out;
}

inline FrameHeader decode_header(const std::byte* in) {
  FrameHeader header;
  header.magic = static_cast<uint32_t>(load_le(in + 0, 4));
  header.version = static_cast<uint16_t>(load_le(in + 4, 2));
  header.kind = static_cast<FrameKind>(load_le(in + 6, 2));
  header.tag_value = load_le(in + 8, 8);
  header.tag_signature = load_le(in + 16, 8);
  header.payload_bytes = load_le(in + 24, 8);
  header.tag_group = load_le(in + 32, 8);
  return header;
}

inline bool is_known_kind(FrameKind kind) {
  return kind == FrameKind::data || kind == FrameKind::abort || kind == FrameKind::goodbye ||
         kind == FrameKind::probe || kind == FrameKind::probe_answer || kind == FrameKind::announce ||
         kind == FrameKind::clear || kind == FrameKind::announced_data || kind == FrameKind::claimed;
}


}  // namespace chorus::transport::tcp
