#include "algorithms/execution/arrivals.h"

#include <algorithm>
#include <cstdlib>

#include "base/log.h"
#include "transport/positions.h"

namespace chorus::algorithms {

namespace {

constexpr size_t kMaxKnocks = 64;

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
  // The ranks asked, as the Communicator shows them (members[i] is at
  // mesh_ranks[i]): its members, or a helper group's whole Context.
  std::vector<int> members, mesh_ranks;
  const int my_mesh_rank = communicator.mesh_rank(communicator.rank());
  for (const Communicator::ProbedRank& probed : communicator.probed_ranks()) {
    if (probed.mesh_rank == my_mesh_rank) continue;
    members.push_back(probed.shown);
    mesh_ranks.push_back(probed.mesh_rank);
  }
  transport::Mesh& mesh = communicator.mesh();
  const std::vector<transport::Mesh::PeerReport> reports = mesh.ask_positions(mesh_ranks, communicator.group(), grace);
  // Members without a connection (on demand) get a knock instead; at most
  // kMaxKnocks, nearest in rank first, so a stall at thousands of ranks does
  // not spend seconds knocking.
  std::vector<size_t> unconnected;
  for (size_t i = 0; i < members.size(); ++i)
    if (!mesh.connected(mesh_ranks[i])) unconnected.push_back(i);
  const int me = communicator.shown_rank(communicator.rank());
  std::stable_sort(unconnected.begin(), unconnected.end(), [&](size_t a, size_t b) {
    return std::abs(members[a] - me) < std::abs(members[b] - me);
  });
  std::vector<int> to_knock;
  for (size_t k = 0; k < std::min(unconnected.size(), kMaxKnocks); ++k) to_knock.push_back(mesh_ranks[unconnected[k]]);
  const std::vector<transport::KnockAnswer> answers = mesh.knock_unconnected(to_knock);
  std::vector<transport::KnockAnswer> answer_of(members.size(), transport::KnockAnswer::unknown);
  for (size_t k = 0; k < answers.size(); ++k) answer_of[unconnected[k]] = answers[k];
  Arrivals arrivals;
  for (size_t i = 0; i < members.size(); ++i) {
    const transport::Mesh::PeerReport& report = reports[i];
    const int shown = members[i];
    const transport::Position& position = report.position;
    if (!mesh.connected(mesh_ranks[i])) {
      switch (answer_of[i]) {
        case transport::KnockAnswer::silent: arrivals.silent.push_back(shown); break;
        case transport::KnockAnswer::closed: arrivals.aborted.push_back(shown); break;
        case transport::KnockAnswer::refused: arrivals.gone.push_back(shown); break;
        default: arrivals.unasked.push_back(shown);
      }
    } else if (!report.answered) {
      arrivals.silent.push_back(shown);
    } else if (!position.known || before(position.sequence, sequence)) {
      arrivals.missing_ranks.push_back(shown);
      arrivals.missing.push_back(cat("rank ", shown, " ", transport::describe_position(position)));
    } else {
      arrivals.arrived.push_back(shown);
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
  if (!arrivals.aborted.empty())
    text += cat("; ", list_ranks(arrivals.aborted), arrivals.aborted.size() > 1 ? " have" : " has",
                " aborted (its listener closes every connection; its own error says why)");
  if (!arrivals.gone.empty())
    text += cat("; ", list_ranks(arrivals.gone), arrivals.gone.size() > 1 ? " are" : " is",
                " gone (its listener refuses connections: the process exited or closed its Context)");
  if (!arrivals.unasked.empty())
    text += cat("; ", list_ranks(arrivals.unasked), " not asked where ", arrivals.unasked.size() > 1 ? "they are" :
                "it is", " (no connection to this rank yet, connections being on demand; alive where its listener "
                "answered)");
  else if (text.empty())
    text = cat("; every other rank is in ", what, " too (waiting on each other: a transport stall?)");
  return text;
}

}  // namespace chorus::algorithms
