// The link measurement at connect (link_probe.h).
//
// The wire between a leader and its partner, all on stream 0 of their Pair,
// under a group no Context uses: the leader sends 8-byte commands, the
// partner answers each.
//   kPing          partner echoes 8 bytes              (round trips, for alpha)
//   N > kPing      partner posts a receive of N bytes, says "ready", receives
//                  the N bytes and acknowledges them   (for beta)
//   kDone          partner stops
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
constexpr uint64_t kPing = 1;
constexpr int kWarmupPings = 3;
constexpr int kTimedPings = 15;
constexpr size_t kFirstTransferBytes = size_t{64} << 10;
constexpr size_t kMaxTransferBytes = size_t{8} << 20;
constexpr int kTimedTransfers = 3;
// A transfer this long is mostly bandwidth, not latency or a token bucket's burst.
constexpr std::chrono::microseconds kLongEnough{4000};
// How long a waiter reads its sockets itself before it sleeps.
constexpr std::chrono::microseconds kPollFor{200};

enum Message : uint64_t { kCommand = 1, kReply = 2, kPayload = 3 };

class Prober {
 public:
  Prober(Mesh& mesh, int peer, Deadline deadline)
      : mesh_(mesh), peer_(peer), deadline_(deadline), pair_(mesh.pair(peer)), device_(mesh.device_of(peer)) {}

  void send_word(Message kind, uint64_t word) {
    std::byte bytes[sizeof(word)];
    std::memcpy(bytes, &word, sizeof(word));
    transfer(kind, bytes, true, "an 8-byte probe message");
  }
  uint64_t receive_word(Message kind) {
    std::byte bytes[sizeof(uint64_t)];
    transfer(kind, bytes, false, "an 8-byte probe message");
    uint64_t word;
    std::memcpy(&word, bytes, sizeof(word));
    return word;
  }
  void send_payload(std::span<const std::byte> data) {
    std::byte* mutable_data = const_cast<std::byte*>(data.data());
    transfer(kPayload, std::span<std::byte>(mutable_data, data.size()), true, "a probe transfer");
  }
  // A receive posted now and waited for by finish_receive.
  struct PostedReceive {
    Request request;
    CompletionSignal signal;
    size_t bytes = 0;
  };
  void post_payload_receive(PostedReceive& posted, std::span<std::byte> data) {
    posted.request.attach(&posted.signal);
    posted.bytes = data.size();
    pair_.post_recv(posted.request, tag_of(kPayload), data);
  }
  void finish_receive(PostedReceive& posted) {
    wait(posted.request, timeout_message(false, "a probe transfer", posted.bytes));
  }
  int peer() const { return peer_; }
  int rank() const { return mesh_.rank(); }

 private:
  static Tag tag_of(Message kind) { return Tag{.value = kind, .signature = 0, .group = kProbeGroup}; }
  std::string timeout_message(bool send, const char* what, size_t bytes) const {
    return cat("rank ", mesh_.rank(), ": timed out measuring the link to rank ", peer_, " (",
               send ? "sending " : "receiving ", what, " of ", bytes, " bytes)");
  }

  void transfer(Message kind, std::span<std::byte> data, bool send, const char* what) {
    Request request;
    CompletionSignal signal;
    request.attach(&signal);
    if (send)
      pair_.post_send(request, tag_of(kind), data);
    else
      pair_.post_recv(request, tag_of(kind), data);
    wait(request, timeout_message(send, what, data.size()));
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

LinkModel lead(Prober& prober) {
  std::vector<double> round_trips;
  for (int ping = 0; ping < kWarmupPings + kTimedPings; ++ping) {
    const auto start = Clock::now();
    prober.send_word(kCommand, kPing);
    prober.receive_word(kReply);
    if (ping >= kWarmupPings) round_trips.push_back(seconds_since(start));
  }
  const double alpha = median(round_trips) / 2;

  std::vector<std::byte> payload(kFirstTransferBytes);
  std::vector<double> times;
  while (times.size() < static_cast<size_t>(kTimedTransfers)) {
    prober.send_word(kCommand, payload.size());
    prober.receive_word(kReply);
    const auto start = Clock::now();
    prober.send_payload(payload);
    prober.receive_word(kReply);
    const double time = seconds_since(start);
    if (times.empty() && time < std::chrono::duration<double>(kLongEnough).count() &&
        payload.size() < kMaxTransferBytes) {
      payload.resize(std::min(payload.size() * 4, kMaxTransferBytes));
      continue;
    }
    times.push_back(time);
  }
  prober.send_word(kCommand, kDone);
  const double transfer = median(times);
  // What the two 8-byte latencies leave; never below half the time, so a
  // noisy alpha cannot make the link look infinitely fast.
  const double wire = std::max(transfer - 2 * alpha, transfer / 2);
  return LinkModel{.alpha_seconds = alpha,
                   .beta_seconds_per_byte = wire / static_cast<double>(payload.size())};
}

void answer(Prober& prober) {
  std::vector<std::byte> payload;
  for (;;) {
    const uint64_t command = prober.receive_word(kCommand);
    if (command == kDone) return;
    if (command == kPing) {
      prober.send_word(kReply, kPing);
      continue;
    }
    if (command > kMaxTransferBytes)
      throw InvalidArgument(cat("rank ", prober.rank(), ": rank ", prober.peer(), " asked for a link probe transfer of ", command,
                                " bytes; at most ", kMaxTransferBytes, " are expected"));
    payload.resize(static_cast<size_t>(command));
    Prober::PostedReceive posted;
    prober.post_payload_receive(posted, payload);
    prober.send_word(kReply, command);
    prober.finish_receive(posted);
    prober.send_word(kReply, command);
  }
}

LinkModel probe(Mesh& mesh, int peer, bool leads, Deadline deadline) {
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
    LinkModel link = probe(mesh, *partners.local, rank < *partners.local, deadline);
    if (rank < *partners.local) measured.local = link;
  }
  if (partners.remote) {
    LinkModel link = probe(mesh, *partners.remote, rank < *partners.remote, deadline);
    if (rank < *partners.remote) measured.remote = link;
  }
  return measured;
}

}  // namespace chorus::transport
