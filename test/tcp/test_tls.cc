// TLS on TCP pairs (base/tls.h): what a job does when ranks disagree about
// TLS or hold certificates the job's CA did not issue, and how bad files
// are reported. The conformance suite's tcp-tls run covers everything a
// working TLS connection must carry. The certificates come from
// test/tls/make_certificates.sh (CHORUS_TEST_TLS_DIR).
#include <unistd.h>

#include <array>
#include <cstdio>
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

// What TlsContext::load says in a fresh process (the module is loaded once
// per process, so this one's is no use) with CHORUS_TLS_MODULE=`module`:
// "loaded", or the error. The process is this test program running the
// hidden case below.
std::string load_in_fresh_process(const std::string& module) {
  char self[4096];
  const ssize_t length = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  REQUIRE(length > 0);
  self[length] = '\0';
  const std::string command = "CHORUS_TLS_MODULE='" + module + "' '" + self + "' '[.tls-module-child]' 2>&1";
  FILE* child = ::popen(command.c_str(), "r");
  REQUIRE(child != nullptr);
  std::string output;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), child)) > 0) output.append(buffer, n);
  REQUIRE(::pclose(child) == 0);
  const size_t start = output.find("RESULT<");
  const size_t end = output.find(">RESULT", start);
  INFO(output);
  REQUIRE(start != std::string::npos);
  REQUIRE(end != std::string::npos);
  return output.substr(start + 7, end - start - 7);
}

TEST_CASE("tls: (run by load_in_fresh_process) loads the module CHORUS_TLS_MODULE names", "[.tls-module-child]") {
  std::string result = "loaded";
  try {
    TlsContext::load({tls_file("rank.pem"), tls_file("rank.key"), tls_file("ca.pem")});
  } catch (const IoError& error) {
    result = error.what();
  } catch (const std::exception& error) {
    result = std::string("not an IoError: ") + error.what();
  }
  std::printf("RESULT<%s>RESULT\n", result.c_str());
}

TEST_CASE("tls: a TLS module that cannot be loaded is a clear error naming where it looked", "[tls]") {
  const char* module = std::getenv("CHORUS_TLS_MODULE");
  REQUIRE(module != nullptr);
  REQUIRE(load_in_fresh_process(module) == "loaded");
  const std::string missing = tls_file("no-such-module.so");
  const std::string error = load_in_fresh_process(missing);
  REQUIRE_THAT(error, Catch::Contains("CHORUS_TLS_CERT") && Catch::Contains("libchorus_tls.so") &&
                          Catch::Contains("CHORUS_TLS_MODULE") && Catch::Contains(missing));
  // A shared object that is not a chorus TLS module (the C library).
  REQUIRE_THAT(load_in_fresh_process("libc.so.6"), Catch::Contains("libc.so.6: not a chorus TLS module"));
}

}  // namespace
}  // namespace chorus::transport::testing
