// The tcp transport's factory: its Device is the shared EngineDevice over
// its Engine (engine.h), its Pair the shared ConnectionPair over one
// Connection (connection.h).
#include "transport/engine_device.h"
#include "transport/tcp/engine.h"
#include "transport/tcp/tcp.h"

namespace chorus::transport::tcp {

std::unique_ptr<Device> create_device(const TcpDeviceOptions& options) {
  return start_engine_device<Engine>("tcp", options);
}

}  // namespace chorus::transport::tcp
