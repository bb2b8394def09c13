// The device a stream transport's connection answers to (tcp's or shm's
// ConnectionOwner), as the harnesses that drive one
// connection alone (tcp_frames, shm_channel) play it: rank 0 of a job that
// is never shutting down, whose first failure it keeps for the harness to
// react to, with no limit on buffered messages the input could reach.
// A harness derives from it for the calls only its interface has.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <utility>

#include "base/log.h"
#include "transport/transport.h"

namespace chorus::fuzz {

template <class OwnerInterface>
class RecordingOwner : public OwnerInterface {
 public:
  int rank() const override { return 0; }
  bool failed() const override { return failure_ != nullptr; }
  std::exception_ptr failure() const override { return failure_; }
  void abort(std::exception_ptr reason, LogLevel) override {
    if (!failure_) failure_ = std::move(reason);
  }
  bool shutting_down() const override { return false; }
  std::string describe_signature(uint64_t signature) const override { return cat("signature ", signature); }
  size_t max_unexpected_bytes() const override { return size_t{1} << 30; }
  uint64_t position_in(uint64_t) const override { return 0; }
  transport::ArrivalNotifier& arrivals() override { return arrivals_; }

 private:
  std::exception_ptr failure_;
  transport::ArrivalNotifier arrivals_;
};

}  // namespace chorus::fuzz
