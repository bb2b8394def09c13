// Encoding of an error into an abort frame and back into an exception.
#include "transport/tcp/abort_frame.h"

#include <cstring>
#include <string>

#include "base/error.h"
#include "base/log.h"
#include "transport/tcp/frame.h"

namespace chorus::transport::tcp {
namespace {

enum class ErrorClass : uint64_t { other = 0, io = 1, timeout = 2, invalid_argument = 3, mismatch = 4, aborted = 5 };

constexpr uint64_t kNoBlamedRank = ~uint64_t{0};

}  // namespace

std::vector<std::byte> encode_abort_frame(std::exception_ptr error) {
  ErrorClass kind = ErrorClass::other;
  uint64_t blamed = kNoBlamedRank;
  std::string text = "unknown error";
  try {
    if (error) std::rethrow_exception(error);
  } catch (const IoError& e) {
    kind = ErrorClass::io;
    if (e.peer_rank() >= 0) blamed = static_cast<uint64_t>(e.peer_rank());
    text = e.what();
  } catch (const TimeoutError& e) {
    kind = ErrorClass::timeout;
    text = e.what();
  } catch (const InvalidArgument& e) {
    kind = ErrorClass::invalid_argument;
    text = e.what();
  } catch (const MismatchError& e) {
    kind = ErrorClass::mismatch;
    text = e.what();
  } catch (const Aborted& e) {
    kind = ErrorClass::aborted;
    text = e.what();
  } catch (const std::exception& e) {
    text = e.what();
  } catch (...) {
  }
  if (text.size() > kMaxAbortTextBytes) text.resize(kMaxAbortTextBytes);
  FrameHeader header;
  header.kind = FrameKind::abort;
  header.tag_value = static_cast<uint64_t>(kind);
  header.tag_signature = blamed;
  header.payload_bytes = text.size();
  EncodedHeader encoded = encode_header(header);
  std::vector<std::byte> frame(kFrameHeaderBytes + text.size());
  std::memcpy(frame.data(), encoded.data(), kFrameHeaderBytes);
  if (!text.empty()) std::memcpy(frame.data() + kFrameHeaderBytes, text.data(), text.size());
  return frame;
}

std::exception_ptr decode_abort(uint64_t error_class, uint64_t blamed_rank, std::string_view text,
                                int my_rank, int peer_rank) {
  std::string message = cat("rank ", my_rank, ": peer rank ", peer_rank, " aborted: ", text);
  switch (static_cast<ErrorClass>(error_class)) {
    case ErrorClass::io: {
      int blamed = blamed_rank == kNoBlamedRank ? peer_rank : static_cast<int>(blamed_rank);
      if (blamed == my_rank) blamed = peer_rank;  // we cannot be our own dead peer
      return std::make_exception_ptr(IoError(message, blamed));
    }
    case ErrorClass::timeout: return std::make_exception_ptr(TimeoutError(message));
    case ErrorClass::invalid_argument: return std::make_exception_ptr(InvalidArgument(message));
    case ErrorClass::mismatch: return std::make_exception_ptr(MismatchError(message));
    case ErrorClass::aborted: return std::make_exception_ptr(Aborted(message));
    default: return std::make_exception_ptr(Aborted(message));
  }
}

}  // namespace chorus::transport::tcp
