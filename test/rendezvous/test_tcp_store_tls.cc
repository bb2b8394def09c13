// TcpStore over TLS (base/tls.h): a TLS server and TLS clients carry keys,
// values of every size and parked waits; a client and server that disagree
// about TLS, or a certificate the job's CA did not issue, fail at connect
// with the reason, not at the timeout. Certificates from
// test/tls/make_certificates.sh (CHORUS_TEST_TLS_DIR).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <thread>

#include "base/error.h"
#include "base/tls.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous_test_helpers.h"

using namespace std::chrono_literals;
using chorus::test::bytes;

namespace {

std::string tls_file(const std::string& name) {
  const char* directory = std::getenv("CHORUS_TEST_TLS_DIR");
  REQUIRE(directory != nullptr);
  return std::string(directory) + "/" + name;
}

std::shared_ptr<const chorus::TlsContext> tls(const std::string& leaf, const std::string& authority) {
  return chorus::TlsContext::load({tls_file(leaf + ".pem"), tls_file(leaf + ".key"), tls_file(authority + ".pem")});
}

chorus::TcpStoreServerOptions tls_server(std::shared_ptr<const chorus::TlsContext> context) {
  chorus::TcpStoreServerOptions options;
  options.host = "127.0.0.1";
  options.secret = chorus::JobSecret("a job secret of thirty-two bytes");
  options.tls = std::move(context);
  return options;
}

}  // namespace

TEST_CASE("TcpStore over TLS carries values of every size and parked waits", "[tcp_store][tls]") {
  auto options = tls_server(tls("rank", "ca"));
  chorus::TcpStoreServer server(options);
  chorus::TcpStore store("127.0.0.1", server.port(), 5s, options.secret, tls("rank", "ca"));
  for (size_t size : {size_t{0}, size_t{1}, size_t{16383}, size_t{16384}, size_t{100000}, size_t{8} << 20}) {
    std::vector<std::byte> value(size);
    for (size_t i = 0; i < size; ++i) value[i] = static_cast<std::byte>((i * 131 + size) & 0xff);
    const std::string key = "value/" + std::to_string(size);
    store.set(key, value);
    REQUIRE(store.get(key, 1s) == value);
  }
  REQUIRE(store.add("counter", 5) == 5);
  // A get that parks until another client (its own TLS connection) sets the key.
  std::thread setter([&] {
    std::this_thread::sleep_for(100ms);
    chorus::TcpStore other("127.0.0.1", server.port(), 5s, options.secret, tls("rank", "ca"));
    other.set("late", bytes("arrived"));
  });
  REQUIRE(store.get("late", 5s) == bytes("arrived"));
  setter.join();
}

TEST_CASE("TcpStore: a client and a server that disagree about TLS fail at once, naming it", "[tcp_store][tls]") {
  chorus::test::Stopwatch watch;
  SECTION("a TLS server, a client without TLS") {
    auto options = tls_server(tls("rank", "ca"));
    chorus::TcpStoreServer server(options);
    std::string message = chorus::test::thrown_message<chorus::IoError>(
        [&] { chorus::TcpStore("127.0.0.1", server.port(), 5s, options.secret); });
    REQUIRE_THAT(message, Catch::Contains("uses TLS but this process does not") && Catch::Contains("CHORUS_TLS_CERT"));
  }
  SECTION("a server without TLS, a TLS client") {
    auto options = tls_server(nullptr);
    chorus::TcpStoreServer server(options);
    std::string message = chorus::test::thrown_message<chorus::IoError>(
        [&] { chorus::TcpStore("127.0.0.1", server.port(), 5s, options.secret, tls("rank", "ca")); });
    REQUIRE_THAT(message, Catch::Contains("does not use TLS but this process does"));
  }
  REQUIRE(watch.elapsed() < 2s);
}

TEST_CASE("TcpStore: a certificate the job's CA did not issue is refused at connect", "[tcp_store][tls]") {
  auto options = tls_server(tls("rank", "ca"));
  chorus::TcpStoreServer server(options);
  chorus::test::Stopwatch watch;
  SECTION("the client's certificate is foreign") {
    std::string message = chorus::test::thrown_message<chorus::IoError>(
        [&] { chorus::TcpStore("127.0.0.1", server.port(), 5s, options.secret, tls("foreign", "ca")); });
    REQUIRE_THAT(message, Catch::Contains("TLS handshake") && Catch::Contains("alert"));
  }
  SECTION("the client trusts another CA") {
    std::string message = chorus::test::thrown_message<chorus::IoError>(
        [&] { chorus::TcpStore("127.0.0.1", server.port(), 5s, options.secret, tls("rank", "foreign-ca")); });
    REQUIRE_THAT(message, Catch::Contains("TLS handshake") && Catch::Contains("certificate verify failed"));
  }
  REQUIRE(watch.elapsed() < 2s);
  // The server serves on: a good client still gets in.
  chorus::TcpStore store("127.0.0.1", server.port(), 5s, options.secret, tls("rank", "ca"));
  store.set("after", bytes("fine"));
  REQUIRE(store.get("after", 1s) == bytes("fine"));
}
