// The parts of EngineCore (engine_core.h) that need no template.
#include "transport/engine_core.h"

#include <ios>

#include "base/error.h"
#include "base/log.h"
#include "transport/peer_errors.h"

namespace chorus::transport {

std::string plain_signature(uint64_t signature) { return cat("signature 0x", std::hex, signature); }

std::exception_ptr abort_reason(int rank, std::exception_ptr reason) {
  return reason ? reason : std::make_exception_ptr(Aborted(cat("rank ", rank, ": aborted")));
}

void log_abort(int rank, std::string_view transport, const std::exception_ptr& reason, LogLevel level) {
  if (!log_enabled(level)) return;
  try {
    std::rethrow_exception(reason);
  } catch (const std::exception& error) {
    log_line(level, rank, cat(transport, ": transport aborted: ", error.what()));
  } catch (...) {
  }
}

std::exception_ptr destroyed_error(int rank, size_t pending) {
  if (pending == 0) return std::make_exception_ptr(Aborted(cat("rank ", rank, ": the transport device was destroyed")));
  return std::make_exception_ptr(Aborted(
      cat("rank ", rank, ": the transport device was destroyed while ", pending, " requests were pending")));
}

std::exception_ptr CommonConnectionOwner::mismatch_error(int peer_rank, const Tag& theirs, uint64_t their_bytes,
                                                         const PostedReceive& receive) const {
  return transport::mismatch_error(rank(), peer_rank, describe_signature(theirs.signature),
                                   describe_signature(receive.tag.signature), receive.tag, their_bytes,
                                   receive.buffer.size());
}

}  // namespace chorus::transport
