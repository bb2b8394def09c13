// The event-by-event timing of Plans on a model network.
#include "simulation/timing_simulator.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <queue>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "simulation/link_calendar.h"

namespace chorus::algorithms {

namespace {

struct RankTimeline {
  RankTimeline(const Plan& plan, const SendLimit& send_limit) : graph(plan), scheduler(plan, graph, send_limit) {}

  PlanGraph graph;
  StepScheduler scheduler;
  double cpu_free = 0;
  LinkCalendar sender;  // alpha per message: the cost of starting one
  LinkCalendar local_out, local_in;
};

// A step that finishes at `time`; `sequence` keeps equal times in the order
// they were decided, so a run is deterministic.
struct Event {
  double time = 0;
  uint64_t sequence = 0;
  int rank = 0;
  StepId step = 0;
  bool operator>(const Event& other) const {
    return time != other.time ? time > other.time : sequence > other.sequence;
  }
};

// The messages of one (sender, receiver) pair that arrived before their
// receive was posted, or the receives posted before their message was sent:
// never both, since each side takes them in the same order.
struct Channel {
  struct Entry {
    int rank = 0;  // the receiving rank, for a posted receive
    StepId step = 0;
    double time = 0;  // arrival of a message, posting of a receive
  };
  std::vector<Entry> entries;
  size_t head = 0;
  bool holds_messages = false;

  bool empty() const { return head == entries.size(); }
  Entry take() {
    Entry entry = entries[head++];
    if (empty()) entries.clear(), head = 0;
    return entry;
  }
  void put(Entry entry, bool message) {
    holds_messages = message;
    entries.push_back(entry);
  }
};

class TimingSimulation {
 public:
  TimingSimulation(std::span<const Plan* const> plans, const NetworkModel& network, HostSymmetry symmetry,
                   const SendLimit& send_limit)
      : network_(network), symmetry_(symmetry) {
    network.validate();
    const size_t expected = static_cast<size_t>(symmetry == HostSymmetry::none ? network.ranks() : network.ranks_per_host);
    if (plans.size() != expected)
      throw InvalidArgument(cat("timing simulator: ", plans.size(), " Plans for ", expected, " simulated ranks (",
                                to_string(symmetry), " symmetry, ", network.hosts, " x ", network.ranks_per_host, ")"));
    if (symmetry == HostSymmetry::exclusive_or && (network.hosts & (network.hosts - 1)) != 0)
      throw InvalidArgument(cat("timing simulator: xor symmetry needs a power-of-two host count, not ", network.hosts));
    for (const Plan* plan : plans) {
      ranks_.push_back(std::make_unique<RankTimeline>(*plan, send_limit));
      plans_.push_back(plan);
    }
    const size_t link_hosts = symmetry == HostSymmetry::none ? static_cast<size_t>(network.hosts) : 1;
    uplinks_.assign(link_hosts, LinkCalendar(1));
    downlinks_.assign(link_hosts, LinkCalendar(1));
    // The core as lanes of one uplink's bandwidth: hosts / oversubscription
    // of them (rounded, at least one). In a symmetric run every host sends
    // whenever host 0 does, so the core gives each host 1/oversubscription
    // of its uplink: a remote message takes that much longer.
    if (network.oversubscription > 1 && symmetry == HostSymmetry::none)
      core_ = LinkCalendar(std::max(1, static_cast<int>(std::lround(network.hosts / network.oversubscription))));
    remote_seconds_per_byte_ = network.remote.beta_seconds_per_byte *
                               (symmetry == HostSymmetry::none ? 1.0 : std::max(1.0, network.oversubscription));
  }

  TimingReport run() {
    for (int rank = 0; rank < static_cast<int>(ranks_.size()); ++rank) pump(rank, 0.0);
    while (!events_.empty()) {
      const Event event = events_.top();
      events_.pop();
      report_.seconds = std::max(report_.seconds, event.time);
      ranks_[static_cast<size_t>(event.rank)]->scheduler.finish(event.step);
      pump(event.rank, event.time);
    }
    check_finished();
    for (const Plan* plan : plans_) report_.steps += plan->size();
    return report_;
  }

 private:
  int host_of(int rank) const { return network_.host_of(rank); }

  // The relabelling of hosts that moves host `k` to host 0, applied to `rank`.
  int to_host_zero_frame(int rank, int k) const {
    const int hosts = network_.hosts, per_host = network_.ranks_per_host;
    const int host = host_of(rank), local = rank % per_host;
    const int moved = symmetry_ == HostSymmetry::rotation ? (host - k + hosts) % hosts : host ^ k;
    return moved * per_host + local;
  }

  // The pair a message is filed under: in a symmetric run, seen from the
  // frame where its sender is on host 0, so that a send of host 0 and the
  // receive it stands for on another host meet.
  uint64_t channel_key(int sender, int receiver) const {
    if (symmetry_ != HostSymmetry::none) {
      const int k = host_of(sender);
      receiver = to_host_zero_frame(receiver, k);
      sender = to_host_zero_frame(sender, k);
    }
    return static_cast<uint64_t>(sender) * static_cast<uint64_t>(network_.ranks()) + static_cast<uint64_t>(receiver);
  }

  size_t link_index(int rank) const { return symmetry_ == HostSymmetry::none ? static_cast<size_t>(host_of(rank)) : 0; }

  void schedule(double time, int rank, StepId step) { events_.push(Event{time, next_sequence_++, rank, step}); }

  void pump(int rank, double now) {
    RankTimeline& timeline = *ranks_[static_cast<size_t>(rank)];
    const Plan& plan = *plans_[static_cast<size_t>(rank)];
    while (std::optional<StepId> id = timeline.scheduler.next_post()) {
      const Step& step = plan.step(*id);
      check_peer(rank, *id, step);
      if (step.kind == StepKind::send) send(rank, *id, step, now);
      else post_receive(rank, *id, step, now);
    }
    while (std::optional<StepId> id = timeline.scheduler.next_local()) {
      const double start = std::max(now, timeline.cpu_free);
      timeline.cpu_free = start + static_cast<double>(plan.step(*id).to.length) * network_.gamma_seconds_per_byte;
      schedule(timeline.cpu_free, rank, *id);
    }
  }

  void check_peer(int rank, StepId id, const Step& step) const {
    if (step.peer < 0 || step.peer >= network_.ranks() || step.peer == rank)
      throw InvalidArgument(cat("timing simulator: rank ", rank, ": step ", id, " (", describe_step(step),
                                ") names a peer outside the job of ", network_.ranks(), " ranks"));
  }

  // When the bytes of a message posted at `now` have left; sets `arrival`.
  double transfer(int sender, int receiver, size_t bytes, double now, double& arrival) {
    const bool local = host_of(sender) == host_of(receiver);
    const LinkModel& link = local ? network_.local : network_.remote;
    const double length =
        static_cast<double>(bytes) * (local ? network_.local.beta_seconds_per_byte : remote_seconds_per_byte_);
    std::vector<LinkCalendar*>& path = path_;
    path.clear();
    if (local) {
      path.push_back(&ranks_[static_cast<size_t>(sender)]->local_out);
      path.push_back(&ranks_[static_cast<size_t>(receiver)]->local_in);
    } else {
      path.push_back(&uplinks_[link_index(sender)]);
      path.push_back(&downlinks_[link_index(receiver)]);
      if (core_) path.push_back(&*core_);
    }
    // The sender spends alpha on each message before its bytes go, one
    // message at a time; then the bytes hold every link on the way.
    LinkCalendar& starter = ranks_[static_cast<size_t>(sender)]->sender;
    starter.forget_until(now);
    const double issued = starter.earliest_fit(now, link.alpha_seconds);
    starter.book(issued, link.alpha_seconds);
    double start = issued + link.alpha_seconds;
    if (length > 0) {
      for (LinkCalendar* calendar : path) calendar->forget_until(now);
      start = earliest_common_fit(path, start, length);
      for (LinkCalendar* calendar : path) calendar->book(start, length);
    }
    arrival = start + length;
    return arrival;
  }

  void send(int rank, StepId id, const Step& step, double now) {
    double arrival = 0;
    const double sent = transfer(rank, step.peer, step.bytes(), now, arrival);
    ++report_.messages;
    schedule(sent, rank, id);
    Channel& channel = channels_[channel_key(rank, step.peer)];
    if (!channel.empty() && !channel.holds_messages) {
      const Channel::Entry receive = channel.take();
      schedule(std::max(arrival, receive.time), receive.rank, receive.step);
    } else {
      channel.put({rank, id, arrival}, true);
    }
  }

  void post_receive(int rank, StepId id, const Step& step, double now) {
    Channel& channel = channels_[channel_key(step.peer, rank)];
    if (!channel.empty() && channel.holds_messages) {
      const Channel::Entry message = channel.take();
      schedule(std::max(message.time, now), rank, id);
    } else {
      channel.put({rank, id, now}, false);
    }
  }

  void check_finished() const {
    for (size_t rank = 0; rank < ranks_.size(); ++rank) {
      if (ranks_[rank]->scheduler.done()) continue;
      size_t left = 0;
      for (StepId id = 0; id < plans_[rank]->size(); ++id) left += ranks_[rank]->scheduler.is_finished(id) ? 0 : 1;
      throw Error(cat("timing simulator: deadlock: rank ", rank, " has ", left, " of ", plans_[rank]->size(),
                      " steps left and nothing can run"));
    }
    for (const auto& [key, channel] : channels_)
      if (!channel.empty())
        throw Error(cat("timing simulator: ", channel.entries.size() - channel.head, " message(s) from rank ",
                        key / static_cast<uint64_t>(network_.ranks()), " to rank ",
                        key % static_cast<uint64_t>(network_.ranks()), " were never matched"));
  }

  NetworkModel network_;
  HostSymmetry symmetry_;
  std::vector<std::unique_ptr<RankTimeline>> ranks_;
  std::vector<const Plan*> plans_;
  std::vector<LinkCalendar> uplinks_, downlinks_;
  std::optional<LinkCalendar> core_;
  double remote_seconds_per_byte_ = 0;
  std::vector<LinkCalendar*> path_;  // reused by transfer()
  std::unordered_map<uint64_t, Channel> channels_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t next_sequence_ = 0;
  TimingReport report_;
};

}  // namespace

std::string_view to_string(HostSymmetry symmetry) {
  switch (symmetry) {
    case HostSymmetry::none: return "no";
    case HostSymmetry::rotation: return "rotation";
    case HostSymmetry::exclusive_or: return "xor";
  }
  return "?";
}

TimingReport simulate_timing(std::span<const Plan* const> plans, const NetworkModel& network, HostSymmetry symmetry,
                             const SendLimit& send_limit) {
  return TimingSimulation(plans, network, symmetry, send_limit).run();
}

}  // namespace chorus::algorithms
