// The abort and suspect records (transport/abort_record.h) in the job's
// rendezvous store. The abort record:
// key "abort/<generation>/<rank>" under the bootstrap's store, so a
// shrunken job's ranks (a new generation, renumbered) never read an old one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/store.h"
#include "transport/abort_record.h"

namespace chorus::detail {

class StoreAbortRecord : public transport::AbortRecord {
 public:
  StoreAbortRecord(std::shared_ptr<Store> store, uint32_t generation, int rank);
  void post(int rank, const transport::AbortReport& report) override;
  std::optional<transport::AbortReport> find(int rank, std::chrono::milliseconds wait) override;

 private:
  std::shared_ptr<Store> store_;
  uint32_t generation_;
  int rank_;  // this one, for the log
};

// The suspect record (transport/abort_record.h) in the job's rendezvous
// store, for the launcher that hosts it: each report takes the next number
// of the counter "suspects/<generation>/count" and is left at
// "suspects/<generation>/<number>" as text, "<rank>:<suspect>,<suspect>", so
// a reader learns how many there are and reads each once, in the order the
// ranks reported.
class StoreSuspectRecord : public transport::SuspectRecord {
 public:
  StoreSuspectRecord(std::shared_ptr<Store> store, uint32_t generation);
  void post(int rank, const std::vector<int>& suspects) override;

 private:
  std::shared_ptr<Store> store_;
  uint32_t generation_;
};

std::string suspect_count_key(uint32_t generation);
std::string suspect_report_key(uint32_t generation, int64_t number);
std::vector<std::byte> encode_suspect_report(int rank, const std::vector<int>& suspects);
// The reporting rank and its suspects, or nullopt for bytes no rank of a
// job of `size` ranks wrote.
std::optional<std::pair<int, std::vector<int>>> decode_suspect_report(std::span<const std::byte> bytes, int size);

}  // namespace chorus::detail
