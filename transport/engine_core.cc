// The parts of EngineCore (engine_core.h) that need no template.
#include "transport/engine_core.h"

#include <ios>

#include "base/log.h"
#include "transport/peer_errors.h"

namespace chorus::transport {

std::string plain_signature(uint64_t signature) { return cat("signature 0x", std::hex, signature); }

std::exception_ptr CommonConnectionOwner::mismatch_error(int peer_rank, const Tag& theirs, uint64_t their_bytes,
                                                         const PostedReceive& receive) const {
  return transport::mismatch_error(rank(), peer_rank, describe_signature(theirs.signature),
                                   describe_signature(receive.tag.signature), receive.tag, their_bytes,
                                   receive.buffer.size());
}

}  // namespace chorus::transport
