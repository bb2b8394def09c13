// The Mesh as the failure domain (mesh.h): the first failure of any Device
// (or of connecting) spread to every Device, a lost peer explained by its
// abort report, this rank's own report left for peers it has no connection
// to, and the suspects (peers found dead, silent or gone).
#include "transport/mesh.h"

#include <thread>

#include <algorithm>

#include "base/error.h"
#include "base/log.h"

namespace chorus::transport {
namespace {

// How long a rank whose connect failed looks for the peer's abort report.
constexpr std::chrono::milliseconds kAbortRecordWait{300};

}  // namespace

std::exception_ptr Mesh::explain_loss(std::exception_ptr error) const {
  if (!abort_record_ || !error) return error;
  try {
    std::rethrow_exception(error);
  } catch (const PeerLostError& lost) {
    if (lost.peer_rank() >= 0 && lost.peer_rank() < size_ && lost.peer_rank() != rank_)
      return with_peer_report(lost.peer_rank(), error);
  } catch (...) {
  }
  return error;
}

std::exception_ptr Mesh::with_peer_report(int peer, std::exception_ptr error) const {
  // Even once every pair of this rank is up: the peer's side of one may
  // never have been (it aborted during the handshake).
  if (!abort_record_) return error;
  CHORUS_LOG(debug, rank_, "lost peer rank ", peer, "; looking for its abort report");
  if (std::optional<AbortReport> report = abort_record_->find(peer, kAbortRecordWait))
    return adopt_abort(report->error_class, report->blamed_rank, report->text, rank_, peer);
  return error;
}

void Mesh::fail_to_connect(int peer, std::exception_ptr error) {
  // A peer that aborted before this pair connected refuses it, closes it or
  // never dials; its own words are in the abort record (unless this Mesh failed
  // first: then the error is ours).
  // The Mesh's first failure wins: a dial that failed because the peer
  // aborted over news this rank already has says less than that news.
  if (failed()) std::rethrow_exception(failure());
  error = with_peer_report(peer, std::move(error));
  // Pairs that did connect go with the abort's cleanup; peers learn why
  // from the abort, from the abort record, or from their own knock.
  abort(error);
  std::rethrow_exception(error);
}

void Mesh::post_abort_record(std::exception_ptr reason) {
  // Only peers this rank has no connection to need the abort record.
  if (!abort_record_ || fully_connected()) return;
  CHORUS_LOG(debug, rank_, "leaving this rank's abort report in the abort record for peers it has no connection to");
  abort_record_->post(rank_, report_abort(reason));
}

bool Mesh::note_failure_locked(std::exception_ptr reason) {
  const bool first = !failure_;
  if (!failure_) {
    failure_ = reason;
    try {
      std::rethrow_exception(reason);
    } catch (const PeerLostError& error) {  // evidence of death, not a consequence of it
      const int blamed = error.peer_rank();
      if (blamed >= 0 && blamed < size_ && blamed != rank_) add_suspect_locked(blamed);
    } catch (...) {
    }
  }
  failed_.store(true, std::memory_order_release);
  return first;
}

void Mesh::set_suspect_record(std::shared_ptr<SuspectRecord> record) {
  std::lock_guard<std::mutex> lock(mutex_);
  suspect_record_ = std::move(record);
}

void Mesh::note_failure(const std::exception_ptr& reason) {
  bool first = false;
  std::shared_ptr<SuspectRecord> suspect_record;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    first = note_failure_locked(reason);
    suspect_record = suspect_record_;
  }
  // Before the devices close their listeners to peers that knock: by the
  // time one learns this rank aborted, the words are there to read.
  if (first) post_abort_record(reason);
  // Only a rank that saw a peer die or freeze names one; a rank that learnt
  // of the failure from another (an abort relayed) has nobody to name.
  if (first && suspect_record) {
    const std::vector<int> named = suspects();
    if (!named.empty()) suspect_record->post(rank_, named);
  }
}

void Mesh::add_suspect_locked(int peer) {
  if (std::find(suspects_.begin(), suspects_.end(), peer) == suspects_.end()) suspects_.push_back(peer);
}

std::vector<int> Mesh::suspects() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return suspects_;
}

void Mesh::abort(std::exception_ptr reason) {
  note_failure(reason);
  for (const auto& device : devices_) device->abort(reason);
  arrivals_->bump();  // a receive from any peer waits on no request: wake it
}

bool Mesh::failed() const { return failed_.load(std::memory_order_acquire); }

std::exception_ptr Mesh::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void Mesh::on_device_failure(const Device* source, std::exception_ptr reason) {
  if (!failed()) {
    std::exception_ptr explained = explain_loss(reason);
    // The source relays its abort to its own peers after this returns:
    // with the lost peer's words, not "the connection closed".
    if (explained != reason)
      for (const auto& device : devices_)
        if (device.get() == source) device->relay_instead(explained);
    reason = explained;
  }
  note_failure(reason);
  // Asynchronously: this may be a transport's own progress thread, which must
  // not wait for another transport's thread.
  for (const auto& device : devices_)
    if (device.get() != source) device->abort_async(reason);
  arrivals_->bump();  // a receive from any peer waits on no request: wake it
}

std::vector<int> Mesh::unresponsive_peers(std::chrono::milliseconds grace) {
  std::vector<int> everyone;
  for (int peer = 0; peer < size_; ++peer)
    if (peer != rank_ && connected(peer)) everyone.push_back(peer);
  const std::vector<PeerReport> reports = ask_positions(everyone, /*group=*/0, grace);
  std::vector<int> silent;
  for (size_t i = 0; i < everyone.size(); ++i)
    if (!reports[i].answered) silent.push_back(everyone[i]);
  return silent;
}

std::vector<KnockAnswer> Mesh::knock_unconnected(const std::vector<int>& peers) {
  std::vector<KnockAnswer> answers;
  for (int peer : peers) {
    check_peer_rank(peer);
    const auto index = static_cast<size_t>(peer);
    answers.push_back(links_[index].device ? links_[index].device->knock(peer, peer_addresses_[index])
                                           : KnockAnswer::unknown);
    if (answers.back() == KnockAnswer::silent || answers.back() == KnockAnswer::refused) {
      std::lock_guard<std::mutex> lock(mutex_);
      add_suspect_locked(peer);
    }
  }
  return answers;
}

std::vector<Mesh::PeerReport> Mesh::ask_positions(const std::vector<int>& peers, uint64_t group,
                                                  std::chrono::milliseconds grace) {
  const uint64_t probe = last_probe_.fetch_add(1, std::memory_order_relaxed) + 1;
  std::vector<PeerReport> reports(peers.size());
  std::vector<size_t> waiting;
  for (size_t i = 0; i < peers.size(); ++i) {
    if (peers[i] == rank_ || !connected(peers[i])) continue;
    pair(peers[i]).send_liveness_probe(probe, group);
    waiting.push_back(i);
  }
  const Deadline deadline = Deadline::after(grace);
  while (!waiting.empty()) {
    progress();  // answers may be ours to read while this thread polls
    std::erase_if(waiting, [&](size_t i) {
      Pair& asked = pair(peers[i]);
      if (!asked.liveness_answered(probe)) return false;
      reports[i].answered = true;
      // A later probe about another group may have overtaken ours: alive, position unknown.
      if (std::optional<uint64_t> code = asked.answered_position(probe, group)) reports[i].position = decode_position(*code);
      return true;
    });
    if (waiting.empty() || deadline.expired()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i : waiting) add_suspect_locked(peers[i]);
  return reports;
}

}  // namespace chorus::transport
