// The shared wording of peer errors (peer_errors.h).
#include "transport/peer_errors.h"

#include "base/error.h"
#include "base/log.h"

namespace chorus::transport {

std::exception_ptr mismatch_error(int rank, int peer_rank, const std::string& theirs, const std::string& mine,
                                  const Tag& tag, uint64_t their_bytes, size_t my_bytes) {
  // The same call, another length: a message cut into pieces (staged device
  // memory) or a transport of another build. Say only what differs.
  if (theirs == mine)
    return std::make_exception_ptr(MismatchError(cat("rank ", rank, ": peer rank ", peer_rank, " sent ", their_bytes,
                                                     " bytes for ", describe_tag(tag.group, tag.value), " (", mine,
                                                     ") but this rank expected ", my_bytes)));
  return std::make_exception_ptr(MismatchError(cat("rank ", rank, ": peer rank ", peer_rank, " sent ", theirs,
                                                   " but this rank expected ", mine, ", for ",
                                                   describe_tag(tag.group, tag.value), " (a message of ", their_bytes,
                                                   " bytes; this rank expected ", my_bytes, ")")));
}

std::exception_ptr unexpected_limit_error(int rank, int peer_rank, const std::string& peer_label, const Tag& tag,
                                          uint64_t bytes, size_t buffered, size_t limit) {
  return std::make_exception_ptr(
      IoError(cat("rank ", rank, ": ", peer_label, " sent a message of ", bytes, " bytes (",
                  describe_tag(tag.group, tag.value), ") that no receive was posted for, with ", buffered,
                  " bytes of such messages from it buffered already: more than the limit of ", limit,
                  " bytes (CHORUS_MAX_UNEXPECTED_BYTES). Post receives before peers send this much, or raise the limit"),
              peer_rank));
}

std::exception_ptr closed_context_error(int rank, int peer_rank, const std::string& detail) {
  return std::make_exception_ptr(
      IoError(cat("rank ", rank, ": peer rank ", peer_rank, " closed its context", detail), peer_rank));
}

LogLevel receive_failure_level(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const MismatchError&) {
    return LogLevel::warn;
  } catch (...) {
    return LogLevel::debug;
  }
}

}  // namespace chorus::transport
