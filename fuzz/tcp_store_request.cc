// The TcpStore request parser (rendezvous/tcp_store_protocol.cc), as the
// server runs it over a connection's buffered bytes: parse one request from
// the front, drop the bytes it used, repeat until incomplete or invalid.
// The input is the byte stream one client sent.
//
// Checks: the parser consumes exactly one request and never more than the
// buffer; every shorter prefix of a complete request is incomplete (the
// server waits for more, it never acts on or refuses a partial request);
// an invalid request says why; a complete one encodes (encode_request, the
// client's encoder) back to exactly its bytes, which also proves it within
// every limit the client enforces.
#include <cstring>

#include "fuzz/fuzz_common.h"
#include "rendezvous/tcp_store_protocol.h"

using namespace chorus;
using namespace chorus::fuzz;
using namespace chorus::tcp_store;

namespace {

void expect_incomplete(std::span<const std::byte> prefix, const char* what) {
  Request request;
  const ParseOutcome outcome = parse_request(prefix, request);
  FUZZ_CHECK(outcome.state == ParseState::incomplete,
             cat("a prefix of ", prefix.size(), " bytes of a complete request is ",
                 outcome.state == ParseState::complete ? "complete" : "invalid", " (", what, ")"));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> buffer(reinterpret_cast<const std::byte*>(data), size);
  while (true) {
    Request request;
    ParseOutcome outcome;
    const std::string thrown = run_expecting_chorus_errors("parse_request", [&] { outcome = parse_request(buffer, request); });
    FUZZ_CHECK(thrown.empty(), "parse_request threw " + thrown);
    if (outcome.state == ParseState::incomplete) return 0;
    if (outcome.state == ParseState::invalid) {
      FUZZ_CHECK(!outcome.error.empty(), "an invalid request without a reason");
      return 0;
    }
    FUZZ_CHECK(outcome.consumed > 0 && outcome.consumed <= buffer.size(),
               cat("a request of ", outcome.consumed, " bytes in a buffer of ", buffer.size()));
    const auto bytes = buffer.first(outcome.consumed);
    expect_incomplete(bytes.first(bytes.size() - 1), "all but its last byte");
    expect_incomplete(bytes.first(bytes.size() / 2), "its first half");
    expect_incomplete(bytes.first(std::min<size_t>(bytes.size() - 1, 9)), "its header");

    std::vector<std::byte> again;
    const std::string kind = run_expecting_chorus_errors("encode_request", [&] {
      again = encode_request(request.op, request.keys, request.value);
    });
    FUZZ_CHECK(kind.empty(), cat("the client refuses to encode a ", op_name(request.op), " the server accepts: ", kind));
    FUZZ_CHECK(again.size() == bytes.size() && std::memcmp(again.data(), bytes.data(), bytes.size()) == 0,
               cat("a ", op_name(request.op), " request does not encode back to its bytes"));
    buffer = buffer.subspan(outcome.consumed);
  }
}
