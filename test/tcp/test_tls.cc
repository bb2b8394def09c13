// TLS on TCP pairs (base/tls.h): what a job does when ranks disagree about
// TLS or hold certificates the job's CA did not issue, and how bad files
// are reported. The conformance suite's tcp-tls run covers everything a
// working TLS connection must carry. The certificates come from
// test/tls/make_certificates.sh (CHORUS_TEST_TLS_DIR).
#include <array>
#include <cstdlib>
#include <thread>

#include "base/config.h"
#include "base/error.h"
#include "base/tls.h"
#include "test/transport/conformance.h"
#include "transport/tcp/tcp.h"

namespace chorus::transport::testing {
namespace {

std::string tls_file(const std::string& name) {
  const char* directory = std::getenv("CHORUS_TEST_TLS_DIR");
  REQUIRE(directory != nullptr);
  return std::string(directory) + "/" + name;
}

// A context holding `leaf`.pem/.key and trusting `authority`.pem.
std::shared_ptr<const TlsContext> tls(const std::string& leaf, const std::string& authority) {
  return TlsContext::load({tls_file(leaf + ".pem"), tls_file(leaf + ".key"), tls_file(authority + ".pem")});
}

struct Outcome {
  std::unique_ptr<Pair> pair;
  std::string error;  // empty when connected
  bool invalid_argument = false;
  double seconds = 0;
};

// Ranks 0 and 1 connect to each other at once, each with its own TLS setting.
struct TwoRanks {
  std::array<std::unique_ptr<Device>, 2> devices;
  std::array<Outcome, 2> outcomes;

  TwoRanks(std::shared_ptr<const TlsContext> tls0, std::shared_ptr<const TlsContext> tls1,
           std::chrono::milliseconds timeout = 20s, bool with_secret = true) {
    std::array<std::shared_ptr<const TlsContext>, 2> contexts{tls0, tls1};
    for (int rank = 0; rank < 2; ++rank) {
      tcp::TcpDeviceOptions options;
      options.rank = rank;
      options.size = 2;
      options.hostname = "127.0.0.1";
      options.tls = contexts[static_cast<size_t>(rank)];
      // What makes a refused dialer's TLS failure the peer's own (not a
      // stranger's claim), so the listener reports it at once.
      if (with_secret) options.secret = JobSecret("the job secret of the TLS tests!");
      devices[static_cast<size_t>(rank)] = tcp::create_device(options);
    }
    std::array<std::thread, 2> threads;
    for (int rank = 0; rank < 2; ++rank) {
      threads[static_cast<size_t>(rank)] = std::thread([&, rank] {
        Outcome& outcome = outcomes[static_cast<size_t>(rank)];
        const auto started = Clock::now();
        try {
          outcome.pair = devices[static_cast<size_t>(rank)]->connect(
              1 - rank, devices[static_cast<size_t>(1 - rank)]->address(), Deadline::after(timeout));
        } catch (const InvalidArgument& error) {
          outcome.error = error.what();
          outcome.invalid_argument = true;
        } catch (const Error& error) {
          outcome.error = error.what();
        }
        outcome.seconds = seconds_since(started);
      });
    }
    for (auto& thread : threads) thread.join();
  }
};

// One message each way, checked: small (one TLS record with its header) and
// large (many records, the socket full on the way).
void exchange(TwoRanks& ranks, size_t bytes) {
  Requests requests;
  const Buffer from0 = pattern(1, bytes), from1 = pattern(2, bytes);
  ReceiveBuffer at0(bytes), at1(bytes);
  Request& recv0 = requests.add();
  Request& recv1 = requests.add();
  Request& send0 = requests.add();
  Request& send1 = requests.add();
  ranks.outcomes[0].pair->post_recv(recv0, {7, 1}, at0.data());
  ranks.outcomes[1].pair->post_recv(recv1, {7, 1}, at1.data());
  ranks.outcomes[0].pair->post_send(send0, {7, 1}, from0);
  ranks.outcomes[1].pair->post_send(send1, {7, 1}, from1);
  for (Request* request : {&send0, &send1, &recv0, &recv1}) wait_ok(*request);
  REQUIRE(at0.holds(2));
  REQUIRE(at1.holds(1));
}

TEST_CASE("tls: two ranks with certificates of the job's CA exchange messages", "[tls]") {
  TwoRanks ranks(tls("rank", "ca"), tls("rank", "ca"));
  REQUIRE(ranks.outcomes[0].error.empty());
  REQUIRE(ranks.outcomes[1].error.empty());
  exchange(ranks, 1);
  exchange(ranks, 100);
  exchange(ranks, 3 * 1024 * 1024 + 17);
}

TEST_CASE("tls: ranks that disagree about TLS both fail at connect, naming the setting", "[tls]") {
  TwoRanks ranks(tls("rank", "ca"), nullptr);
  for (const Outcome& outcome : ranks.outcomes) {
    INFO(outcome.error);
    REQUIRE(outcome.invalid_argument);
    REQUIRE_THAT(outcome.error, Catch::Contains("TLS") && Catch::Contains("CHORUS_TLS_CERT"));
    REQUIRE(outcome.seconds < 2);
  }
}

TEST_CASE("tls: a certificate the job's CA did not issue is refused on both sides, at once", "[tls]") {
  // Rank 1 (the dialer) holds a foreign certificate, or trusts a foreign CA:
  // either way both ranks fail at connect, long before the timeout, and say
  // it was TLS and which peer.
  const bool foreign_certificate = GENERATE(true, false);
  auto rank1 = foreign_certificate ? tls("foreign", "ca") : tls("rank", "foreign-ca");
  TwoRanks ranks(tls("rank", "ca"), rank1);
  for (int rank = 0; rank < 2; ++rank) {
    const Outcome& outcome = ranks.outcomes[static_cast<size_t>(rank)];
    INFO("rank " << rank << ": " << outcome.error);
    REQUIRE(!outcome.pair);
    REQUIRE_FALSE(outcome.invalid_argument);
    REQUIRE_THAT(outcome.error, Catch::Contains("TLS handshake") &&
                                    Catch::Contains(cat("peer rank ", 1 - rank)));
    REQUIRE(outcome.seconds < 5);
  }
  if (foreign_certificate) REQUIRE_THAT(ranks.outcomes[0].error, Catch::Contains("certificate verify failed"));
  else REQUIRE_THAT(ranks.outcomes[1].error, Catch::Contains("certificate verify failed"));
}

TEST_CASE("tls: without a job secret a refused dialer only explains the listener's timeout", "[tls]") {
  // Anyone could pass the handshake claiming to be rank 1 and then fail TLS
  // on purpose: without a secret that must not fail rank 0's connect early.
  TwoRanks ranks(tls("rank", "ca"), tls("foreign", "ca"), 1500ms, false);
  REQUIRE_THAT(ranks.outcomes[1].error, Catch::Contains("TLS handshake"));
  const Outcome& listener = ranks.outcomes[0];
  INFO(listener.error);
  REQUIRE_THAT(listener.error, Catch::Contains("timed out") && Catch::Contains("certificate verify failed"));
  REQUIRE(listener.seconds > 1.4);
}

TEST_CASE("tls: unusable files are clear errors naming the variable and the file", "[tls]") {
  auto message = [](const TlsFiles& files) {
    try {
      TlsContext::load(files);
    } catch (const InvalidArgument& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  const std::string missing = tls_file("no-such-file.pem");
  REQUIRE_THAT(message({missing, tls_file("rank.key"), tls_file("ca.pem")}),
               Catch::Contains("CHORUS_TLS_CERT='" + missing + "'"));
  REQUIRE_THAT(message({tls_file("rank.pem"), tls_file("foreign.key"), tls_file("ca.pem")}),
               Catch::Contains("CHORUS_TLS_KEY") && Catch::Contains("does not match"));
  REQUIRE_THAT(message({tls_file("rank.pem"), tls_file("rank.key"), tls_file("rank.key")}),
               Catch::Contains("CHORUS_TLS_CA"));
  // A key file in place of the certificate.
  REQUIRE_THAT(message({tls_file("rank.key"), tls_file("rank.key"), tls_file("ca.pem")}),
               Catch::Contains("CHORUS_TLS_CERT"));

  // Some of the three variables set: the missing ones are named.
  ::setenv("CHORUS_TLS_CERT", tls_file("rank.pem").c_str(), 1);
  ::unsetenv("CHORUS_TLS_KEY");
  ::unsetenv("CHORUS_TLS_CA");
  REQUIRE_THROWS_WITH(tls_from_environment(), Catch::Contains("missing: CHORUS_TLS_KEY CHORUS_TLS_CA"));
  ::setenv("CHORUS_TLS_KEY", tls_file("rank.key").c_str(), 1);
  ::setenv("CHORUS_TLS_CA", tls_file("ca.pem").c_str(), 1);
  REQUIRE(tls_from_environment() != nullptr);
  ::unsetenv("CHORUS_TLS_CERT");
  ::unsetenv("CHORUS_TLS_KEY");
  ::unsetenv("CHORUS_TLS_CA");
  REQUIRE(tls_from_environment() == nullptr);
}

}  // namespace
}  // namespace chorus::transport::testing
