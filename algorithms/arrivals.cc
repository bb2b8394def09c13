#include "algorithms/arrivals.h"

#include "base/log.h"
#include "transport/positions.h"

namespace chorus::algorithms {

namespace {

// Sequence numbers wrap at 2^32 identically on every rank.
bool before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

std::string list_ranks(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i)
    text += cat(i == 0 ? "" : ", ", ranks[i]);
  return cat(ranks.size() == 1 ? "rank " : "ranks ", text);
}

}  // namespace

Arrivals take_arrivals(const Communicator& communicator, uint32_t sequence, std::chrono::milliseconds grace) {
  std::vector<int> members, mesh_ranks;
  for (int member = 0; member < communicator.size(); ++member) {
    if (member == communicator.rank()) continue;
    members.push_back(member);
    mesh_ranks.push_back(communicator.mesh_rank(member));
  }
  const std::vector<transport::Mesh::PeerReport> reports =
      communicator.mesh().ask_positions(mesh_ranks, communicator.group(), grace);
  Arrivals arrivals;
  for (size_t i = 0; i < members.size(); ++i) {
    const transport::Mesh::PeerReport& report = reports[i];
    const transport::Position& position = report.position;
    if (!report.answered) {
      arrivals.silent.push_back(members[i]);
    } else if (!position.known || before(position.sequence, sequence)) {
      arrivals.missing_ranks.push_back(members[i]);
      arrivals.missing.push_back(cat("rank ", members[i], " ", transport::describe_position(position)));
    } else {
      arrivals.arrived.push_back(members[i]);
    }
  }
  return arrivals;
}

std::string describe_arrivals(const Arrivals& arrivals, const std::string& what, std::chrono::milliseconds grace) {
  std::string text;
  if (!arrivals.missing.empty()) {
    text += cat("; ", list_ranks(arrivals.missing_ranks), arrivals.missing.size() == 1 ? " has" : " have",
                " not called ", what, " (");
    for (size_t i = 0; i < arrivals.missing.size(); ++i) text += cat(i == 0 ? "" : "; ", arrivals.missing[i]);
    text += ")";
  }
  if (!arrivals.silent.empty())
    text += cat("; ", list_ranks(arrivals.silent), arrivals.silent.size() > 1 ? " do" : " does",
                " not answer a liveness probe within ", grace.count(),
                " ms: stopped (SIGSTOP, a debugger), stuck or cut off by the network, and the likely cause");
  if (text.empty()) text = cat("; every other rank is in ", what, " too (waiting on each other: a transport stall?)");
  return text;
}

}  // namespace chorus::algorithms
