// The abort board (transport/abort_board.h) in the job's rendezvous store:
// key "abort/<generation>/<rank>" under the bootstrap's store, so a
// shrunken job's ranks (a new generation, renumbered) never read an old one.
#pragma once

#include <cstdint>
#include <memory>

#include "rendezvous/store.h"
#include "transport/abort_board.h"

namespace chorus::detail {

class StoreAbortBoard : public transport::AbortBoard {
 public:
  StoreAbortBoard(std::shared_ptr<Store> store, uint32_t generation, int rank);
  void post(int rank, const transport::AbortReport& report) override;
  std::optional<transport::AbortReport> find(int rank, std::chrono::milliseconds wait) override;

 private:
  std::shared_ptr<Store> store_;
  uint32_t generation_;
  int rank_;  // this one, for the log
};

}  // namespace chorus::detail
