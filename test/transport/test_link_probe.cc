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

  for (const std::optional<LinkModel>& link : {measured[0].local, measured[0].remote, measured[2].local}) {
    REQUIRE(link);
    CHECK(std::isfinite(link->alpha_seconds));
    CHECK(link->alpha_seconds > 0);
    CHECK(link->alpha_seconds < 0.1);
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
  const uint64_t huge = uint64_t{1} << 40;
  std::byte command[sizeof(huge)];
  std::memcpy(command, &huge, sizeof(huge));
  Requests requests;
  Request& sent = requests.add();
  // The probe's wire (link_probe.cc): commands are tag 1 of group "link-pro".
  meshes[0]->pair(1).post_send(sent, Tag{.value = 1, .signature = 0, .group = 0x6c696e6b2d70726full}, command);
  wait_ok(sent);
  CHECK_THROWS_WITH(answering.get(), Catch::Contains("rank 1: rank 0 asked for a link probe transfer of 1099511627776 "
                                                     "bytes"));
}
