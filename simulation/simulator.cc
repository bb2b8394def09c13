// The in-memory simulation of a whole job.
#include "simulation/simulator.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <tuple>

#include "algorithms/execution/local_steps.h"
#include "memory/registry.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

namespace {

struct Message {
  int sender = 0;
  StepId send_step = 0;
  size_t position_on_pair = 0;  // how many messages the sender posted to this receiver before
};

struct RankState {
  RankState(const Plan& plan, const SendLimit& send_limit) : graph(plan), scheduler(plan, graph, send_limit) {}

  const Plan* plan = nullptr;
  Call call;
  PlanGraph graph;
  StepScheduler scheduler;
  PlanBuffers buffers;
  std::vector<std::byte> scratch;
  std::vector<StepId> in_flight;
  std::vector<size_t> position_on_pair;  // per step: index among this rank's messages to/from that peer
  std::vector<size_t> sends_posted_to, recvs_posted_from;
  std::vector<double> finish_time;
  double cpu_free = 0, link_out_free = 0, link_in_free = 0;
};

bool overlaps(const Region& a, const Region& b, bool in_place) {
  if (a.length == 0 || b.length == 0) return false;
  auto alias = [in_place](BufferKind kind) {
    return in_place && kind == BufferKind::input ? BufferKind::output : kind;
  };
  if (alias(a.buffer) != alias(b.buffer)) return false;
  return a.offset < b.offset + b.length && b.offset < a.offset + a.length;
}

class Simulation {
 public:
  Simulation(const std::vector<Plan>& plans, const std::vector<RankBuffers>& buffers, const std::vector<Call>& calls,
             const SimulationOptions& options)
      : options_(options) {
    const Call& call = calls.front();
    const int size = static_cast<int>(plans.size());
    if (call.size != size || buffers.size() != plans.size() || (calls.size() != 1 && calls.size() != plans.size()))
      throw InvalidArgument(cat("simulator: call.size is ", call.size, " but ", plans.size(), " plans and ",
                                buffers.size(), " buffer sets were given"));
    for (int rank = 0; rank < size; ++rank) {
      auto state = std::make_unique<RankState>(plans[rank], options.send_limit);
      RankState& s = *state;
      s.plan = &plans[rank];
      s.call = calls[calls.size() == 1 ? 0 : rank];
      s.call.rank = rank;
      s.scratch.assign(plans[rank].scratch_bytes, std::byte{0xa5});  // garbage, so reading it unwritten shows
      s.buffers.output = static_cast<std::byte*>(buffers[rank].output);
      s.buffers.input = call.in_place ? s.buffers.output : static_cast<const std::byte*>(buffers[rank].input);
      s.buffers.scratch = s.scratch.data();
      s.buffers.backend = &memory_backend(Memory::host());
      s.position_on_pair.assign(plans[rank].size(), 0);
      s.sends_posted_to.assign(size, 0);
      s.recvs_posted_from.assign(size, 0);
      s.finish_time.assign(plans[rank].size(), 0.0);
      ranks_.push_back(std::move(state));
    }
  }

  SimulationReport run() {
    while (!all_done()) {
      bool progressed = false;
      for (int rank = 0; rank < static_cast<int>(ranks_.size()); ++rank) {
        RankState& s = *ranks_[rank];
        while (std::optional<StepId> id = s.scheduler.next_post()) {
          post(rank, *id);
          progressed = true;
        }
        progressed |= match_receives(rank);
        while (std::optional<StepId> id = s.scheduler.next_local()) {
          run_local(rank, *id);
          progressed = true;
        }
      }
      if (!progressed) throw_deadlock();
    }
    SimulationReport report;
    for (auto& state : ranks_) {
      RankState& s = *state;
      if (s.buffers.output) finish_collective(s.call, s.buffers.output, *s.buffers.backend);
      RankReport rank_report;
      rank_report.steps = s.plan->size();
      for (const Step& step : s.plan->steps()) {
        if (step.kind != StepKind::send) continue;
        ++rank_report.messages_sent;
        rank_report.bytes_sent += step.from.length;
      }
      for (double time : s.finish_time) rank_report.finish_seconds = std::max(rank_report.finish_seconds, time);
      report.critical_path_seconds = std::max(report.critical_path_seconds, rank_report.finish_seconds);
      report.ranks.push_back(rank_report);
    }
    return report;
  }

 private:
  bool all_done() const {
    for (const auto& state : ranks_)
      if (!state->scheduler.done()) return false;
    return true;
  }

  double ready_time(const RankState& s, StepId id) const {
    double time = 0;
    for (StepId dependency : s.plan->dependencies(s.plan->step(id)))
      time = std::max(time, s.finish_time[dependency]);
    return time;
  }

  void check_bounds(int rank, StepId id, const Region& region) const {
    const RankState& s = *ranks_[rank];
    size_t limit = region.buffer == BufferKind::scratch                   ? s.plan->scratch_bytes
                   : region.buffer == BufferKind::input && !s.call.in_place ? input_bytes(s.call)
                                                                             : output_bytes(s.call);
    bool missing = region.length > 0 && region.buffer == BufferKind::output && !s.buffers.output;
    if (region.offset > limit || region.length > limit - region.offset || missing)
      throw Error(cat("simulator: rank ", rank, ": step ", id, " (", describe_step(s.plan->step(id)),
                      ") reaches outside its buffer of ", limit, " bytes"));
  }

  // `writes` is the region the step writes (if any), `reads` the one it reads.
  void check_race(int rank, StepId id, const Region* writes, const Region* reads) const {
    const RankState& s = *ranks_[rank];
    for (StepId other : s.in_flight) {
      const Step& busy = s.plan->step(other);
      const Region& busy_region = busy.kind == StepKind::recv ? busy.to : busy.from;
      bool busy_writes = busy.kind == StepKind::recv;
      bool race = (writes && overlaps(*writes, busy_region, s.call.in_place)) ||
                  (reads && busy_writes && overlaps(*reads, busy_region, s.call.in_place));
      if (race)
        throw Error(cat("simulator: rank ", rank, ": race: step ", id, " (", describe_step(s.plan->step(id)),
                        ") touches memory of step ", other, " (", describe_step(busy),
                        ") while it is in flight; a dependency is missing"));
    }
  }

  void check_peer(int rank, StepId id, int peer) const {
    if (peer < 0 || peer >= static_cast<int>(ranks_.size()) || peer == rank)
      throw Error(cat("simulator: rank ", rank, ": step ", id, " (", describe_step(ranks_[rank]->plan->step(id)),
                      ") names an invalid peer"));
  }

  void post(int rank, StepId id) {
    RankState& s = *ranks_[rank];
    const Step& step = s.plan->step(id);
    check_peer(rank, id, step.peer);
    if (step.kind == StepKind::send) {
      check_bounds(rank, id, step.from);
      check_race(rank, id, nullptr, &step.from);
      s.position_on_pair[id] = s.sends_posted_to[step.peer]++;
      channels_[{rank, step.peer, step.slot}].push_back(Message{rank, id, s.position_on_pair[id]});
    } else {
      check_bounds(rank, id, step.to);
      if (step.to.buffer == BufferKind::input)
        throw Error(cat("simulator: rank ", rank, ": step ", id, " (", describe_step(step), ") writes the input"));
      check_race(rank, id, &step.to, nullptr);
      s.position_on_pair[id] = s.recvs_posted_from[step.peer]++;
    }
    s.in_flight.push_back(id);
  }

  bool match_receives(int rank) {
    RankState& s = *ranks_[rank];
    bool progressed = false;
    for (size_t i = 0; i < s.in_flight.size();) {
      const StepId id = s.in_flight[i];
      const Step& step = s.plan->step(id);
      auto channel = step.kind == StepKind::recv ? channels_.find({step.peer, rank, step.slot}) : channels_.end();
      if (channel == channels_.end() || channel->second.empty()) {
        ++i;
        continue;
      }
      Message message = channel->second.front();
      channel->second.pop_front();
      deliver(rank, id, message);
      s.in_flight[i] = s.in_flight.back();
      s.in_flight.pop_back();
      progressed = true;
    }
    return progressed;
  }

  void deliver(int rank, StepId recv_id, const Message& message) {
    RankState& receiver = *ranks_[rank];
    RankState& sender = *ranks_[message.sender];
    const Step& recv = receiver.plan->step(recv_id);
    const Step& send = sender.plan->step(message.send_step);
    if (message.position_on_pair != receiver.position_on_pair[recv_id])
      throw Error(cat("simulator: rank ", rank, " receives rank ", message.sender,
                      "'s messages out of order: slot ", recv.slot, " was message #", message.position_on_pair,
                      " sent to it but is receive #", receiver.position_on_pair[recv_id],
                      " from it; a stream transport would stall"));
    if (send.from.length != recv.to.length)
      throw MismatchError(cat("simulator: rank ", rank, ": ", describe_step(recv), " matched a message of ",
                              send.from.length, " bytes from rank ", message.sender, " (", describe_step(send), ")"));
    if (recv.to.length > 0)
      std::memcpy(receiver.buffers.write(recv.to), sender.buffers.read(send.from), recv.to.length);

    const double start = std::max({ready_time(sender, message.send_step), ready_time(receiver, recv_id),
                                   sender.link_out_free, receiver.link_in_free});
    const double occupancy = static_cast<double>(recv.to.length) * options_.cost.beta_seconds_per_byte;
    sender.link_out_free = receiver.link_in_free = start + occupancy;
    const double finish = start + options_.cost.alpha_seconds + occupancy;
    receiver.finish_time[recv_id] = sender.finish_time[message.send_step] = finish;

    auto& sender_flight = sender.in_flight;
    sender_flight.erase(std::find(sender_flight.begin(), sender_flight.end(), message.send_step));
    sender.scheduler.finish(message.send_step);
    receiver.scheduler.finish(recv_id);
  }

  void run_local(int rank, StepId id) {
    RankState& s = *ranks_[rank];
    const Step& step = s.plan->step(id);
    check_bounds(rank, id, step.from);
    check_bounds(rank, id, step.to);
    check_race(rank, id, &step.to, &step.from);
    run_local_step(step, s.call, s.buffers);
    const double start = std::max(ready_time(s, id), s.cpu_free);
    s.cpu_free = s.finish_time[id] = start + static_cast<double>(step.to.length) * options_.cost.gamma_seconds_per_byte;
    s.scheduler.finish(id);
  }

  [[noreturn]] void throw_deadlock() const {
    std::string details;
    int shown = 0;
    for (int rank = 0; rank < static_cast<int>(ranks_.size()) && shown < 8; ++rank) {
      const RankState& s = *ranks_[rank];
      if (s.scheduler.done()) continue;
      ++shown;
      size_t remaining = 0;
      for (StepId id = 0; id < s.plan->size(); ++id) remaining += s.scheduler.is_finished(id) ? 0 : 1;
      details += cat("\n  rank ", rank, ": ", remaining, " steps left");
      for (size_t i = 0; i < s.in_flight.size() && i < 3; ++i)
        details += cat("; waiting on step ", s.in_flight[i], " (", describe_step(s.plan->step(s.in_flight[i])), ")");
      if (s.in_flight.empty()) details += "; nothing posted (blocked on dependencies or its send limit)";
    }
    for (const auto& [key, messages] : channels_)
      if (!messages.empty())
        details += cat("\n  unreceived: ", messages.size(), " message(s) from rank ", std::get<0>(key), " to rank ",
                       std::get<1>(key), " slot ", std::get<2>(key));
    throw Error(cat("simulator: deadlock: no step can run", details));
  }

  SimulationOptions options_;
  std::vector<std::unique_ptr<RankState>> ranks_;
  std::map<std::tuple<int, int, uint32_t>, std::deque<Message>> channels_;
};

}  // namespace

SimulationReport simulate(const std::vector<Plan>& plans, const std::vector<RankBuffers>& buffers, const Call& call,
                          const SimulationOptions& options) {
  return Simulation(plans, buffers, std::vector<Call>{call}, options).run();
}

SimulationReport simulate(const std::vector<Plan>& plans, const std::vector<RankBuffers>& buffers,
                          const std::vector<Call>& calls, const SimulationOptions& options) {
  if (calls.empty()) throw InvalidArgument("simulator: no calls given");
  return Simulation(plans, buffers, calls, options).run();
}

}  // namespace chorus::algorithms
