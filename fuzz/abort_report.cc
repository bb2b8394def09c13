// Abort reports: what a peer tells this rank when it aborts (its error
// class, the rank it blames, its text), adopted as our own error
// (transport/abort_report.cc), and the two ways they travel: the TCP abort
// frame (transport/tcp/abort_frame.cc), the shared-memory side channel's
// abort message (transport/shm/side_channel.cc), and the abort record's
// entry in the store (transport/abort_record.cc; the raw input decoded as one too).
//
// Input: error class u64 | blamed rank u64 | my rank u8 | peer rank u8 |
// repeat u8 | text (the rest, repeated `repeat` + 1 times, so texts pass the
// 64 KiB limit).
// Checks: the adopted error is of the class the peer named (Aborted for
// classes we do not know) and says who aborted and why; an IoError blames a
// real rank (0 or more, never this one); reporting the adopted error again
// gives the same class, and its abort frame and side-channel message decode
// to the same report.
#include <climits>
#include <optional>
#include <span>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz/fuzz_common.h"
#include "transport/abort_record.h"
#include "transport/abort_report.h"
#include "transport/tcp/frame.h"
#include "transport/shm/side_channel.h"
#include "transport/tcp/abort_frame.h"

using namespace chorus;
using namespace chorus::fuzz;
using namespace chorus::transport;

namespace {

const char* expected_kind(uint64_t error_class) {
  switch (error_class) {
    case 1: return "IoError";
    case 2: return "TimeoutError";
    case 3: return "InvalidArgument";
    case 4: return "MismatchError";
    case 6: return "IoError";  // PeerLostError, an IoError
    default: return "Aborted";
  }
}

uint64_t field(const std::vector<std::byte>& bytes, size_t offset, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) value |= std::to_integer<uint64_t>(bytes[offset + i]) << (8 * i);
  return value;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  const uint64_t error_class = in.u64();
  const uint64_t blamed = in.u64();
  const int my_rank = in.u8();
  const int peer_rank = in.u8();
  const size_t repeat = in.u8() + 1u;
  const std::string piece = in.text(in.left());
  std::string text;
  for (size_t i = 0; i < repeat && text.size() <= kMaxAbortTextBytes + 8; ++i) text += piece;
  if (my_rank == peer_rank) return 0;

  const std::exception_ptr adopted = adopt_abort(error_class, blamed, text, my_rank, peer_rank);
  const std::string kind = chorus_error_kind(adopted, "adopt_abort");
  FUZZ_CHECK(kind == expected_kind(error_class), cat("class ", error_class, " was adopted as ", kind));
  const std::string message = error_text(adopted);
  // what() is a C string: the text shows up to its first NUL.
  const std::string visible = text.substr(0, text.find('\0'));
  // The message is "rank M: peer rank P aborted: S" or, for a report relayed
  // through P from rank F, "rank M: peer rank F aborted (relayed by rank P):
  // S", where S is the peer's text less whole hop prefixes ("rank A: peer
  // rank B aborted: ", with or without "(relayed by rank C)"): nothing is
  // invented, and only those prefixes are dropped.
  const std::string direct = cat("rank ", my_rank, ": peer rank ", peer_rank, " aborted: ");
  std::string suffix;
  if (message.rfind(direct, 0) == 0) {
    suffix = message.substr(direct.size());
  } else {
    const std::string head = cat("rank ", my_rank, ": peer rank ");
    const std::string relay = cat(" aborted (relayed by rank ", peer_rank, "): ");
    const size_t at = message.find(relay);
    FUZZ_CHECK(message.rfind(head, 0) == 0 && at != std::string::npos, "the adopted error names neither form");
    const std::string first = message.substr(head.size(), at - head.size());
    suffix = message.substr(at + relay.size());
    // The text starts with "rank N: " for that N (leading zeros allowed: "rank 007: ").
    const size_t digits_end = suffix.find_first_not_of("0123456789", 5);
    const bool starts = suffix.rfind("rank ", 0) == 0 && digits_end != std::string::npos && digits_end > 5 &&
                        digits_end - 5 <= 9 && suffix.compare(digits_end, 2, ": ") == 0 &&
                        first.size() <= 10 && std::stol(suffix.substr(5, digits_end - 5)) == std::stol(first);
    FUZZ_CHECK(starts && first != std::to_string(peer_rank) && first != std::to_string(my_rank),
               "a relayed report names a rank its text does not start with");
  }
  FUZZ_CHECK(suffix.size() <= visible.size() && visible.compare(visible.size() - suffix.size(), suffix.size(), suffix) == 0,
             "the adopted error's text is not the peer's");
  std::string_view dropped(visible.data(), visible.size() - suffix.size());
  auto take = [&](std::string_view expected) {
    if (dropped.substr(0, expected.size()) != expected) return false;
    dropped.remove_prefix(expected.size());
    return true;
  };
  auto take_number = [&] {
    size_t digits = 0;
    while (digits < dropped.size() && dropped[digits] >= '0' && dropped[digits] <= '9') ++digits;
    dropped.remove_prefix(digits);
    return digits > 0;
  };
  while (!dropped.empty()) {
    const bool hop = take("rank ") && take_number() && take(": peer rank ") && take_number() &&
                     (take(" aborted: ") || (take(" aborted (relayed by rank ") && take_number() && take("): ")));
    FUZZ_CHECK(hop, "more than whole hop prefixes were dropped from the peer's text");
  }

  int blamed_rank = -1;
  try {
    std::rethrow_exception(adopted);
  } catch (const IoError& error) {
    blamed_rank = error.peer_rank();
    FUZZ_CHECK(blamed_rank >= 0 && blamed_rank != my_rank,
               cat("an adopted IoError blames rank ", blamed_rank, " (blamed ", blamed, ", this rank ", my_rank, ")"));
    if (blamed <= static_cast<uint64_t>(INT_MAX) && static_cast<int>(blamed) != my_rank)
      FUZZ_CHECK(blamed_rank == static_cast<int>(blamed), "the peer's blamed rank was not kept");
  } catch (...) {
  }

  // Reported again (this rank aborting in turn): the same class and text.
  const AbortReport report = report_abort(adopted);
  // A lost peer the report does not name (or names as this rank) comes back
  // as a plain IoError blaming the sender: class 1 then.
  bool lost = false;
  try {
    std::rethrow_exception(adopted);
  } catch (const PeerLostError&) {
    lost = true;
  } catch (...) {
  }
  const uint64_t reported_class =
      error_class == 6 ? (lost ? 6 : 1) : error_class >= 1 && error_class <= 5 ? error_class : 5;
  FUZZ_CHECK(report.error_class == reported_class, "report_abort changed the class");
  FUZZ_CHECK(report.text.size() <= kMaxAbortTextBytes, "a report longer than the limit");
  FUZZ_CHECK(report.text == message.substr(0, kMaxAbortTextBytes), "report_abort changed the text");
  if (blamed_rank >= 0) FUZZ_CHECK(report.blamed_rank == static_cast<uint64_t>(blamed_rank), "lost the blamed rank");

  // The TCP abort frame, read by hand.
  const std::vector<std::byte> frame = tcp::encode_abort_frame(adopted);
  FUZZ_CHECK(frame.size() == 40 + report.text.size(), "an abort frame of the wrong length");
  FUZZ_CHECK(field(frame, 0, 4) == 0x46524843 && field(frame, 4, 2) == transport::tcp::kWireVersion &&
                 field(frame, 6, 2) == 2,
             "an abort frame's header is not one");
  FUZZ_CHECK(field(frame, 8, 8) == report.error_class && field(frame, 16, 8) == report.blamed_rank &&
                 field(frame, 24, 8) == report.text.size(),
             "an abort frame's header does not carry the report");
  FUZZ_CHECK(std::memcmp(frame.data() + 40, report.text.data(), report.text.size()) == 0,
             "an abort frame's payload is not the report's text");

  // The shared-memory side channel's abort message.
  shm::AbortNote note{report.error_class, report.blamed_rank, report.text};
  const std::vector<std::byte> message_bytes = shm::encode_abort(note);
  shm::SideKind side_kind{};
  FUZZ_CHECK(shm::check_side_message(message_bytes, side_kind).empty() && side_kind == shm::SideKind::abort,
             "an encoded abort message is not accepted as one");
  shm::AbortNote decoded;
  FUZZ_CHECK(shm::decode_abort(message_bytes, decoded).empty(), "an encoded abort message does not decode");
  FUZZ_CHECK(decoded.error_class == note.error_class && decoded.blamed_rank == note.blamed_rank &&
                 decoded.text == note.text,
             "an abort message does not survive the side channel's encoding");

  // The abort record's bytes (transport/abort_record.h): the report survives
  // them, and the raw input read as an abort-record entry decodes only within limits.
  const std::optional<AbortReport> recorded = decode_abort_report(encode_abort_report(report));
  FUZZ_CHECK(recorded && recorded->error_class == report.error_class && recorded->blamed_rank == report.blamed_rank &&
                 recorded->text == report.text,
             "a report does not survive the abort record's encoding");
  const std::span<const std::byte> raw(reinterpret_cast<const std::byte*>(data), size);
  const std::optional<AbortReport> read = decode_abort_report(raw);
  FUZZ_CHECK(read.has_value() == (size >= 16 && size - 16 <= kMaxAbortTextBytes),
             "the abort-record decoder accepted a malformed entry or refused a well-formed one");
  if (read) FUZZ_CHECK(read->text.size() == size - 16, "the abort-record decoder lost bytes of the text");
  return 0;
}
