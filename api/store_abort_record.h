// The abort record (transport/abort_record.h) in the job's rendezvous store:
// key "abort/<generation>/<rank>" under the bootstrap's store, so a
// shrunken job's ranks (a new generation, renumbered) never read an old one.
#pragma once

#include <cstdint>
#include <memory>

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

}  // namespace chorus::detail
