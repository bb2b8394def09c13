// Where a rank leaves its abort report for peers it holds no connection to.
// With connections on demand (transport/mesh.h) a rank that aborts before
// some peer dialed it, or before it dialed that peer, has no connection to
// tell it why: the peer finds out by knocking on its listener
// (transport/knock.h) or from its refused dial, which says only that it
// aborted. The record, kept in the job's rendezvous store, holds the words,
// so every rank still fails with the origin's own message ("rank 0: peer
// rank 1 aborted: rank 1: split color -7 ..."), as over a full mesh.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "transport/abort_report.h"

namespace chorus::transport {

class AbortRecord {
 public:
  virtual ~AbortRecord() = default;
  // Leaves `rank`'s report; best effort (a store that is gone is ignored).
  virtual void post(int rank, const AbortReport& report) = 0;
  // The report `rank` left, if one is there within `wait`.
  virtual std::optional<AbortReport> find(int rank, std::chrono::milliseconds wait) = 0;
};

// Where a failing rank names the peers it holds responsible: those it saw
// die or stop answering (Mesh::suspects) when its Mesh first failed. A
// local launcher reads them once the job is over, to name the rank that
// failed first rather than the first survivor to exit (tools/first_failure.h).
class SuspectRecord {
 public:
  virtual ~SuspectRecord() = default;
  // Leaves `rank`'s suspects; best effort and bounded in time, as AbortRecord::post.
  virtual void post(int rank, const std::vector<int>& suspects) = 0;
};

// The report as bytes: error class and blamed rank (8 bytes each, little
// endian), then the text. decode checks what a store may hand back: too
// short, or a text past kMaxAbortTextBytes, is nullopt.
std::vector<std::byte> encode_abort_report(const AbortReport& report);
std::optional<AbortReport> decode_abort_report(std::span<const std::byte> bytes);

}  // namespace chorus::transport
