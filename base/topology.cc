// Deriving hosts and local ranks from what each rank published.
#include "base/topology.h"

#include <algorithm>
#include <map>

#include "base/error.h"
#include "base/log.h"

namespace chorus {

Topology::Topology(const std::vector<int>& host_of) {
  if (host_of.empty()) throw InvalidArgument("a topology needs at least one rank");
  // Renumber labels by first appearance, so equal jobs give equal tables.
  std::map<int, int> number;
  host_of_.reserve(host_of.size());
  local_rank_.reserve(host_of.size());
  for (size_t rank = 0; rank < host_of.size(); ++rank) {
    auto [found, added] = number.emplace(host_of[rank], static_cast<int>(ranks_on_.size()));
    if (added) ranks_on_.emplace_back();
    const int host = found->second;
    host_of_.push_back(host);
    local_rank_.push_back(static_cast<int>(ranks_on_[static_cast<size_t>(host)].size()));
    ranks_on_[static_cast<size_t>(host)].push_back(static_cast<int>(rank));
  }
}

Topology Topology::from_host_ids(std::span<const uint64_t> host_ids) {
  std::map<uint64_t, int> label;
  std::vector<int> host_of;
  for (uint64_t id : host_ids) host_of.push_back(label.emplace(id, static_cast<int>(label.size())).first->second);
  return Topology(host_of);
}

Topology Topology::single_host(int ranks) { return Topology(std::vector<int>(static_cast<size_t>(ranks), 0)); }

Topology Topology::blocks(const std::vector<int>& ranks_per_host) {
  std::vector<int> host_of;
  for (size_t host = 0; host < ranks_per_host.size(); ++host)
    host_of.insert(host_of.end(), static_cast<size_t>(ranks_per_host[host]), static_cast<int>(host));
  return Topology(host_of);
}

bool Topology::uniform() const {
  return std::all_of(ranks_on_.begin(), ranks_on_.end(),
                     [&](const std::vector<int>& ranks) { return ranks.size() == ranks_on_.front().size(); });
}

int Topology::largest_host() const {
  size_t largest = 0;
  for (const auto& ranks : ranks_on_) largest = std::max(largest, ranks.size());
  return static_cast<int>(largest);
}

Topology Topology::subset(std::span<const int> members) const {
  std::vector<int> host_of;
  host_of.reserve(members.size());
  for (int member : members) {
    if (member < 0 || member >= size())
      throw InvalidArgument(cat("topology: rank ", member, " is not one of ", size(), " ranks"));
    host_of.push_back(host_of_[static_cast<size_t>(member)]);
  }
  return Topology(host_of);
}

std::string Topology::describe() const {
  std::string text = cat(hosts(), hosts() == 1 ? " host:" : " hosts:");
  for (const auto& ranks : ranks_on_) {
    text += " {";
    for (size_t i = 0; i < ranks.size(); ++i) {
      // Runs of consecutive ranks print as a range, so 1000 ranks stay readable.
      size_t j = i;
      while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
      text += cat(i > 0 ? "," : "", ranks[i]);
      if (j > i) text += cat(j == i + 1 ? "," : "-", ranks[j]);
      i = j;
    }
    text += "}";
  }
  return text;
}

}  // namespace chorus
