// The published address's machine identity and CPU sets (transport/
// published_address.h), from which a rank counts who may run on its cores:
// they travel exactly, the sizes a peer sends are checked, and two sets
// share a CPU exactly when they meet.
#include <sched.h>

#include <catch2/catch.hpp>

#include "base/error.h"
#include "transport/published_address.h"

using namespace chorus;
using namespace chorus::transport;

TEST_CASE("a published address carries its machine and CPUs exactly", "[published-address]") {
  PublishedAddress address;
  address.host_id = 0x1234;
  address.machine_id = 0xfeedfacecafebeefull;
  address.cpus = {0x5, 0, 0x8000000000000000ull};
  address.sections.push_back({"tcp", {std::byte{1}, std::byte{2}}});
  const PublishedAddress back = decode_published_address(encode_published_address(address), 0, 1);
  CHECK(back.host_id == address.host_id);
  CHECK(back.machine_id == address.machine_id);
  CHECK(back.cpus == address.cpus);
  REQUIRE(back.sections.size() == 1);
  CHECK(back.sections[0].address == address.sections[0].address);

  // More words than 1024 CPUs take: refused both ways, naming the ranks.
  address.cpus.assign(kMaxCpuWords + 1, 1);
  CHECK_THROWS_AS(encode_published_address(address), InvalidArgument);
  address.cpus.assign(kMaxCpuWords, 1);
  std::vector<std::byte> blob = encode_published_address(address);
  // The count sits after the magic (4), version (2), host (8) and machine (8).
  blob[22] = std::byte{kMaxCpuWords + 1};
  CHECK_THROWS_WITH(decode_published_address(blob, 3, 5),
                    Catch::Contains("rank 3: rank 5 published") && Catch::Contains("words of CPUs"));
  blob.resize(30);  // inside the CPU words
  CHECK_THROWS_AS(decode_published_address(blob, 3, 5), InvalidArgument);
}

TEST_CASE("CPU sets share a CPU when they meet, and an unknown set meets every set", "[published-address]") {
  CHECK(share_cpus({0x3}, {0x2}));
  CHECK_FALSE(share_cpus({0x1}, {0x2}));
  CHECK_FALSE(share_cpus({0x1}, {0, 0x1}));  // CPU 0 against CPU 64
  CHECK(share_cpus({0, 0x1}, {0xff, 0x1}));
  CHECK(share_cpus({}, {0x1}));
  CHECK(share_cpus({0x1}, {}));
}

TEST_CASE("this process's CPU set holds the CPU it runs on, and its machine is one id", "[published-address]") {
  const std::vector<uint64_t> words = cpu_words();
  REQUIRE_FALSE(words.empty());
  CHECK(words.size() <= kMaxCpuWords);
  CHECK(words.back() != 0);  // no trailing empty words
  const int cpu = ::sched_getcpu();
  REQUIRE(cpu >= 0);
  if (static_cast<size_t>(cpu) < kMaxCpuWords * 64) {
    REQUIRE(static_cast<size_t>(cpu) / 64 < words.size());
    CHECK((words[static_cast<size_t>(cpu) / 64] >> (cpu % 64) & 1) == 1);
  }
  CHECK(machine_identity() == machine_identity());
  CHECK(machine_identity() != 0);
}

TEST_CASE("the job's fewest cores per rank counts each machine's CPUs over its ranks", "[published-address]") {
  // 4 ranks of one machine (4 network-namespace hosts) on 2 CPUs.
  CHECK(fewest_cores_per_rank({7, 7, 7, 7}, {{0x3}, {0x3}, {0x3}, {0x3}}) == 0.5);
  // Pinned to a CPU each: a core each, whatever the machine has besides.
  CHECK(fewest_cores_per_rank({7, 7}, {{0x1}, {0x2}}) == 1.0);
  // The sets of a machine's ranks count together, CPU 64 included.
  CHECK(fewest_cores_per_rank({7, 7, 7}, {{0x1}, {0, 0x1}, {0x1}}) == 2.0 / 3.0);
  // The most crowded machine decides: 2 ranks on 1 CPU beside 2 on 8.
  CHECK(fewest_cores_per_rank({7, 9, 9, 7}, {{0xff}, {0x1}, {0x1}, {0xff}}) == 0.5);
  // One unknown set: unknown.
  CHECK(fewest_cores_per_rank({7, 7}, {{0x3}, {}}) == 0.0);
  CHECK(fewest_cores_per_rank({7}, {}) == 0.0);
  CHECK(fewest_cores_per_rank({}, {}) == 0.0);
}
