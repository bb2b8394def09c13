// The shm transport's factory: its Device is the shared EngineDevice over
// its Engine (engine.h), its Pair the shared ConnectionPair over one
// Connection (connection.h).
#include "transport/engine_device.h"
#include "transport/shm/engine.h"
#include "transport/shm/shm.h"

namespace chorus::transport::shm {

std::unique_ptr<Device> create_device(const ShmDeviceOptions& options) {
  return start_engine_device<Engine>("shm", options);
}

}  // namespace chorus::transport::shm
