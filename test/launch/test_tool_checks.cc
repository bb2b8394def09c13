// The pieces behind the tools' checks, without processes: the byte-size
// parser, the memory arithmetic, the suspect reports' bytes, and which rank
// choose_first_failure names from what a launcher saw and the ranks reported.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <csignal>
#include <limits>
#include <span>
#include <string>

#include "api/store_abort_record.h"
#include "tools/first_failure.h"
#include "tools/flag_checks.h"

using namespace chorus;
using namespace chorus::tools;

namespace {

// waitpid statuses, built as the kernel reports them.
int exited(int code) { return code << 8; }
int signalled(int signal_number) { return signal_number; }

RankEnding ended(int status, int pass, bool by_launcher = false) {
  RankEnding ending;
  ending.ended = true;
  ending.status = status;
  ending.ended_pass = pass;
  ending.killed_by_launcher = by_launcher;
  return ending;
}

}  // namespace

TEST_CASE("byte sizes: suffixes, and no sign, fraction, hex or overflow", "[tools][flags]") {
  std::string why;
  CHECK(parse_byte_size("4096", why) == 4096u);
  CHECK(parse_byte_size("64K", why) == 65536u);
  CHECK(parse_byte_size("1k", why) == 1024u);
  CHECK(parse_byte_size("2KiB", why) == 2048u);
  CHECK(parse_byte_size("3mb", why) == size_t{3} << 20);
  CHECK(parse_byte_size("1T", why) == size_t{1} << 40);
  CHECK(parse_byte_size(" 8 ", why) == 8u);
  CHECK(parse_byte_size("18446744073709551615", why) == std::numeric_limits<size_t>::max());
  for (const char* bad : {"", "-5", "1.5K", "0x10", "nan", "inf", "1e3", "K", "5Q", "5KK"}) {
    INFO(bad);
    CHECK_FALSE(parse_byte_size(bad, why));
  }
  CHECK_FALSE(parse_byte_size("18446744073709551616", why));
  CHECK_THAT(why, Catch::Contains("more bytes than this machine can address"));
  CHECK_FALSE(parse_byte_size("16777216T", why));
  CHECK_FALSE(parse_byte_size("-1", why));
  CHECK_THAT(why, Catch::Contains("is negative"));
}

TEST_CASE("memory arithmetic saturates and names what does not fit", "[tools][flags]") {
  CHECK(saturating_multiply(3, 4) == 12u);
  CHECK(saturating_multiply(size_t{1} << 40, size_t{1} << 40) == std::numeric_limits<size_t>::max());
  CHECK(describe_bytes(1) == "1 byte");
  CHECK(describe_bytes(1536) == "1.5 KiB");
  CHECK(describe_bytes(size_t{2} << 40) == "2 TiB");
  CHECK(describe_bytes(std::numeric_limits<size_t>::max()) == "more than 16 EiB");
  REQUIRE(physical_memory_bytes() > 0);
  CHECK(memory_shortfall("--x 1", 1, 1).empty());
  const std::string message = memory_shortfall("--max-bytes 1 EiB", size_t{1} << 60, 4);
  CHECK_THAT(message, Catch::StartsWith("--max-bytes 1 EiB needs 1 EiB per rank (4 EiB for the 4 ranks on this "
                                        "host), this host has "));
}

TEST_CASE("suspect reports survive the store's bytes and refuse what no rank wrote", "[tools][first-failure]") {
  const auto bytes = detail::encode_suspect_report(3, {0, 2});
  const auto decoded = detail::decode_suspect_report(bytes, 4);
  REQUIRE(decoded);
  CHECK(decoded->first == 3);
  CHECK(decoded->second == std::vector<int>{0, 2});
  CHECK(detail::decode_suspect_report(detail::encode_suspect_report(1, {}), 4)->second.empty());
  for (const std::string bad : {"", "3", "4:0", "3:9", "3:-1", "x:1", "3:1;2"}) {
    INFO(bad);
    CHECK_FALSE(detail::decode_suspect_report(std::as_bytes(std::span(bad.data(), bad.size())), 4));
  }
}

TEST_CASE("the rank that failed first: the launcher's evidence, then the ranks' reports, then the first exit",
          "[tools][first-failure]") {
  SECTION("a stopped rank beats the survivors that exited after reporting it") {
    std::vector<RankEnding> ranks = {ended(signalled(SIGKILL), 9, true), ended(exited(1), 5), ended(exited(1), 5),
                                     ended(exited(1), 6)};
    ranks[0].stop_signal = SIGSTOP;
    ranks[0].stopped_pass = 2;
    const FirstFailure first = choose_first_failure(ranks, 1, {{2, {0}}, {3, {0, 2}}, {1, {0}}});
    CHECK(first.rank == 0);
    CHECK(first.exit_code == 1);
    CHECK(first.description == "rank 0 failed first: stopped by SIGSTOP (ranks 1, 2, 3 report it lost or unresponsive)");
  }
  SECTION("a rank killed by a signal the launcher did not send, even when a survivor was reaped with it") {
    const std::vector<RankEnding> ranks = {ended(exited(1), 3), ended(exited(1), 4), ended(signalled(SIGKILL), 3),
                                           ended(exited(1), 4)};
    const FirstFailure first = choose_first_failure(ranks, 0, {{0, {2}}});
    CHECK(first.rank == 2);
    CHECK(first.exit_code == 128 + SIGKILL);
    CHECK(first.description == "rank 2 failed first: killed by SIGKILL (rank 0 reports it lost or unresponsive)");
  }
  SECTION("a killed rank reaped after the survivors that saw its sockets close, which name it") {
    const std::vector<RankEnding> ranks = {ended(exited(1), 3), ended(signalled(SIGKILL), 4), ended(exited(1), 3)};
    const FirstFailure first = choose_first_failure(ranks, 0, {{0, {1}}, {2, {1}}});
    CHECK(first.rank == 1);
    CHECK(first.exit_code == 128 + SIGKILL);
    CHECK(first.description == "rank 1 failed first: killed by SIGKILL (ranks 0, 2 report it lost or unresponsive)");
  }
  SECTION("a signal or stop after the first exit is the job's end, not its cause") {
    std::vector<RankEnding> ranks = {ended(exited(3), 2), ended(signalled(SIGSEGV), 4), ended(exited(1), 3)};
    ranks[2].stop_signal = SIGSTOP;
    ranks[2].stopped_pass = 3;
    const FirstFailure first = choose_first_failure(ranks, 0, {});
    CHECK(first.rank == 0);
    CHECK(first.exit_code == 3);
    CHECK(first.description == "rank 0 failed first: it exited with status 3");
  }
  SECTION("the rank most reports name, unless it reported too") {
    const std::vector<RankEnding> ranks = {ended(exited(1), 2), ended(signalled(SIGTERM), 5, true),
                                           ended(exited(1), 3), ended(exited(1), 3)};
    // Rank 3 also names rank 0, which reported and so was alive: rank 1 it is.
    const FirstFailure first = choose_first_failure(ranks, 0, {{0, {1}}, {2, {1}}, {3, {1, 0}}});
    CHECK(first.rank == 1);
    CHECK(first.exit_code == 1);
    CHECK(first.description == "rank 1 failed first: ranks 0, 2, 3 report it lost or unresponsive; it was killed by "
                               "SIGTERM when the launcher stopped the job");
  }
  SECTION("a named rank that ended on its own gives its own exit code") {
    const std::vector<RankEnding> ranks = {ended(exited(1), 2), ended(exited(7), 2)};
    const FirstFailure first = choose_first_failure(ranks, 0, {{0, {1}}});
    CHECK(first.rank == 1);
    CHECK(first.exit_code == 7);
    CHECK_THAT(first.description, Catch::EndsWith("; it exited with status 7"));
  }
  SECTION("nothing better known: the first exit, as before") {
    const std::vector<RankEnding> ranks = {ended(exited(0), 1), ended(exited(2), 1), ended(exited(1), 2)};
    const FirstFailure first = choose_first_failure(ranks, 1, {});
    CHECK(first.rank == 1);
    CHECK(first.exit_code == 2);
    CHECK(first.description == "rank 1 failed first: it exited with status 2");
  }
  CHECK(signal_text(SIGKILL) == "SIGKILL");
  CHECK(signal_text(SIGRTMIN + 3) == "signal " + std::to_string(SIGRTMIN + 3));
}
