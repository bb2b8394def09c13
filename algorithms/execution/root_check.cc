// The root check's two messages and its verdict (root_check.h).
#include "algorithms/execution/root_check.h"

#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

namespace {

uint32_t decode(const std::array<std::byte, 4>& bytes) {
  uint32_t value = 0;
  for (size_t i = 0; i < bytes.size(); ++i) value |= static_cast<uint32_t>(bytes[i]) << (8 * i);
  return value;
}

}  // namespace

bool RootCheck::needed(const Call& call) {
  if (call.size < 2) return false;
  switch (call.collective) {
    case Collective::broadcast:
    case Collective::reduce:
    case Collective::gather:
    case Collective::scatter: return true;
    default: return false;
  }
}

transport::Tag RootCheck::check_tag(const Call& call, transport::Tag tag) {
  tag.value = (tag.value & ~uint64_t{0xffffffff}) | kRootCheckSlot;
  // Without the root, so that a neighbour naming another root is matched
  // and answered by verify's words (both roots, exactly) rather than the
  // signature's low byte; any other difference still fails the match.
  tag.signature = root_check_signature(call);
  // Four bytes from this frame: the send must not wait for a receive the
  // peer may never post (it may be in another call).
  tag.eager = true;
  return tag;
}

void RootCheck::post(const Communicator& communicator, const Call& call, transport::Tag tag,
                     transport::Request& send, transport::Request& recv) {
  communicator.pair(left(call)).post_recv(recv, check_tag(call, tag), theirs_, Memory::host());
  post_send(communicator, call, tag, send);
}

void RootCheck::post_send(const Communicator& communicator, const Call& call, transport::Tag tag,
                          transport::Request& send) {
  const auto root = static_cast<uint32_t>(call.root);
  for (size_t i = 0; i < mine_.size(); ++i) mine_[i] = static_cast<std::byte>((root >> (8 * i)) & 0xff);
  communicator.pair(right(call)).post_send(send, check_tag(call, tag), mine_, Memory::host());
}

void RootCheck::verify(const Call& call, uint32_t sequence) const {
  verify_bytes(name_of(call), call.rank, left(call), call.root, theirs_, sequence);
}

std::string RootCheck::name_of(const Call& call) {
  return cat(to_string(call.collective), call.variable() ? "v" : "");
}

void RootCheck::verify_bytes(std::string_view name, int rank, int left, int root,
                             const std::array<std::byte, 4>& theirs_bytes, uint32_t sequence) {
  const uint32_t theirs = decode(theirs_bytes);
  if (theirs == static_cast<uint32_t>(root)) return;
  throw MismatchError(cat("rank ", rank, ": ", name, " #", sequence, ": peer rank ", left, " names root ", theirs,
                          " but this rank names root ", root));
}

}  // namespace chorus::algorithms
