// The link measurement at connect (link_probe.h).
//
// The wire between a leader and its partner, all on stream 0 of their Pair,
// under a group no Context uses. Both directions move at once, as in a
// collective's step (every rank sends and receives), so contention for the
// cores and the wire shows in what is measured.
//  1. Exchanges: both send 8 bytes and wait for the other's, kWarmup +
//     kTimedExchanges times, timed by the leader.
//  2. Transfers: the leader's 8-byte command N (N = 0: stop); the partner
//     posts its receive of N bytes, says "ready", sends N bytes of its own,
//     and acknowledges the leader's N once they landed. The leader times
//     from "ready" to that acknowledgement: two alphas and N bytes each way.
// Every receive is posted before its message can arrive, so the time is the
// wire's and the transport's, not that of buffering an unexpected message.
#include "transport/link_probe.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include "base/error.h"
#include "base/log.h"

namespace chorus::transport {

namespace {

constexpr uint64_t kProbeGroup = 0x6c696e6b2d70726full;  // "link-pro"
constexpr uint64_t kDone = 0;
constexpr int kWarmupExchanges = 3;
constexpr int kTimedExchanges = 30;
constexpr size_t kFirstTransferBytes = size_t{64} << 10;
constexpr size_t kMaxTransferBytes = size_t{8} << 20;
// Interference on a link only ever slows a transfer (another process on
// the core, a flow in the same queue), so the fastest of several is the
// steadiest estimate of what the link can do; the cost model adds the
// sharing of cores itself (CostModel::cores_per_rank). With the median of
// three, 2 hosts x 2 ranks on 2 cores measured shared memory at 0.7-3.4
// GB/s across 20 connects, and a slow probe changed what auto chose.
constexpr int kTimedTransfers = 5;
// A transfer this long is mostly bandwidth, not latency or a token bucket's burst.
constexpr std::chrono::microseconds kLongEnough{4000};
// How long a waiter reads its sockets itself before it sleeps: far longer
// than any exchange, so the probe measures the polling path a running
// collective takes. With the collectives' 200 us, a pair whose exchange
// once took longer (both ranks asleep, each message two wake-ups) stayed
// asleep for every exchange after it: 4 hosts x 1 rank on 2 cores measured
// 240 us where collectives take 20, in one run of four, and auto chose by
// that alpha.
constexpr std::chrono::milliseconds kPollFor{20};

enum Message : uint64_t { kCommand = 1, kReply = 2, kPayload = 3, kExchange = 4 };

class Prober {
 public:
  Prober(Mesh& mesh, int peer, Deadline deadline)
      : mesh_(mesh), peer_(peer), deadline_(deadline), pair_(mesh.pair(peer)), device_(mesh.device_of(peer)) {}

  // One message in flight, posted by post() and waited for by finish().
  struct Posted {
    Request request;
    CompletionSignal signal;
    bool send = false;
    size_t bytes = 0;
  };
  void post_send(Posted& posted, Message kind, std::span<const std::byte> data) {
    start(posted, true, data.size());
    pair_.post_send(posted.request, tag_of(kind), data);
  }
  void post_receive(Posted& posted, Message kind, std::span<std::byte> data) {
    start(posted, false, data.size());
    pair_.post_recv(posted.request, tag_of(kind), data);
  }
  void finish(Posted& posted) { wait(posted.request, timeout_message(posted)); }

  void send_word(Message kind, uint64_t word) {
    std::byte bytes[sizeof(word)];
    std::memcpy(bytes, &word, sizeof(word));
    Posted posted;
    post_send(posted, kind, bytes);
    finish(posted);
  }
  uint64_t receive_word(Message kind) {
    std::byte bytes[sizeof(uint64_t)];
    Posted posted;
    post_receive(posted, kind, bytes);
    finish(posted);
    uint64_t word;
    std::memcpy(&word, bytes, sizeof(word));
    return word;
  }
  // Both send 8 bytes, each waits for the other's.
  void exchange() {
    std::byte mine[8] = {}, theirs[8];
    Posted sent, received;
    post_receive(received, kExchange, theirs);
    post_send(sent, kExchange, mine);
    finish(sent);
    finish(received);
  }
  int peer() const { return peer_; }
  int rank() const { return mesh_.rank(); }

 private:
  static Tag tag_of(Message kind) { return Tag{.value = kind, .signature = 0, .group = kProbeGroup}; }
  static void start(Posted& posted, bool send, size_t bytes) {
    posted.request.attach(&posted.signal);
    posted.send = send;
    posted.bytes = bytes;
  }
  std::string timeout_message(const Posted& posted) const {
    return cat("rank ", mesh_.rank(), ": timed out measuring the link to rank ", peer_, " (",
               posted.send ? "sending " : "receiving ", posted.bytes, " bytes)");
  }

  // Reads the sockets itself for a while (as a collective does, so the
  // alpha measured is the one collectives see), then sleeps until the
  // transport's thread completes the request.
  void wait(Request& request, const std::string& what) {
    const auto poll_until = Clock::now() + kPollFor;
    {
      PollingScope polling(device_);
      while (!request.finished() && Clock::now() < poll_until) {
        if (!device_.progress()) std::this_thread::yield();
      }
    }
    if (!request.finished()) {
      WaitingScope waiting(device_);
      request.wait(deadline_, what);
    }
    if (request.state() == Request::State::failed) std::rethrow_exception(request.error());
  }

  Mesh& mesh_;
  int peer_;
  Deadline deadline_;
  Pair& pair_;
  Device& device_;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

struct ExchangeTimes {
  double fastest = 0;
  double typical = 0;
};

// On both sides; only the leader's count.
ExchangeTimes time_exchanges(Prober& prober) {
  std::vector<double> times;
  for (int round = 0; round < kWarmupExchanges + kTimedExchanges; ++round) {
    const auto start = Clock::now();
    prober.exchange();
    if (round >= kWarmupExchanges) times.push_back(seconds_since(start));
  }
  return {*std::min_element(times.begin(), times.end()), median(times)};
}

LinkMeasurement lead(Prober& prober) {
  const ExchangeTimes exchanges = time_exchanges(prober);
  std::vector<std::byte> outgoing(kFirstTransferBytes), incoming(kFirstTransferBytes);
  std::vector<double> times;
  while (times.size() < static_cast<size_t>(kTimedTransfers)) {
    Prober::Posted theirs, mine;
    prober.post_receive(theirs, kPayload, incoming);
    prober.send_word(kCommand, outgoing.size());
    prober.receive_word(kReply);
    const auto start = Clock::now();
    prober.post_send(mine, kPayload, outgoing);
    prober.finish(mine);
    prober.finish(theirs);
    prober.receive_word(kReply);
    const double time = seconds_since(start);
    if (times.empty() && time < std::chrono::duration<double>(kLongEnough).count() &&
        outgoing.size() < kMaxTransferBytes) {
      outgoing.resize(std::min(outgoing.size() * 4, kMaxTransferBytes));
      incoming.resize(outgoing.size());
      continue;
    }
    times.push_back(time);
  }
  prober.send_word(kCommand, kDone);
  const double transfer = *std::min_element(times.begin(), times.end());
  // What the two 8-byte latencies leave (the fastest, as the transfer is);
  // never below half the time, so the exchanges cannot make the link look
  // infinitely fast.
  const double wire = std::max(transfer - 2 * exchanges.fastest, transfer / 2);
  CHORUS_LOG(debug, prober.rank(), "link probe to rank ", prober.peer(), ": 8-byte exchanges ",
             exchanges.fastest * 1e6, " us fastest, ", exchanges.typical * 1e6, " us median; ", outgoing.size(),
             " bytes each way in ", transfer * 1e6, " us at the fastest of ", times.size());
  return LinkMeasurement{.fastest_exchange_seconds = exchanges.fastest,
                         .typical_exchange_seconds = exchanges.typical,
                         .beta_seconds_per_byte = wire / static_cast<double>(outgoing.size())};
}

void answer(Prober& prober) {
  time_exchanges(prober);
  std::vector<std::byte> outgoing, incoming;
  for (;;) {
    const uint64_t command = prober.receive_word(kCommand);
    if (command == kDone) return;
    if (command > kMaxTransferBytes)
      throw InvalidArgument(cat("rank ", prober.rank(), ": rank ", prober.peer(),
                                " asked for a link probe transfer of ", command, " bytes; at most ",
                                kMaxTransferBytes, " are expected"));
    outgoing.resize(static_cast<size_t>(command));
    incoming.resize(static_cast<size_t>(command));
    Prober::Posted theirs, mine;
    prober.post_receive(theirs, kPayload, incoming);
    prober.send_word(kReply, command);
    prober.post_send(mine, kPayload, outgoing);
    prober.finish(theirs);
    prober.finish(mine);
    prober.send_word(kReply, command);
  }
}

LinkMeasurement probe(Mesh& mesh, int peer, bool leads, Deadline deadline) {
  mesh.connect(peer, deadline);
  Prober prober(mesh, peer, deadline);
  if (leads) return lead(prober);
  answer(prober);
  return {};
}

}  // namespace

ProbePartners probe_partners(int rank, const std::vector<uint64_t>& host_ids) {
  // Hosts in order of their lowest rank; each host's ranks in rank order.
  std::vector<uint64_t> host_order;
  std::map<uint64_t, std::vector<int>> ranks_of;
  for (int r = 0; r < static_cast<int>(host_ids.size()); ++r) {
    auto [entry, inserted] = ranks_of.try_emplace(host_ids[static_cast<size_t>(r)]);
    if (inserted) host_order.push_back(host_ids[static_cast<size_t>(r)]);
    entry->second.push_back(r);
  }
  ProbePartners partners;
  const std::vector<int>& mine = ranks_of.at(host_ids.at(static_cast<size_t>(rank)));
  const size_t local_index = static_cast<size_t>(std::find(mine.begin(), mine.end(), rank) - mine.begin());
  if ((local_index ^ 1) < mine.size()) partners.local = mine[local_index ^ 1];
  if (local_index == 0) {
    const size_t host_index = static_cast<size_t>(
        std::find(host_order.begin(), host_order.end(), host_ids[static_cast<size_t>(rank)]) - host_order.begin());
    if ((host_index ^ 1) < host_order.size()) partners.remote = ranks_of.at(host_order[host_index ^ 1]).front();
  }
  return partners;
}

MeasuredLinks measure_links(Mesh& mesh, const std::vector<uint64_t>& host_ids, Deadline deadline) {
  const int rank = mesh.rank();
  ProbePartners partners = probe_partners(rank, host_ids);
  // Probes move host memory; a transport that moves only device memory
  // (CUDA IPC) is not measured. Its two ends decide alike.
  for (std::optional<int>* partner : {&partners.local, &partners.remote})
    if (*partner && !mesh.device_of(**partner).accepts(Memory::host())) partner->reset();
  MeasuredLinks measured;
  // Local first everywhere: a leader of the host then probes the remote
  // level once its own local pair is done, and no rank waits in a circle.
  if (partners.local) {
    const LinkMeasurement link = probe(mesh, *partners.local, rank < *partners.local, deadline);
    if (rank < *partners.local) measured.local = link;
  }
  if (partners.remote) {
    const LinkMeasurement link = probe(mesh, *partners.remote, rank < *partners.remote, deadline);
    if (rank < *partners.remote) measured.remote = link;
  }
  return measured;
}

std::array<std::optional<LinkModel>, 2> combine_measurements(
    const std::array<std::vector<LinkMeasurement>, 2>& by_level) {
  std::vector<double> waiting;
  for (const auto& level : by_level)
    for (const LinkMeasurement& pair : level)
      waiting.push_back(std::max(0.0, pair.typical_exchange_seconds - pair.fastest_exchange_seconds));
  std::array<std::optional<LinkModel>, 2> models;
  for (size_t level = 0; level < by_level.size(); ++level) {
    if (by_level[level].empty()) continue;
    std::vector<double> fastest, betas;
    for (const LinkMeasurement& pair : by_level[level]) {
      fastest.push_back(pair.fastest_exchange_seconds);
      betas.push_back(pair.beta_seconds_per_byte);
    }
    models[level] = LinkModel{.alpha_seconds = median(fastest) + median(waiting),
                              .beta_seconds_per_byte = median(betas)};
  }
  return models;
}

}  // namespace chorus::transport
