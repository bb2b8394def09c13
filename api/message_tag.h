// The transport tag of a point-to-point message (chorus/point_to_point.h),
// shared by send/recv and the receive from any peer so both ends of one
// message describe it alike. Internal (not installed).
//
// Point-to-point tags live apart from the collectives': a collective's tag
// is (31-bit wrapping sequence << 32 | slot) and a point-to-point tag is
// (top bit | user tag), so a message from one never matches a receive of
// the other. The signature describes count, type and memory, so a receive
// of another size or type fails with MismatchError rather than landing bytes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/model/call.h"
#include "base/memory.h"
#include "base/types.h"
#include "transport/transport.h"

namespace chorus::detail {

inline transport::Tag point_to_point_tag(size_t count, DataType type, Memory memory, uint32_t user_tag,
                                         uint64_t group, bool sending) {
  constexpr uint64_t point_to_point_tag_bit = uint64_t{1} << 63;
  // Collective::send on both sides: the signature must be identical for
  // the sender and the receiver of one message.
  algorithms::Call call;
  call.collective = algorithms::Collective::send;
  call.count = count;
  call.type = type;
  // Both ends must move the same kind of memory (a device message is a
  // descriptor or chunks, a host one its bytes): a mismatch fails.
  call.memory = memory;
  // A send finishes once the transport holds the data, received or not:
  // eager, so a blocking send never waits for the peer's recv.
  return {point_to_point_tag_bit | user_tag, algorithms::call_signature(call), group, sending};
}

}  // namespace chorus::detail
