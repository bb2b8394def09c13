// What each rank publishes through the bootstrap: its host identity (for the
// topology and the transports' probes) and, in its order of preference, one
// section per transport it offers, holding that transport's address blob.
// The decoder trusts nothing: a store is reachable by anyone, so every
// length is checked against what arrived before anything is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace chorus::transport {

struct PublishedAddress {
  uint64_t host_id = 0;
  // The kernel this rank runs on (machine_identity): ranks of different
  // hosts by host_id (network namespaces, containers, CHORUS_HOST_ID) may
  // still share one machine's cores.
  uint64_t machine_id = 0;
  // The CPUs this rank may run on (its affinity), 64 to a word, CPU c at
  // bit c % 64 of word c / 64; at most kMaxCpuWords words; empty: unknown.
  // On one machine, ranks whose sets meet compete for the same cores.
  std::vector<uint64_t> cpus;
  std::string host_name;  // for messages ("host h0"); at most 255 bytes
  struct Section {
    std::string transport;          // at most 32 bytes
    std::vector<std::byte> address;  // at most 64 KiB
  };
  std::vector<Section> sections;  // in this rank's order of preference

  // The transport's section, or null when the rank does not offer it.
  const Section* find(std::string_view transport) const;
};

std::vector<std::byte> encode_published_address(const PublishedAddress& address);
// Throws InvalidArgument naming both ranks when the blob is not one.
PublishedAddress decode_published_address(std::span<const std::byte> blob, int my_rank, int peer_rank);

// This host's identity: a hash of its host name and the kernel's boot id
// (so two containers with one host name on different machines differ), or
// of `override` (CHORUS_HOST_ID) when it is not empty. `name` receives what
// messages call the host.
uint64_t host_identity(const std::string& override, std::string& name);
// This machine's identity: a hash of the kernel's boot id, which network
// namespaces and containers of one machine share (CHORUS_HOST_ID does not
// change it); the host name's where the boot id cannot be read.
uint64_t machine_identity();
// This process's affinity as PublishedAddress::cpus has it (empty where the
// kernel does not say).
inline constexpr size_t kMaxCpuWords = 16;  // 1024 CPUs, glibc's cpu_set_t
std::vector<uint64_t> cpu_words();
// Whether two such sets share a CPU (an unknown set shares with every set).
bool share_cpus(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);
// The fewest cores per rank on any machine of the job, given every rank's
// machine_id and cpus (the CPUs its ranks may run on, together, over its
// ranks), or 0 where a rank's set is unknown. Computed from what all ranks
// published, so every rank gets the same number.
double fewest_cores_per_rank(const std::vector<uint64_t>& machine_ids, const std::vector<std::vector<uint64_t>>& cpus);

}  // namespace chorus::transport
