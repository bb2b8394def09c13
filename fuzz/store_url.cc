// CHORUS_STORE URLs (rendezvous/store_url.cc): tcp://host:port,
// file:///dir, redis://[:password@]host[:port][/db]. The input is the URL.
//
// Checks: a URL is refused only with InvalidArgument; an accepted one has a
// known scheme, a host and a port in range (tcp, redis), a database in range
// (redis), a path (file); and written back in canonical form it parses to
// the same fields.
#include "fuzz/fuzz_common.h"
#include "rendezvous/store_url.h"

using namespace chorus;
using namespace chorus::fuzz;

namespace {

bool same(const StoreUrl& a, const StoreUrl& b) {
  return a.scheme == b.scheme && a.host == b.host && a.port == b.port && a.path == b.path &&
         a.database == b.database && a.password == b.password;
}

// The URL that names `url`; empty when its host cannot be written so that
// it reads back: one holding '[' or ']' ("tcp://[[h]:1" has the host "[h",
// "tcp://h]:1" the host "h]"), which no resolver takes either.
std::string canonical(const StoreUrl& url) {
  if (url.scheme == "file") return "file://" + url.path;
  const bool colon = url.host.find(':') != std::string::npos;
  if (url.host.find_first_of("[]") != std::string::npos) return "";
  std::string host = colon ? "[" + url.host + "]" : url.host;
  if (url.scheme == "tcp") return cat("tcp://", host, ":", url.port);
  std::string text = "redis://";
  if (!url.password.empty()) text += ":" + url.password + "@";
  text += cat(host, ":", url.port);
  if (url.database != 0) text += cat("/", url.database);
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  StoreUrl url;
  const std::string kind = run_expecting_chorus_errors("parse_store_url", [&] { url = parse_store_url(text); });
  FUZZ_CHECK(kind.empty() || kind == "InvalidArgument", "a URL was refused with " + kind);
  if (!kind.empty()) return 0;

  FUZZ_CHECK(text.rfind(url.scheme + "://", 0) == 0, "the scheme is not the URL's");
  if (url.scheme == "file") {
    FUZZ_CHECK(!url.path.empty() && url.path == text.substr(7), "file:// without its directory");
  } else if (url.scheme == "tcp" || url.scheme == "redis") {
    FUZZ_CHECK(!url.host.empty(), "a store URL without a host was accepted");
    FUZZ_CHECK(url.port >= 1, "port 0 was accepted");
    FUZZ_CHECK(url.database >= 0 && url.database <= (1 << 20), "a database out of range was accepted");
    if (url.scheme == "tcp") FUZZ_CHECK(url.password.empty() && url.database == 0, "tcp:// with redis fields");
  } else {
    fuzz_fail("an unknown scheme was accepted: " + url.scheme);
  }

  const std::string again = canonical(url);
  if (again.empty()) return 0;
  StoreUrl reparsed;
  const std::string reparse_kind =
      run_expecting_chorus_errors("parse_store_url", [&] { reparsed = parse_store_url(again); });
  FUZZ_CHECK(reparse_kind.empty(), "the canonical form '" + again + "' of '" + text + "' is refused");
  FUZZ_CHECK(same(url, reparsed), "the canonical form '" + again + "' of '" + text + "' reads differently");
  return 0;
}
