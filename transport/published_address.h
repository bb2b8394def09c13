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

}  // namespace chorus::transport
