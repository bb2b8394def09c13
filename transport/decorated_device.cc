// The forwarding and failure bookkeeping of decorated_device.h.
#include "transport/decorated_device.h"

#include "base/error.h"
#include "base/log.h"

namespace chorus::transport {

bool DecoratedPair::post_recv_if_arrived(Request& request, Tag tag, std::span<std::byte> data, Memory memory) {
  if (memory.kind == MemoryKind::host) return inner_->post_recv_if_arrived(request, tag, data, memory);
  request.mark_pending();
  request.fail(std::make_exception_ptr(InvalidArgument(cat("a receive from any peer (here peer rank ", peer_rank(),
                                                           ") lands in host memory only, not ", to_string(memory)))));
  return true;
}

DecoratedDevice::DecoratedDevice(std::unique_ptr<Device> inner) : inner_(std::move(inner)) {
  inner_->set_failure_listener([this](std::exception_ptr reason) {
    record_failure(reason);
    notify_failure(reason);
  });
}

DecoratedDevice::~DecoratedDevice() {
  if (inner_) inner_->set_failure_listener(nullptr);
}

void DecoratedDevice::close_inner() {
  inner_->set_failure_listener(nullptr);
  inner_.reset();
}

void DecoratedDevice::record_failure(std::exception_ptr reason) {
  std::lock_guard lock(failure_mutex_);
  if (!failure_) failure_ = reason;
}

void DecoratedDevice::abort_async(std::exception_ptr reason) {
  record_failure(reason);
  inner_->abort_async(reason);  // its failed requests wake the decorator's worker
}

std::exception_ptr DecoratedDevice::failure() const {
  {
    std::lock_guard lock(failure_mutex_);
    if (failure_) return failure_;
  }
  return inner_ ? inner_->failure() : nullptr;
}

}  // namespace chorus::transport
