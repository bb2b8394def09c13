// The table of transports. The one place outside transport/<name>/ that
// names a concrete transport.
#include "transport/registry.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "transport/shm/shm.h"
#include "transport/tcp/tcp.h"
#if CHORUS_HAVE_IBVERBS
#include "transport/ibverbs/ibverbs.h"
#endif
#include "memory/registry.h"
#include "transport/host_staging/host_staging.h"
#if CHORUS_HAVE_CUDA
#include "transport/cuda_ipc/cuda_ipc.h"
#endif

namespace chorus::transport {
namespace {

// Transports that move host memory only move the device memory kinds of
// this build too, through pinned chunks (host_staging.h).
std::unique_ptr<Device> moving_device_memory(std::unique_ptr<Device> device) {
  for (MemoryKind kind : built_device_kinds())
    device = host_staging::wrap(std::move(device), kind, host_staging::kind_copier(kind));
  return device;
}

// The part every transport's options share, from the registry's options:
// filled here once for every transport.
void fill_common(CommonDeviceOptions& common, const DeviceOptions& options) {
  common.rank = options.rank;
  common.size = options.size;
  common.describe_signature = options.describe_signature;
  common.secret = options.config.secret;
  common.max_unexpected_bytes = options.config.max_unexpected_bytes;
  common.positions = options.positions;
}

void fill_network(NetworkDeviceOptions& network, const DeviceOptions& options) {
  fill_common(network, options);
  network.interface = options.interface;
  network.hostname = options.hostname;
  if (network.interface.empty() && network.hostname.empty()) network.interface = options.config.socket_interface;
  network.placement = options.config.placement;
  network.streams = options.streams;
}

std::unique_ptr<Device> create_tcp_device(const DeviceOptions& options) {
  tcp::TcpDeviceOptions tcp_options;
  fill_network(tcp_options, options);
  tcp_options.tls = options.config.tls;
  return tcp::create_device(tcp_options);
}

std::unique_ptr<Device> create_shm_device(const DeviceOptions& options) {
  shm::ShmDeviceOptions shm_options;
  fill_common(shm_options, options);
  shm_options.single_copy = options.config.shm_single_copy;
  return shm::create_device(shm_options);
}

#if CHORUS_HAVE_IBVERBS
std::unique_ptr<Device> create_ibverbs_device(const DeviceOptions& options) {
  ibverbs::IbverbsDeviceOptions verbs_options;
  fill_network(verbs_options, options);
  verbs_options.ib_device = options.config.ib_device;
  return ibverbs::create_device(verbs_options);
}

std::unique_ptr<Device> create_ibverbs(const DeviceOptions& options) {
  return moving_device_memory(create_ibverbs_device(options));
}

// Both ranks found an RDMA device behind their addresses; whether the
// fabric joins them shows at connect, as an error naming the address.
bool ibverbs_can_connect(const PeerView& a, const PeerView& b) { return ibverbs::can_connect(a.address, b.address); }
#endif

std::unique_ptr<Device> create_tcp(const DeviceOptions& options) {
  return moving_device_memory(create_tcp_device(options));
}

std::unique_ptr<Device> create_shm(const DeviceOptions& options) {
  return moving_device_memory(create_shm_device(options));
}

// Shared memory needs one host as the topology sees it (so CHORUS_HOST_ID
// faking two hosts on one machine keeps them apart) and one kernel, user
// and network namespace in fact.
bool shm_can_connect(const PeerView& a, const PeerView& b) {
  return a.host_id == b.host_id && shm::can_connect(a.address, b.address);
}

#if CHORUS_HAVE_CUDA
// Device memory between processes of one host; host memory over the shm
// pair it wraps. Offered only by processes that already use CUDA.
std::unique_ptr<Device> create_cuda_ipc(const DeviceOptions& options) {
  cuda_ipc::CudaIpcDeviceOptions ipc_options;
  ipc_options.rank = options.rank;
  // Device-memory messages go by the IPC protocol only where the job asks
  // for it; else through the shm pair in pinned chunks, like shm's own.
  ipc_options.move_messages = options.config.cuda_ipc_messages;
  ipc_options.create_host_device = [options] {
    return options.config.cuda_ipc_messages ? create_shm_device(options) : moving_device_memory(create_shm_device(options));
  };
  ipc_options.host_can_connect = shm::can_connect;
  const std::vector<std::string>& named = options.config.transports;
  ipc_options.asked = std::find(named.begin(), named.end(), "cuda_ipc") != named.end();
  return cuda_ipc::create_device(ipc_options);
}

bool cuda_ipc_can_connect(const PeerView& a, const PeerView& b) {
  return a.host_id == b.host_id && cuda_ipc::can_connect(a.address, b.address, shm::can_connect);
}
#endif

// TCP reaches any peer that published a TCP address; whether the network
// routes between them shows at connect, as an error naming the address.
bool tcp_can_connect(const PeerView& a, const PeerView& b) { return !a.address.empty() && !b.address.empty(); }

// In order of preference.
const TransportEntry transport_table[] = {
#if CHORUS_HAVE_CUDA
    {"cuda_ipc", create_cuda_ipc, cuda_ipc_can_connect},
#endif
    {"shm", create_shm, shm_can_connect},
#if CHORUS_HAVE_IBVERBS
    {"ibverbs", create_ibverbs, ibverbs_can_connect},
#endif
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
