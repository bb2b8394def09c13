// Board::Wait: who a board call waits for, for what, in which call; the
// context of its slow path and of its errors. Internal to the board's
// sources (board_exchange.cc, board_blocks.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "algorithms/execution/communicator.h"
#include "algorithms/model/call.h"
#include "algorithms/shared_memory/board_exchange.h"
#include "base/deadline.h"
#include "base/log.h"

namespace chorus::algorithms {

struct Board::Wait {
  const Communicator& communicator;
  const Call& call;
  uint32_t sequence;
  uint64_t call_number;  // on this board
  uint64_t stamp;
  uint64_t signature;
  Deadline deadline;
  // When this call first waited: what its timeout message counts from.
  mutable std::optional<Clock::time_point> waiting_since;

  std::string this_collective() const { return cat(to_string(call.collective), " #", sequence); }
};

inline std::byte* Board::slot_data(int member, const Wait& wait) const {
  return data_of(slot(member, wait.call_number), wait.call.bytes());
}

}  // namespace chorus::algorithms
