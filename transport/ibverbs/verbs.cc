// Memory regions, device capabilities and the listening address.
#include "transport/ibverbs/verbs.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "transport/file_descriptor.h"
#include "transport/ibverbs/ibverbs.h"
#include "transport/tcp/socket.h"

namespace chorus::transport::ibverbs {

namespace {

std::atomic<uint64_t>& regions_registered() {
  static std::atomic<uint64_t> count{0};
  return count;
}

}  // namespace

uint64_t memory_regions_registered() { return regions_registered().load(std::memory_order_relaxed); }

std::shared_ptr<Registration> Registrar::register_range(const std::byte* address, size_t bytes, Memory memory) {
  if (memory.kind != MemoryKind::host)
    throw InvalidArgument(cat("rank ", rank_, ": the ibverbs transport cannot register ", to_string(memory),
                              " memory"));
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(address) & ~(page - 1);
  const auto end = (reinterpret_cast<uintptr_t>(address) + std::max<size_t>(bytes, 1) + page - 1) & ~(page - 1);
  auto* start = reinterpret_cast<std::byte*>(begin);
  const size_t length = end - begin;
  int access = kAccess;
  if (on_demand_) access |= IBV_ACCESS_ON_DEMAND;
  ibv_mr* mr = ibv_reg_mr(pd_, start, length, access);
  if (mr) regions_registered().fetch_add(1, std::memory_order_relaxed);
  if (!mr)
    throw IoError(cat("rank ", rank_, ": cannot register ", length, " bytes of memory with the RDMA device: ",
                      errno_text(errno),
                      errno == ENOMEM || errno == EPERM ? " (raise the locked-memory limit: ulimit -l unlimited)" : ""));
  return std::make_shared<MemoryRegion>(mr, start, length, memory);
}

bool supports_on_demand_paging(ibv_context* context) {
  ibv_device_attr_ex attributes{};
  if (ibv_query_device_ex(context, nullptr, &attributes) != 0) return false;
  const auto& odp = attributes.odp_caps;
  if (!(odp.general_caps & IBV_ODP_SUPPORT)) return false;
  const uint32_t needed = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ;
  return (odp.per_transport_caps.rc_odp_caps & needed) == needed;
}

namespace {

struct DeviceList {
  int count = 0;
  ibv_device** devices = nullptr;
  DeviceList() { devices = ibv_get_device_list(&count); }
  ~DeviceList() {
    if (devices) ibv_free_device_list(devices);
  }
};

// The IP address in a GID: IPv4-mapped (::ffff:a.b.c.d, RoCE v2 over IPv4)
// or a global IPv6 one; nothing for link-local and IB GIDs.
bool address_of_gid(const ibv_gid& gid, sockaddr_storage& out) {
  const uint8_t* raw = gid.raw;
  static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(raw, v4_prefix, 12) == 0) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&out);
    v4->sin_family = AF_INET;
    std::memcpy(&v4->sin_addr, raw + 12, 4);
    return true;
  }
  const bool zero = std::all_of(raw, raw + 16, [](uint8_t b) { return b == 0; });
  if (zero || (raw[0] == 0xfe && (raw[1] & 0xc0) == 0x80)) return false;
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out);
  v6->sin6_family = AF_INET6;
  std::memcpy(&v6->sin6_addr, raw, 16);
  return true;
}

sockaddr_storage address_of_ib_device(const std::string& spec, int rank) {
  std::string name = spec;
  int port = 1;
  int gid_index = -1;
  auto invalid = [&](const std::string& why) {
    return InvalidArgument(cat("rank ", rank, ": CHORUS_IB_DEVICE=", spec, ": ", why));
  };
  if (auto colon = name.find(':'); colon != std::string::npos) {
    std::string rest = name.substr(colon + 1);
    name.resize(colon);
    auto second = rest.find(':');
    try {
      port = std::stoi(rest.substr(0, second));
      if (second != std::string::npos) gid_index = std::stoi(rest.substr(second + 1));
    } catch (const std::exception&) {
      throw invalid("expected name[:port[:gid index]]");
    }
  }
  DeviceList list;
  std::string known;
  for (int i = 0; i < list.count; ++i) {
    const std::string device_name = ibv_get_device_name(list.devices[i]);
    known += cat(known.empty() ? "" : ", ", device_name);
    if (device_name != name) continue;
    ibv_context* context = ibv_open_device(list.devices[i]);
    if (!context) throw invalid(cat("cannot open the device: ", errno_text(errno)));
    ibv_port_attr port_attributes{};
    const bool port_ok = ibv_query_port(context, static_cast<uint8_t>(port), &port_attributes) == 0;
    sockaddr_storage address{};
    bool found = false;
    for (int index = gid_index < 0 ? 0 : gid_index; port_ok && index < port_attributes.gid_tbl_len; ++index) {
      ibv_gid gid{};
      if (ibv_query_gid(context, static_cast<uint8_t>(port), index, &gid) == 0 && address_of_gid(gid, address)) {
        found = true;
        break;
      }
      if (gid_index >= 0) break;
    }
    ibv_close_device(context);
    if (!port_ok) throw invalid(cat("the device has no port ", port));
    if (!found)
      throw invalid(gid_index >= 0 ? cat("GID ", gid_index, " of port ", port, " carries no IP address")
                                   : cat("no GID of port ", port, " carries an IP address (is the port up?)"));
    return address;
  }
  throw invalid(cat("no such RDMA device (this host has: ", known.empty() ? "none" : known, ")"));
}

}  // namespace

sockaddr_storage choose_listen_address(const std::string& ib_device, const std::string& interface,
                                       const std::string& hostname, const JobPlacement& placement, int rank) {
  if (!ib_device.empty()) return address_of_ib_device(ib_device, rank);
  // RDMA does not run over loopback: the verbs device skips those rules.
  const tcp::ChosenAddress chosen =
      tcp::choose_local_address(interface, hostname, placement, /*loopback_usable=*/false, rank);
  CHORUS_LOG(info, rank, "ibverbs: listening on ", chosen.address.host_string(), ": ", chosen.reason);
  sockaddr_storage address{};
  std::memcpy(&address, chosen.address.get(), chosen.address.length());
  return address;
}

std::string completion_status_text(ibv_wc_status status) {
  std::string text = ibv_wc_status_str(status);
  if (status == IBV_WC_RETRY_EXC_ERR) text += " (the peer stopped acknowledging: it may have died)";
  if (status == IBV_WC_RNR_RETRY_EXC_ERR) text += " (the peer had no receive posted)";
  return text;
}

}  // namespace chorus::transport::ibverbs
