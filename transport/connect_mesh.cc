// Choosing a transport per peer and connecting the mesh.
#include "transport/connect_mesh.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "base/deadline.h"
#include "base/error.h"
#include "base/log.h"
#include "memory/registry.h"
#include "transport/link_probe.h"
#include "transport/published_address.h"

namespace chorus::transport {
namespace {

std::vector<const TransportEntry*> resolve_transports(const MeshSettings& settings) {
  const std::vector<std::string>& names = settings.transports;
  std::vector<const TransportEntry*> entries;
  if (names.empty()) {
    for (const TransportEntry& entry : all_transports()) entries.push_back(&entry);
    return entries;
  }
  for (const std::string& name : names) {
    const TransportEntry* entry = find_transport(name);
    if (!entry)
      throw InvalidArgument(cat("rank ", settings.device.rank, ": unknown transport '", name,
                                "' in CHORUS_TRANSPORT / ConnectOptions::transports (this build has: ",
                                transport_names(), ")"));
    if (std::find(entries.begin(), entries.end(), entry) != entries.end())
      throw InvalidArgument(cat("rank ", settings.device.rank, ": transport '", name, "' is named twice"));
    entries.push_back(entry);
  }
  return entries;
}

std::string offered(const PublishedAddress& address) {
  std::string names;
  for (const auto& section : address.sections) names += cat(names.empty() ? "" : ",", section.transport);
  return names.empty() ? "nothing" : names;
}

// "1,2,5-7"
std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    text += cat(text.empty() ? "" : ",", ranks[i]);
    if (j > i) text += cat(j == i + 1 ? "," : "-", ranks[j]);
    i = j;
  }
  return text;
}

// Each rank's slowest link per level by its transports' own models, as
// 8-byte doubles: local alpha, local beta, remote alpha, remote beta, 0 where
// it has no peer at that level; then 1 where every peer's transport moves
// every device memory kind of this build (memory/registry.h), else 0; then 1
// where every peer's transport also maps that memory (Device::maps_peer_memory),
// else 0; then the id of its device where processes take turns of it
// (MemoryKindSupport::time_sliced_device), else 0; then per level (local,
// remote) what it measured (link_probe.h): fastest exchange, typical
// exchange, beta; NaN for a level it did not lead.
constexpr size_t kDeviceMemoryView = 4;
constexpr size_t kPeerMappingView = 5;
constexpr size_t kTimeSlicedDeviceView = 6;
constexpr size_t kMeasuredView = 7;
constexpr size_t kMeasuredNumbers = 3;
constexpr size_t kViewNumbers = kMeasuredView + 2 * kMeasuredNumbers;

struct JobView {
  std::array<LinkModel, 2> levels;
  std::array<bool, 2> measured{};
  std::vector<bool> device_memory_ranks;
  std::vector<bool> peer_mapping_ranks;
  bool one_time_sliced_device = false;
};

// The id of the device this rank uses where its processes take turns of it
// (kind_support.h), as the view's double (ids keep to 52 bits). Asked only
// where every peer maps device memory: that transport loaded the kind
// already, so a host-only job does not load it here.
double time_sliced_device(const std::vector<MemoryKind>& kinds) {
  for (MemoryKind kind : kinds) {
    try {
      if (const uint64_t id = memory_kind_support(kind).time_sliced_device()) return static_cast<double>(id);
    } catch (const Error&) {
      // The kind cannot say: as if its processes ran side by side.
    }
  }
  return 0;
}

// A measured number is trusted only inside the range an override may give.
bool plausible(double value) { return std::isfinite(value) && value >= 1e-12 && value <= 1e12; }

JobView agree_on_job_view(const Mesh& mesh, const std::vector<PublishedAddress>& published,
                          const MeasuredLinks& measured, const Allgather& allgather) {
  const int rank = mesh.rank();
  std::array<double, kViewNumbers> view{};
  const std::vector<MemoryKind> device_kinds = built_device_kinds();
  view[kDeviceMemoryView] = device_kinds.empty() ? 0 : 1;
  view[kPeerMappingView] = view[kDeviceMemoryView];
  for (int peer = 0; peer < mesh.size(); ++peer) {
    if (peer == rank) continue;
    for (MemoryKind kind : device_kinds) {
      if (!mesh.device_of(peer).accepts(Memory{kind, 0})) view[kDeviceMemoryView] = 0;
      if (!mesh.device_of(peer).maps_peer_memory(Memory{kind, 0})) view[kPeerMappingView] = 0;
    }
    const LinkModel link = mesh.link_model(peer);
    const size_t level =
        published[static_cast<size_t>(peer)].host_id == published[static_cast<size_t>(rank)].host_id ? 0 : 2;
    view[level] = std::max(view[level], link.alpha_seconds);
    view[level + 1] = std::max(view[level + 1], link.beta_seconds_per_byte);
  }
  if (mesh.size() > 1 && view[kPeerMappingView] == 1) view[kTimeSlicedDeviceView] = time_sliced_device(device_kinds);
  const double not_measured = std::numeric_limits<double>::quiet_NaN();
  const std::optional<LinkMeasurement>* measured_levels[] = {&measured.local, &measured.remote};
  for (size_t level = 0; level < 2; ++level) {
    const std::optional<LinkMeasurement>& link = *measured_levels[level];
    double* numbers = &view[kMeasuredView + kMeasuredNumbers * level];
    numbers[0] = link ? link->fastest_exchange_seconds : not_measured;
    numbers[1] = link ? link->typical_exchange_seconds : not_measured;
    numbers[2] = link ? link->beta_seconds_per_byte : not_measured;
  }
  std::vector<std::byte> mine(sizeof(view));
  std::memcpy(mine.data(), view.data(), sizeof(view));
  const std::vector<std::vector<std::byte>> views = allgather(mine);
  std::array<double, 4> slowest{};
  std::array<std::vector<LinkMeasurement>, 2> measurements;
  JobView job;
  job.one_time_sliced_device = !views.empty();
  double first_device = 0;
  for (size_t peer = 0; peer < views.size(); ++peer) {
    if (views[peer].size() != sizeof(view))
      throw InvalidArgument(cat("rank ", rank, ": rank ", peer, " published a link view of ", views[peer].size(),
                                " bytes, expected ", sizeof(view)));
    std::array<double, kViewNumbers> theirs;
    std::memcpy(theirs.data(), views[peer].data(), sizeof(theirs));
    for (size_t i = 0; i < slowest.size(); ++i)
      if (std::isfinite(theirs[i])) slowest[i] = std::max(slowest[i], theirs[i]);
    job.device_memory_ranks.push_back(theirs[kDeviceMemoryView] == 1);
    job.peer_mapping_ranks.push_back(theirs[kPeerMappingView] == 1);
    if (peer == 0) first_device = theirs[kTimeSlicedDeviceView];
    if (!(theirs[kTimeSlicedDeviceView] > 0) || theirs[kTimeSlicedDeviceView] != first_device)
      job.one_time_sliced_device = false;
    // A level counts only with all its numbers: they come from one pair.
    for (size_t level = 0; level < 2; ++level) {
      const double* numbers = &theirs[kMeasuredView + kMeasuredNumbers * level];
      if (!plausible(numbers[0]) || !plausible(numbers[1]) || !plausible(numbers[2])) continue;
      measurements[level].push_back({numbers[0], numbers[1], numbers[2]});
    }
  }
  // Per level: what its pairs measured, combined (link_probe.h), else the
  // transports' slowest model.
  std::array<std::optional<LinkModel>, 2> levels = combine_measurements(measurements);
  for (size_t level = 0; level < 2; ++level) {
    if (levels[level])
      job.measured[level] = true;
    else if (slowest[2 * level + 1] > 0)
      levels[level] = LinkModel{slowest[2 * level], slowest[2 * level + 1]};
  }
  if (!levels[0]) {
    levels[0] = levels[1].value_or(LinkModel{});
    job.measured[0] = job.measured[1];
  }
  if (!levels[1]) {
    levels[1] = levels[0];
    job.measured[1] = job.measured[0];
  }
  job.levels = {*levels[0], *levels[1]};
  return job;
}

}  // namespace

ConnectedMesh connect_mesh(const MeshSettings& settings, const Allgather& allgather) {
  const int rank = settings.device.rank;
  const int size = settings.device.size;
  if (size < 1 || rank < 0 || rank >= size)
    throw InvalidArgument(cat("rank ", rank, " is out of range for a job of size ", size));
  const Deadline deadline = Deadline::after(settings.timeout);

  std::vector<const TransportEntry*> entries = resolve_transports(settings);
  std::vector<std::unique_ptr<Device>> devices;
  PublishedAddress mine;
  mine.host_id = host_identity(settings.host_id, mine.host_name);
  mine.machine_id = machine_identity();
  mine.cpus = cpu_words();
  // One position table for the rank: every device's probe answers read it.
  auto positions = std::make_shared<PositionTable>();
  DeviceOptions device_options = settings.device;
  device_options.positions = positions;
  for (const TransportEntry* entry : entries) {
    devices.push_back(entry->create(device_options));
    mine.sections.push_back({std::string(entry->name), devices.back()->address()});
  }

  const std::vector<std::vector<std::byte>> blobs = allgather(encode_published_address(mine));
  if (blobs.size() != static_cast<size_t>(size))
    throw InvalidArgument(cat("rank ", rank, ": the bootstrap returned ", blobs.size(), " addresses for ", size,
                              " ranks"));
  std::vector<PublishedAddress> published;
  published.reserve(blobs.size());
  for (int peer = 0; peer < size; ++peer)
    published.push_back(peer == rank ? mine : decode_published_address(blobs[static_cast<size_t>(peer)], rank, peer));

  // Per peer: the first transport in the lower rank's order that both offer
  // and that can connect them. Both ranks compute the same answer.
  auto device_named = [&](std::string_view name) -> Device* {
    for (auto& device : devices)
      if (device->name() == name) return device.get();
    return nullptr;
  };
  std::vector<Device*> chosen(static_cast<size_t>(size), nullptr);
  std::vector<std::span<const std::byte>> peer_sections(static_cast<size_t>(size));
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const PublishedAddress& theirs = published[static_cast<size_t>(peer)];
    const PublishedAddress& lower = published[static_cast<size_t>(std::min(rank, peer))];
    for (const auto& section : lower.sections) {
      const auto* my_section = mine.find(section.transport);
      const auto* their_section = theirs.find(section.transport);
      const TransportEntry* entry = find_transport(section.transport);
      if (!my_section || !their_section || !entry) continue;
      const PeerView me{rank, mine.host_id, my_section->address};
      const PeerView them{peer, theirs.host_id, their_section->address};
      if (!entry->can_connect(me, them)) continue;
      chosen[static_cast<size_t>(peer)] = device_named(section.transport);
      peer_sections[static_cast<size_t>(peer)] = their_section->address;
      break;
    }
    if (!chosen[static_cast<size_t>(peer)])
      throw InvalidArgument(cat("rank ", rank, ": no transport connects it to rank ", peer, ": rank ", rank,
                                " offers ", offered(mine), " on host ", mine.host_name, ", rank ", peer, " offers ",
                                offered(theirs), " on host ", theirs.host_name,
                                " (CHORUS_TRANSPORT / ConnectOptions::transports)"));
  }
  // Every peer's address is checked before anyone dials, so a disagreement
  // (stream counts, versions) fails on every rank at once.
  for (int peer = 0; peer < size; ++peer)
    if (peer != rank) chosen[static_cast<size_t>(peer)]->check_peer(peer, peer_sections[static_cast<size_t>(peer)]);

  // Devices that serve nobody go now (a TCP listener and its thread where
  // every peer is on this host).
  std::erase_if(devices, [&](const std::unique_ptr<Device>& device) {
    return std::find(chosen.begin(), chosen.end(), device.get()) == chosen.end();
  });
  auto mesh = std::make_shared<Mesh>(rank, size, std::move(devices), positions);

  std::vector<int> peers;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::span<const std::byte> section = peer_sections[static_cast<size_t>(peer)];
    mesh->set_route(peer, chosen[static_cast<size_t>(peer)], std::vector<std::byte>(section.begin(), section.end()));
    peers.push_back(peer);
  }
  // Every rank walks peers and streams in the same order; each transport
  // accepts on its own thread, so a rank dialing never waits for the one it
  // dials to reach that pair in its own walk. On demand, the first
  // collective or message that needs a pair connects it instead.
  if (!settings.on_demand) mesh->connect(peers, deadline);
  MeasuredLinks measured;
  if (settings.measure_links) {
    std::vector<uint64_t> host_ids;
    for (const PublishedAddress& address : published) host_ids.push_back(address.host_id);
    measured = measure_links(*mesh, host_ids, deadline);
  }
  JobView job = agree_on_job_view(*mesh, published, measured, allgather);
  const std::array<LinkModel, 2> levels = job.levels;
  mesh->set_device_memory_ranks(std::move(job.device_memory_ranks));
  mesh->set_peer_mapping_ranks(std::move(job.peer_mapping_ranks));
  mesh->set_one_time_sliced_device(job.one_time_sliced_device);

  if (log_enabled(LogLevel::info)) {
    std::map<std::string, std::vector<int>> peers_by_transport;
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank) peers_by_transport[std::string(chosen[static_cast<size_t>(peer)]->name())].push_back(peer);
    std::string summary;
    for (const auto& [name, peers] : peers_by_transport)
      summary += cat(summary.empty() ? "" : "; ", name, " serves ", peers.size() == 1 ? "peer " : "peers ",
                     rank_list(peers));
    CHORUS_LOG(info, rank, settings.on_demand ? "ready to connect on demand on host " : "connected on host ",
               mine.host_name, ": ", summary.empty() ? "no peers" : summary);
  }

  ConnectedMesh connected;
  connected.mesh = std::move(mesh);
  connected.local = levels[0];
  connected.remote = levels[1];
  connected.measured = job.measured;
  for (const PublishedAddress& address : published) {
    connected.host_ids.push_back(address.host_id);
    connected.machine_ids.push_back(address.machine_id);
    connected.cpus.push_back(address.cpus);
    connected.host_names.push_back(address.host_name);
  }
  return connected;
}

}  // namespace chorus::transport
