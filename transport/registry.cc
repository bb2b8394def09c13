// The table of transports. The one place outside transport/<name>/ that
// names a concrete transport.
#include "transport/registry.h"

#include "base/error.h"
#include "base/log.h"
#include "transport/tcp/tcp.h"

namespace chorus::transport {
namespace {

std::unique_ptr<Device> create_tcp(const DeviceOptions& options) {
  tcp::TcpDeviceOptions tcp_options;
  tcp_options.rank = options.rank;
  tcp_options.size = options.size;
  tcp_options.interface = options.interface;
  tcp_options.hostname = options.hostname;
  if (tcp_options.interface.empty() && tcp_options.hostname.empty())
    tcp_options.interface = options.config.socket_interface;
  tcp_options.streams = options.streams;
  tcp_options.describe_signature = options.describe_signature;
  return tcp::create_device(tcp_options);
}

// TCP reaches any peer that published a TCP address; whether the network
// routes between them shows at connect, as an error naming the address.
bool tcp_can_connect(const PeerView& a, const PeerView& b) { return !a.address.empty() && !b.address.empty(); }

const TransportEntry transport_table[] = {
    {"tcp", create_tcp, tcp_can_connect},
};

}  // namespace

std::span<const TransportEntry> all_transports() { return transport_table; }

const TransportEntry* find_transport(std::string_view name) {
  for (const TransportEntry& entry : transport_table)
    if (entry.name == name) return &entry;
  return nullptr;
}

std::string transport_names() {
  std::string names;
  for (const TransportEntry& entry : transport_table) names += cat(names.empty() ? "" : ", ", entry.name);
  return names;
}

}  // namespace chorus::transport
