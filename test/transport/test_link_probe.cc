// Measuring links at connect (transport/link_probe.h): which pairs probe
// which level, that every transport yields a usable alpha and beta while
// connecting only the probed pairs, and that a partner's command is not
// trusted.
#include <cmath>
#include <cstring>
#include <future>

#include "test/transport/conformance.h"
#include "transport/link_probe.h"

using namespace chorus;
using namespace chorus::transport;
using namespace chorus::transport::testing;
using namespace std::chrono_literals;

TEST_CASE("link probe partners: pairs of local ranks, and the first ranks of pairs of hosts", "[link-probe]") {
  // Hosts 7, 7, 9, 9, 4: hosts in order of their lowest rank are 7, 9, 4.
  const std::vector<uint64_t> hosts{7, 7, 9, 9, 4};
  auto partners = [&](int rank) { return probe_partners(rank, hosts); };
  CHECK(partners(0).local == 1);
  CHECK(partners(0).remote == 2);
  CHECK(partners(1).local == 0);
  CHECK_FALSE(partners(1).remote);  // only a host's first rank probes between hosts
  CHECK(partners(2).local == 3);
  CHECK(partners(2).remote == 0);
  CHECK(partners(3).local == 2);
  CHECK_FALSE(partners(4).local);   // alone on its host
  CHECK_FALSE(partners(4).remote);  // the third host has no partner host
  // Interleaved hosts: by rank order within each host.
  const std::vector<uint64_t> interleaved{1, 2, 1, 2, 1};
  CHECK(probe_partners(0, interleaved).local == 2);
  CHECK(probe_partners(0, interleaved).remote == 1);
  CHECK(probe_partners(1, interleaved).local == 3);
  CHECK_FALSE(probe_partners(4, interleaved).local);
  // One rank, one host: nothing to measure.
  CHECK_FALSE(probe_partners(0, {5}).local);
  CHECK_FALSE(probe_partners(0, {5}).remote);
}

TEST_CASE("link probe: the job's model per level from every pair's measurement", "[link-probe]") {
  // Local pairs: fastest 1 and 3 µs, waiting 4 and 2 µs; remote: fastest 10, waiting 10.
  const std::array<std::vector<LinkMeasurement>, 2> measured = {
      std::vector<LinkMeasurement>{{1e-6, 5e-6, 1e-10}, {3e-6, 5e-6, 3e-10}},
      std::vector<LinkMeasurement>{{10e-6, 20e-6, 8e-9}}};
  const auto models = combine_measurements(measured);
  REQUIRE(models[0]);
  REQUIRE(models[1]);
  // Waiting: the median of 4, 2 and 10 µs is 4, counted on both levels.
  CHECK(models[0]->alpha_seconds == Approx(2e-6 + 4e-6));
  CHECK(models[1]->alpha_seconds == Approx(10e-6 + 4e-6));
  CHECK(models[0]->beta_seconds_per_byte == Approx(2e-10));
  CHECK(models[1]->beta_seconds_per_byte == Approx(8e-9));
  // A level without measurements stays unset; a typical below the fastest waits 0.
  const auto local_only = combine_measurements({std::vector<LinkMeasurement>{{5e-6, 4e-6, 1e-9}}, {}});
  REQUIRE(local_only[0]);
  CHECK(local_only[0]->alpha_seconds == Approx(5e-6));
  CHECK_FALSE(local_only[1]);
}

TEST_CASE("link probe: every transport measures a finite alpha and beta, connecting only the probed pairs",
          "[transport][link-probe]") {
  FOR_EACH_TRANSPORT(transport);
  auto meshes = routed_meshes(make_devices(transport, 4));
  // Ranks 0,1 "on" one host and 2,3 on another (the transport is the same).
  const std::vector<uint64_t> hosts{1, 1, 2, 2};
  std::vector<std::future<MeasuredLinks>> running;
  for (auto& mesh : meshes)
    running.push_back(std::async(std::launch::async,
                                 [&mesh, &hosts] { return measure_links(*mesh, hosts, Deadline::after(20s)); }));
  std::vector<MeasuredLinks> measured;
  for (auto& result : running) measured.push_back(result.get());
  if (!meshes[0]->device_of(1).accepts(Memory::host())) {
    // Probes move host memory: such a transport keeps its built-in model.
    for (const MeasuredLinks& links : measured) CHECK_FALSE((links.local || links.remote));
    return;
  }

  for (const std::optional<LinkMeasurement>& link : {measured[0].local, measured[0].remote, measured[2].local}) {
    REQUIRE(link);
    CHECK(link->fastest_exchange_seconds > 0);
    CHECK(link->fastest_exchange_seconds <= link->typical_exchange_seconds);
    CHECK(link->typical_exchange_seconds < 0.1);
    CHECK(std::isfinite(link->beta_seconds_per_byte));
    CHECK(link->beta_seconds_per_byte > 0);
    // Slower than 1 MB/s would be no transport of ours on loopback.
    CHECK(link->beta_seconds_per_byte < 1e-6);
  }
  // Only the lower rank of a pair keeps what it led.
  CHECK_FALSE(measured[1].local);
  CHECK_FALSE(measured[2].remote);
  CHECK_FALSE(measured[3].local);
  CHECK(meshes[0]->connected(1));
  CHECK(meshes[0]->connected(2));
  CHECK(meshes[2]->connected(3));
  CHECK_FALSE(meshes[0]->connected(3));
  CHECK_FALSE(meshes[1]->connected(2));
  CHECK_FALSE(meshes[1]->connected(3));
}

TEST_CASE("link probe: a partner asking for an oversized transfer is refused, naming it",
          "[transport][link-probe]") {
  FOR_EACH_TRANSPORT(transport);
  auto meshes = routed_meshes(make_devices(transport, 2));
  const std::vector<uint64_t> hosts{1, 1};
  // Rank 0 should lead; here a hostile rank 0 asks rank 1 for 1 TiB.
  auto answering =
      std::async(std::launch::async, [&] { return measure_links(*meshes[1], hosts, Deadline::after(20s)); });
  meshes[0]->connect(1, Deadline::after(20s));
  // The probe's wire (link_probe.cc): 3 + 30 exchanges of 8 bytes on tag 4,
  // then commands on tag 1, all in group "link-pro".
  constexpr uint64_t probe_group = 0x6c696e6b2d70726full;
  // Asleep, as a waiting rank is: the transport's thread moves the bytes.
  WaitingScope<Mesh> waits(*meshes[0]);
  for (int round = 0; round < 33; ++round) {
    std::byte mine[8] = {}, theirs[8];
    Requests exchange;
    Request& out = exchange.add();
    Request& in = exchange.add();
    meshes[0]->pair(1).post_recv(in, Tag{.value = 4, .signature = 0, .group = probe_group}, theirs);
    meshes[0]->pair(1).post_send(out, Tag{.value = 4, .signature = 0, .group = probe_group}, mine);
    wait_ok(out);
    wait_ok(in);
  }
  const uint64_t huge = uint64_t{1} << 40;
  std::byte command[sizeof(huge)];
  std::memcpy(command, &huge, sizeof(huge));
  Requests requests;
  Request& sent = requests.add();
  meshes[0]->pair(1).post_send(sent, Tag{.value = 1, .signature = 0, .group = probe_group}, command);
  wait_ok(sent);
  CHECK_THROWS_WITH(answering.get(), Catch::Contains("rank 1: rank 0 asked for a link probe transfer of 1099511627776 "
                                                     "bytes"));
}
