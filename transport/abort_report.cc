// Errors to abort reports and back.
#include "transport/abort_report.h"

#include <climits>
#include <limits>

#include "base/error.h"
#include "base/log.h"

namespace chorus::transport {
namespace {

enum class ErrorClass : uint64_t {
  other = 0, io = 1, timeout = 2, invalid_argument = 3, mismatch = 4, aborted = 5, peer_lost = 6,
};

constexpr uint64_t kNoBlamedRank = ~uint64_t{0};

bool consume(std::string_view& text, std::string_view prefix) {
  if (text.substr(0, prefix.size()) != prefix) return false;
  text.remove_prefix(prefix.size());
  return true;
}

bool consume_number(std::string_view& text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  text.remove_prefix(digits);
  return digits > 0;
}

// A report relayed from rank to rank arrives as "rank 2: peer rank 1 aborted:
// rank 1: peer rank 0 aborted: rank 0: <what happened>" (or, relayed by a
// rank that used this format, "rank 2: peer rank 0 aborted (relayed by rank
// 1): rank 0: ..."). Each hop's prefix is dropped: what is left is the
// origin's own words, which start with its rank.
std::string_view origin_of(std::string_view text) {
  for (;;) {
    std::string_view rest = text;
    if (!consume(rest, "rank ") || !consume_number(rest) || !consume(rest, ": peer rank ") || !consume_number(rest))
      return text;
    if (consume(rest, " aborted (relayed by rank ")) {
      if (!consume_number(rest) || !consume(rest, "): ")) return text;
    } else if (!consume(rest, " aborted: ")) {
      return text;
    }
    text = rest;
  }
}

// The rank whose words `origin` are ("rank 3: timed out ..." -> 3), or -1.
long origin_rank(std::string_view origin) {
  std::string_view rest = origin;
  if (!consume(rest, "rank ")) return -1;
  const std::string_view digits = rest.substr(0, rest.find_first_not_of("0123456789"));
  if (digits.empty() || digits.size() > 9 || rest.substr(digits.size(), 2) != ": ") return -1;
  return std::stol(std::string(digits));
}

}  // namespace

AbortReport report_abort(std::exception_ptr error) {
  ErrorClass kind = ErrorClass::other;
  AbortReport report;
  report.text = "unknown error";
  try {
    if (error) std::rethrow_exception(error);
  } catch (const PeerLostError& e) {
    kind = ErrorClass::peer_lost;
    if (e.peer_rank() >= 0) report.blamed_rank = static_cast<uint64_t>(e.peer_rank());
    report.text = e.what();
  } catch (const IoError& e) {
    kind = ErrorClass::io;
    if (e.peer_rank() >= 0) report.blamed_rank = static_cast<uint64_t>(e.peer_rank());
    report.text = e.what();
  } catch (const TimeoutError& e) {
    kind = ErrorClass::timeout;
    report.text = e.what();
  } catch (const InvalidArgument& e) {
    kind = ErrorClass::invalid_argument;
    report.text = e.what();
  } catch (const MismatchError& e) {
    kind = ErrorClass::mismatch;
    report.text = e.what();
  } catch (const Aborted& e) {
    kind = ErrorClass::aborted;
    report.text = e.what();
  } catch (const std::exception& e) {
    report.text = e.what();
  } catch (...) {
  }
  if (report.text.size() > kMaxAbortTextBytes) report.text.resize(kMaxAbortTextBytes);
  report.error_class = static_cast<uint64_t>(kind);
  return report;
}

std::exception_ptr adopt_abort(uint64_t error_class, uint64_t blamed_rank, std::string_view text, int my_rank,
                               int peer_rank) {
  // "peer rank 3 aborted (relayed by rank 0): rank 3: ..." when the report
  // came through another rank: the one that aborted is named as the peer.
  const std::string_view origin = origin_of(text);
  const long first = origin_rank(origin);
  std::string message = first >= 0 && first != peer_rank && first != my_rank
                            ? cat("rank ", my_rank, ": peer rank ", first, " aborted (relayed by rank ", peer_rank,
                                  "): ", origin)
                            : cat("rank ", my_rank, ": peer rank ", peer_rank, " aborted: ", origin);
  switch (static_cast<ErrorClass>(error_class)) {
    case ErrorClass::io: {
      // A rank no int holds is no rank (cast, it would read as -1, "nobody",
      // or as any other rank): the peer that sent it is to blame then.
      int blamed = blamed_rank == kNoBlamedRank || blamed_rank > static_cast<uint64_t>(INT_MAX)
                       ? peer_rank
                       : static_cast<int>(blamed_rank);
      if (blamed == my_rank) blamed = peer_rank;  // we cannot be our own dead peer
      return std::make_exception_ptr(IoError(message, blamed));
    }
    case ErrorClass::peer_lost: {
      // Only a rank named by the report: the relaying peer is alive (it sent this).
      if (blamed_rank > static_cast<uint64_t>(std::numeric_limits<int>::max()) ||
          static_cast<int>(blamed_rank) == my_rank)
        return std::make_exception_ptr(IoError(message, peer_rank));
      return std::make_exception_ptr(PeerLostError(message, static_cast<int>(blamed_rank)));
    }
    case ErrorClass::timeout: return std::make_exception_ptr(TimeoutError(message));
    case ErrorClass::invalid_argument: return std::make_exception_ptr(InvalidArgument(message));
    case ErrorClass::mismatch: return std::make_exception_ptr(MismatchError(message));
    case ErrorClass::aborted: return std::make_exception_ptr(Aborted(message));
    default: return std::make_exception_ptr(Aborted(message));
  }
}

}  // namespace chorus::transport
