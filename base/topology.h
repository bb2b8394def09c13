// Which ranks share a host. Every rank publishes a host identity at connect
// (a hash of the host name and the kernel's boot id, or CHORUS_HOST_ID, which
// is also how tests fake several hosts on one machine); ranks with equal
// identities share memory and a network uplink. Hosts are numbered in order
// of their lowest rank, and local ranks in rank order, so every rank derives
// the same numbering from the same identities.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace chorus {

class Topology {
 public:
  // One rank on one host.
  Topology() : Topology(std::vector<int>{0}) {}
  // host_of[r]: the host of rank r, by any labels (equal label, same host).
  explicit Topology(const std::vector<int>& host_of);
  static Topology from_host_ids(std::span<const uint64_t> host_ids);
  static Topology single_host(int ranks);
  // Hosts of `ranks_per_host[h]` ranks each, ranks numbered host by host.
  static Topology blocks(const std::vector<int>& ranks_per_host);

  int size() const { return static_cast<int>(host_of_.size()); }
  int hosts() const { return static_cast<int>(ranks_on_.size()); }
  int host_of(int rank) const { return host_of_[static_cast<size_t>(rank)]; }
  int local_rank(int rank) const { return local_rank_[static_cast<size_t>(rank)]; }
  int local_size(int rank) const { return static_cast<int>(ranks_on(host_of(rank)).size()); }
  // The ranks on `host`, ascending.
  const std::vector<int>& ranks_on(int host) const { return ranks_on_[static_cast<size_t>(host)]; }
  bool same_host(int a, int b) const { return host_of(a) == host_of(b); }
  // Every host holds the same number of ranks.
  bool uniform() const;
  int largest_host() const;

  // The topology of `members` (ranks of this one), in the order given: what
  // a Context made by split sees.
  Topology subset(std::span<const int> members) const;

  // "2 hosts: {0,1} {2,3}"
  std::string describe() const;
  const std::vector<int>& host_table() const { return host_of_; }
  friend bool operator==(const Topology& a, const Topology& b) { return a.host_of_ == b.host_of_; }

 private:
  std::vector<int> host_of_;
  std::vector<int> local_rank_;
  std::vector<std::vector<int>> ranks_on_;
};

}  // namespace chorus
