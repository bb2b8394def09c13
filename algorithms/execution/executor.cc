// The Executor loop.
#include "algorithms/execution/executor.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <memory>
#include <span>
#include <vector>

#include "algorithms/execution/collective_watch.h"
#include "algorithms/execution/deferred_root_checks.h"
#include "algorithms/execution/late_root_checks.h"
#include "algorithms/execution/local_steps.h"
#include "memory/registry.h"
#include "algorithms/execution/root_check.h"
#include "algorithms/execution/striping.h"
#include "base/error.h"
#include "base/log.h"
#include "transport/transport.h"

namespace chorus::algorithms {

namespace {


std::string describe_wait(const Communicator& communicator, const Step& step, size_t stripes) {
  const std::string striped = stripes > 1 ? cat(" striped over ", stripes, " streams") : std::string();
  const int peer = communicator.shown_rank(step.peer);
  if (step.kind == StepKind::recv)
    return cat("recv of slot ", step.slot, " from rank ", peer, " (", step.to.length, " bytes", striped, ")");
  return cat("send of slot ", step.slot, " to rank ", peer, " (", step.from.length, " bytes", striped, ")");
}

// What a run of a Plan needs besides the Plan, kept per thread and reused:
// a collective runs on one thread from start to end, so once a thread has
// run a call of some size, the next one allocates nothing (the first 8-byte
// allreduce of a loop pays for vectors, requests and scheduler state; the
// thousandth does not). The signal is declared first, so it is destroyed
// after the requests attached to it.
struct RunState {
  transport::CompletionSignal signal;
  std::unique_ptr<transport::Request[]> requests;
  size_t request_capacity = 0;
  std::vector<size_t> first_request;  // empty when no peer is striped
  std::vector<StepId> in_flight;
  // The stream-ordered path's local steps queued on the backend, oldest
  // first, with the fence that marks each one's end.
  std::vector<std::pair<StepId, uint64_t>> queued_local;
  StepScheduler scheduler;

  transport::Request* reserve_requests(size_t count) {
    if (count > request_capacity) {
      requests.reset(new transport::Request[count]);
      request_capacity = count;
      for (size_t i = 0; i < count; ++i) requests[i].attach(&signal);
    }
    return requests.get();
  }
};

RunState& thread_run_state() {
  thread_local RunState state;
  return state;
}

class PlanRun {
 public:
  PlanRun(const Communicator& communicator, const Plan& plan, const PlanGraph& graph, const Call& call,
          const void* input, void* output, uint32_t sequence, Deadline deadline, const ExecuteExtras& extras)
      : communicator_(communicator),
        mesh_(communicator.mesh()),
        plan_(plan),
        graph_(graph),
        call_(call),
        sequence_(sequence),
        deadline_(deadline),
        state_(thread_run_state()),
        scheduler_(state_.scheduler),
        signal_(state_.signal),
        first_request_(state_.first_request),
        in_flight_(state_.in_flight),
        queued_local_(state_.queued_local),
        step_timings_(extras.step_timings),
        started_(extras.started) {
    if (step_timings_) step_timings_->assign(plan.size(), StepTiming{});
    scheduler_.reset(plan, graph, extras.send_limit);
    in_flight_.clear();
    queued_local_.clear();
    first_request_.clear();
    // Scratch is reused across calls on the same thread (a collective is run
    // by one thread from start to end): reallocating and page-faulting
    // megabytes per call would show in small-message latency.
    buffers_.backend = &memory_backend(call.memory);
    buffers_.input = static_cast<const std::byte*>(input);
    buffers_.output = static_cast<std::byte*>(output);
    buffers_.scratch = plan.scratch_bytes ? buffers_.backend->thread_scratch(plan.scratch_bytes) : nullptr;
    fenced_ = buffers_.backend->orders_by_fences() && graph.communication_steps() < plan.size();
    // The root check's two requests follow the Plan's.
    plan_requests_ = number_stripes();
    checks_root_ = RootCheck::needed(call);
    // Where the signature holds the root whole, no message checks it
    // (late_root_checks.h): only a wait past kTellAfter sends one.
    tells_late_ = checks_root_ && LateRootChecks::covers(communicator, call);
    late_ = {communicator.late_root_checks(), &communicator, sequence};
    if (!late_.checks) {
      // A helper call of a covered call (a phase of the host boards'
      // broadcast): its waits are that call's, on the Context's checks.
      if (const LateRootChecks::Delegation* delegation = LateRootChecks::delegated()) {
        late_ = *delegation;
        tells_late_ = checks_root_;
        records_late_ = false;  // the covered call recorded itself
      }
    }
    if (tells_late_) checks_root_ = false;
    if (late_.checks && !late_.checks->active() && !tells_late_) late_.checks = nullptr;
    // A rank that only sends leaves its check's receive to the Context's
    // deferred checks (deferred_root_checks.h) and does not wait for its
    // neighbour to reach the call.
    deferred_ = checks_root_ ? communicator.deferred_root_checks() : nullptr;
    if (deferred_) {
      for (StepId id = 0; id < plan.size() && deferred_; ++id)
        if (plan.step(id).kind == StepKind::recv) deferred_ = nullptr;
    }
    requests_ = state_.reserve_requests(plan_requests_ + (checks_root_ ? 2 : 0));
    tag_.signature = call_signature(call);
    tag_.group = communicator.group();
    const DeferredRootChecks* earlier = communicator.deferred_root_checks();
    deferred_after_ = earlier && !earlier->empty();
  }

  // The stream-ordered path (a backend that orders by fences: device
  // memory, where asked). A local step is queued on the backend's stream
  // and counts as finished once its fence has passed, which this thread
  // checks between messages instead of waiting for each kernel: a send
  // still goes out only once what it reads has ended, and a receive lands
  // only in memory no queued step still reads, since the Plan's graph
  // orders both after those steps' ends. Independent local steps queue
  // back to back, a local step that waits only on queued ones queues
  // behind them (the stream runs them in order; StepScheduler::queued),
  // and the thread keeps moving messages while they run.
  // A failure waits for the queued work before it leaves: once execute()
  // returns, no kernel touches the caller's buffers or the scratch.
  void run() {
    if (!fenced_) return run_steps();
    QueuedWork queued(*buffers_.backend, communicator_.rank());
    try {
      run_steps();
    } catch (...) {
      // A device that never ends its work would hold the wait as `queued`
      // unwinds: say first what the call is waiting for.
      if (queued_head_ < queued_local_.size())
        CHORUS_LOG(warn, communicator_.rank(), "the failed call waits for its ", queued_local_.size() - queued_head_,
                   " queued copies and reductions on ", to_string(call_.memory), " before it returns");
      throw;
    }
    queued.finish();
  }

 private:
  void run_steps() {
    const Clock::time_point began = started_ ? *started_ : Clock::now();
    // Only where poll_for_change can nap (below).
    const bool notes_one_way_end = plan_.one_way && communicator_.oversubscribed();
    if (notes_one_way_end) {
      const Communicator::OneWayEnd last = communicator_.last_one_way_end();
      back_to_back_ = last.sequence + 1 == sequence_ && began - last.when < kBackToBackGap;
    }
    CollectiveWatch watch(communicator_, call_, sequence_, deadline_, began);
    transport::Mesh& mesh = mesh_;
    // While this thread runs the plan it reads its own sockets and rings
    // (see Device::begin_polling); it hands reading back only to sleep.
    transport::PollingScope polling(mesh);
    // Remembered for the left neighbour's word on it (late_root_checks.h).
    if (tells_late_ && records_late_) late_.checks->record(communicator_, call_, sequence_);
    if (checks_root_) post_root_check();
    if (deferred_after_) settle_earlier_checks();
    while (!finished()) {
      // Read the count before looking at requests: a completion after the
      // scan then changes it, and the wait below returns at once.
      const uint64_t seen = signal_.count();
      bool progressed = harvest_completions();
      if (queued_head_ < queued_local_.size()) progressed = harvest_fences() || progressed;
      if (root_check_pending_) progressed = harvest_root_check() || progressed;
      while (std::optional<StepId> id = scheduler_.next_post()) {
        post(*id);
        progressed = true;
      }
      if (progressed) ++progress_events_;
      // One local step at a time, so new completions are posted between
      // reductions and the wire never idles behind a long reduce phase.
      if (std::optional<StepId> id = scheduler_.next_local()) {
        if (step_timings_) (*step_timings_)[*id].start_us = trace_clock_us();
        run_local_step(plan_.step(*id), call_, buffers_);
        if (fenced_) {
          queued_local_.emplace_back(*id, buffers_.backend->record_fence());
          scheduler_.queued(*id);  // local steps waiting only on it queue behind it
          ++progress_events_;
          continue;
        }
        if (step_timings_) (*step_timings_)[*id].end_us = trace_clock_us();
        scheduler_.finish(*id);
        ++progress_events_;
        // Parked sockets have no other reader: drain what arrived meanwhile.
        mesh.progress();
        continue;
      }
      if (progressed || finished()) continue;
      // Progress is counted on the hot path and timed only here, where the
      // clock is read anyway: a small collective reads it no more than before.
      const Clock::time_point now = Clock::now();
      if (watch.timed_out(now)) std::rethrow_exception(watch.timeout_error(describe_oldest_wait()));
      if (progress_events_ != progress_seen_) {
        progress_seen_ = progress_events_;
        watch.progressed(now);
      }
      if (watch.warning_due(now)) watch.warn_stall(describe_oldest_wait());
      if (deferred_after_) settle_earlier_checks();
      if (queued_head_ < queued_local_.size()) {
        poll_for_fence(seen);
        continue;
      }
      if (poll_for_change(seen)) continue;
      Clock::time_point wake = watch.next_wake();
      if (late_.checks) {
        // A neighbour's root from a call that waits (late_root_checks.h).
        late_.checks->poll(*late_.context);
        const Clock::time_point looked = Clock::now();
        if (tells_late_ && looked - began >= LateRootChecks::kTellAfter) {
          late_.checks->tell(*late_.context, late_.sequence);
          tells_late_ = false;
        }
        Clock::time_point next_look = looked + LateRootChecks::kPollEvery;
        if (tells_late_) next_look = std::min(next_look, began + LateRootChecks::kTellAfter);
        wake = std::min(wake, next_look);
      }
      mesh.end_polling();
      {
        transport::WaitingScope waiting(mesh);
        // Wake for the next warning too, if it comes before the deadline.
        signal_.wait_change(seen, Deadline(wake));
      }
      mesh.begin_polling();
    }
    // A neighbour's check that arrived with this call's last message.
    if (deferred_after_) settle_earlier_checks();
    if (deferred_) deferred_->defer(communicator_, call_, RootCheck::check_tag(call_, root_check_tag()), sequence_);
    if (notes_one_way_end) communicator_.note_one_way_end(sequence_, Clock::now());
  }

  // The Plan ran to its end and the root check, if any, is answered.
  bool finished() const { return scheduler_.done() && !root_check_pending_; }

  // Before any step of the Plan (root_check.h says why).
  void post_root_check() {
    root_check_pending_ = true;
    if (deferred_) {
      root_verified_ = true;  // later, by the deferred checks
      root_check_.post_send(communicator_, call_, root_check_tag(), requests_[plan_requests_]);
      return;
    }
    root_check_.post(communicator_, call_, root_check_tag(), requests_[plan_requests_], requests_[plan_requests_ + 1]);
  }

  transport::Tag root_check_tag() const {
    transport::Tag tag = tag_;
    tag.value = static_cast<uint64_t>(sequence_ & 0x7fffffffu) << 32;
    return tag;
  }

  // The checks earlier calls left (deferred_root_checks.h), while this one
  // runs: what has arrived is claimed and verified, nothing waited for.
  void settle_earlier_checks() {
    DeferredRootChecks* earlier = communicator_.deferred_root_checks();
    if (earlier && !earlier->empty()) earlier->settle(communicator_, deadline_, DeferredRootChecks::Wait::none);
  }

  // Verifies the neighbour's root as soon as it arrives, not after the Plan:
  // with roots that disagree the Plan may never end. True once both
  // messages are done.
  bool harvest_root_check() {
    const transport::Request& send = requests_[plan_requests_];
    if (!root_verified_) {
      const transport::Request& recv = requests_[plan_requests_ + 1];
      const auto received = recv.state();
      if (received == transport::Request::State::failed) std::rethrow_exception(recv.error());
      if (received == transport::Request::State::done) {
        root_check_.verify(call_, sequence_);
        root_verified_ = true;
      }
    }
    const auto sent = send.state();
    if (sent == transport::Request::State::failed) std::rethrow_exception(send.error());
    root_check_pending_ = !root_verified_ || sent != transport::Request::State::done;
    return !root_check_pending_;
  }

  // Reads the sockets on this thread until a request completes, or until it
  // has polled for poll_time with no byte arriving; then the caller sleeps
  // and the transport's thread reads. A message that lands while we poll
  // completes here without two thread wake-ups (tens of µs each on a small
  // VM; a loopback round trip is about ten). Time spent descheduled (a gap
  // between two polls longer than a poll takes, when ranks outnumber cores)
  // is not counted: on 4 ranks over 2 cores every preemption would otherwise
  // end the polling early (docs/latency.md).
  //
  // An empty poll yields the CPU: a waiter spinning without yielding starves
  // the peers it waits for whenever ranks share cores (4 ranks on 2 cores
  // took twice as long per 8-byte allreduce; ranks in separate network
  // namespaces of one host, which cannot tell they share it, took 1.5 ms
  // instead of 0.1). A yield costs ~1 µs when nothing else wants the CPU.
  // But not within 10 µs of the last arrival (or of starting to wait): a
  // running peer's next message usually follows within microseconds, and a
  // yield that switches is a context switch. Unless the host runs more of
  // the job's ranks than it has cores: then the peer we wait for is likely
  // waiting for this very core, and every spin delays it (4 ranks on 2
  // cores: 8-byte allreduce over shared memory 16 µs spinning 10 µs, 8-12 µs
  // yielding at once; docs/latency.md).
  //
  // Except in a one-way Plan (a broadcast's tree or chain) on such a host:
  // there a waiter sleeps in the transport's poll until bytes arrive
  // (Device::await_arrival, where the transport can). Its wake-up delays no
  // one's next round, and back to back the root runs ahead, so a receiver
  // wakes to several calls' messages and lands them with one read. An
  // 8-byte broadcast on 4 hosts x 1 rank over 2 cores made ~45 system calls
  // per call (19 reads, 19 yields) across its ranks, Open MPI's 7; after,
  // ~6. Where a rank's wait holds up the rank it waits for (allreduce,
  // rings) a sleep measured slower: 8-byte allreduce 45-55 -> 70-90 µs.
  // longest_sleep bounds a sleep that nothing the poll watches ends.
  //
  // But not when such calls come back to back (this call is the
  // Communicator's next after a one-way Plan and began within
  // kBackToBackGap of that Plan's end; a gap of time alone read too short
  // here, where a rank is often descheduled between two calls): then a
  // waiter naps kBackToBackNap between polls instead of waking as each
  // message lands. Back to back the root runs ahead, yet a receiver woken
  // per message kept up with it, one read a message (strace, 4 hosts x 1
  // rank: a leaf's readv 0.85 a call, Open MPI's 0.1), and each wake-up
  // took a core from the ranks that send (veth delivers a packet, and
  // wakes its reader, in the sender's context). Napping, it lands several
  // calls' messages at once, as an MPI receiver that yields does. On 4
  // hosts x 1 rank over 2 cores an 8 B-4 KiB broadcast back to back took
  // 13-23 us napping against 18-44 waking, alternated (Open MPI 12-22);
  // 20 and 50 us naps measured alike. A call that follows another kind of
  // call (a barrier) or a pause still wakes at once: napping there cost it
  // 30-70 us (benchmarks/README.md, "Back-to-back broadcasts nap").
  static constexpr Clock::duration kBackToBackGap = std::chrono::microseconds(200);
  static constexpr auto kBackToBackNap = std::chrono::microseconds(20);

  bool poll_for_change(uint64_t seen) {
    constexpr Clock::duration longest_poll = std::chrono::microseconds(20);
    constexpr auto longest_sleep = std::chrono::microseconds(200);
    const bool sleep_at_once = plan_.one_way && communicator_.oversubscribed();
    const Clock::duration keep_cpu_after_arrival =
        communicator_.oversubscribed() ? Clock::duration::zero() : std::chrono::microseconds(10);
    const Clock::duration budget = communicator_.poll_time();
    Clock::duration spent{0};
    auto last = Clock::now();
    auto last_arrival = last;
    while (signal_.count() == seen) {
      const bool consumed = mesh_.progress();
      const auto now = Clock::now();
      if (consumed) {
        spent = Clock::duration{0};  // the collective is moving: keep reading
        last_arrival = now;
      } else if (now - last_arrival > keep_cpu_after_arrival) {
        if (sleep_at_once && back_to_back_) {
          nap(kBackToBackNap);
        } else {
          const bool slept = sleep_at_once && mesh_.await_arrival(longest_sleep);
          if (!slept) sched_yield();
        }
      }
      spent += std::min(now - last, longest_poll);
      last = now;
      if (spent >= budget) return signal_.count() != seen;
    }
    return true;
  }

  static void nap(std::chrono::microseconds length) {
    timespec rest{0, static_cast<long>(std::chrono::nanoseconds(length).count())};
    while (::nanosleep(&rest, &rest) != 0 && errno == EINTR) {
    }
  }

  // With one stream per peer, request i belongs to communication step i.
  // Where a peer's transport keeps several, a step to it owns one request
  // per stripe: first_request_ (by communication index) says where its run
  // starts. Returns the number of requests.
  size_t number_stripes() {
    const size_t steps = graph_.communication_steps();
    if (!communicator_.striped()) return steps;
    first_request_.assign(steps + 1, 0);
    for (StepId id = 0; id < plan_.size(); ++id) {
      const Step& step = plan_.step(id);
      if (step.is_communication())
        first_request_[graph_.communication_index(id) + 1] =
            stripe_count(step.bytes(), communicator_.streams(step.peer));
    }
    for (size_t i = 0; i < steps; ++i) first_request_[i + 1] += first_request_[i];
    return first_request_[steps];
  }

  std::span<transport::Request> requests_of(StepId id) {
    const uint32_t index = graph_.communication_index(id);
    if (first_request_.empty()) return {&requests_[index], 1};
    return {&requests_[first_request_[index]], first_request_[index + 1] - first_request_[index]};
  }

  // The queued local steps whose fences have passed, in the order queued
  // (fences pass in that order).
  bool harvest_fences() {
    bool progressed = false;
    while (queued_head_ < queued_local_.size() &&
           buffers_.backend->fence_passed(queued_local_[queued_head_].second)) {
      const StepId id = queued_local_[queued_head_++].first;
      if (step_timings_) (*step_timings_)[id].end_us = trace_clock_us();
      scheduler_.finish(id);
      progressed = true;
    }
    return progressed;
  }

  // While queued steps run and nothing else is left to do: reads the
  // transports and looks at the oldest fence, for up to kFencePoll, then
  // lets the caller's loop look at its clock. Nothing wakes a sleeper when
  // a fence passes, so this never sleeps; it yields between looks where
  // ranks outnumber cores, as poll_for_change does.
  static constexpr Clock::duration kFencePoll = std::chrono::microseconds(50);
  void poll_for_fence(uint64_t seen) {
    const Clock::time_point until = Clock::now() + kFencePoll;
    const std::pair<StepId, uint64_t> oldest = queued_local_[queued_head_];
    while (signal_.count() == seen && !buffers_.backend->fence_passed(oldest.second)) {
      const bool consumed = mesh_.progress();
      if (!consumed && communicator_.oversubscribed()) sched_yield();
      if (Clock::now() >= until) return;
    }
  }

  bool harvest_completions() {
    bool progressed = false;
    for (size_t i = 0; i < in_flight_.size();) {
      const StepId id = in_flight_[i];
      bool done = true;
      for (const transport::Request& request : requests_of(id)) {
        const auto state = request.state();
        if (state == transport::Request::State::failed) std::rethrow_exception(request.error());
        done = done && state == transport::Request::State::done;
      }
      if (!done) {
        ++i;
        continue;
      }
      in_flight_[i] = in_flight_.back();
      in_flight_.pop_back();
      if (step_timings_) (*step_timings_)[id].end_us = trace_clock_us();
      scheduler_.finish(id);
      progressed = true;
    }
    return progressed;
  }

  void post(StepId id) {
    const Step& step = plan_.step(id);
    const std::span<transport::Request> requests = requests_of(id);
    // The sequence wraps at 2^31 (identically on every rank; two calls that
    // far apart are never in flight together) so the top bit stays free for
    // point-to-point tags.
    tag_.value = (static_cast<uint64_t>(sequence_ & 0x7fffffffu) << 32) | step.slot;
    // Tracked before posting so that a post which fails the request at once
    // is seen by the next harvest.
    in_flight_.push_back(id);
    if (step_timings_) (*step_timings_)[id].start_us = trace_clock_us();
    const size_t length = step.bytes();
    for (size_t piece = 0; piece < requests.size(); ++piece) {
      const Stripe part = stripe(length, requests.size(), piece);
      transport::Pair& pair = communicator_.pair(step.peer, static_cast<int>(piece));
      if (step.kind == StepKind::send)
        pair.post_send(requests[piece], tag_, {buffers_.read(step.from) + part.offset, part.length}, call_.memory);
      else
        pair.post_recv(requests[piece], tag_, {buffers_.write(step.to) + part.offset, part.length}, call_.memory);
    }
  }

  std::string describe_oldest_wait() {
    if (in_flight_.empty() && root_check_pending_ && deferred_)
      return cat("the root check's message to rank ", RootCheck::right(call_), " (4 bytes)");
    if (in_flight_.empty() && root_check_pending_)
      return cat("the root check's message from rank ", RootCheck::left(call_), " (4 bytes)");
    if (in_flight_.empty() && queued_head_ < queued_local_.size())
      return cat("its own ", queued_local_.size() - queued_head_, " queued copies and reductions on ",
                 to_string(call_.memory));
    if (in_flight_.empty()) return "its own steps";
    const StepId oldest = *std::min_element(in_flight_.begin(), in_flight_.end());
    return describe_wait(communicator_, plan_.step(oldest), requests_of(oldest).size());
  }

  const Communicator& communicator_;
  transport::Mesh& mesh_;
  const Plan& plan_;
  const PlanGraph& graph_;
  const Call& call_;
  const uint32_t sequence_;
  const Deadline deadline_;
  RunState& state_;
  StepScheduler& scheduler_;
  transport::CompletionSignal& signal_;
  std::vector<size_t>& first_request_;
  std::vector<StepId>& in_flight_;
  std::vector<std::pair<StepId, uint64_t>>& queued_local_;
  size_t queued_head_ = 0;  // queued_local_[queued_head_...] have not been seen to pass
  bool fenced_ = false;     // the stream-ordered path (run())
  std::vector<StepTiming>* step_timings_;
  const std::optional<Clock::time_point> started_;
  transport::Request* requests_ = nullptr;
  size_t plan_requests_ = 0;
  RootCheck root_check_;
  bool checks_root_ = false;
  // While any rooted call went without a check message: the checks, and
  // the Communicator and number of the call they are about (this one's, or
  // the covered call's whose helper call this is).
  LateRootChecks::Delegation late_;
  bool tells_late_ = false;     // this call tells its root once it has waited kTellAfter
  bool records_late_ = true;    // ... and recorded its root as it started
  DeferredRootChecks* deferred_ = nullptr;  // this call's check is left there
  // Whether earlier calls left checks to settle while this one waits.
  bool deferred_after_ = false;
  bool root_check_pending_ = false;
  bool root_verified_ = false;
  PlanBuffers buffers_;
  transport::Tag tag_;
  bool back_to_back_ = false;     // poll_for_change naps (one-way, shared cores, back to back)
  uint64_t progress_events_ = 0;  // steps finished or posted
  uint64_t progress_seen_ = 0;    // progress_events_ when the watch last heard of progress
};

// On demand (transport/mesh.h), the Pairs this Plan uses may not exist yet.
// Every rank of the call connects its Plan's peers here, before posting
// anything: the peers of one rank's Plan have it among theirs, so each
// pair's two ranks both reach it, and Mesh::connect's ascending order keeps
// them from waiting in a circle. The root check's neighbours are peers too;
// the ring has each rank among its neighbours' neighbours alike.
void connect_peers(const Communicator& communicator, const PlanGraph& graph, const Call& call, Deadline deadline) {
  transport::Mesh& mesh = communicator.mesh();
  const auto connected = [&](int peer) { return mesh.connected(communicator.mesh_rank(peer)); };
  const bool checks_root = RootCheck::needed(call);
  // Once the Plan's pairs are up (every call but the first few), a look per
  // queue and nothing allocated.
  const auto& queues = graph.queues();
  if (std::all_of(queues.begin(), queues.end(), [&](const PlanGraph::Queue& queue) { return connected(queue.peer); }) &&
      (!checks_root || (connected(RootCheck::left(call)) && connected(RootCheck::right(call)))))
    return;
  std::vector<int> peers;
  for (const PlanGraph::Queue& queue : queues) peers.push_back(communicator.mesh_rank(queue.peer));
  if (checks_root) {
    peers.push_back(communicator.mesh_rank(RootCheck::left(call)));
    peers.push_back(communicator.mesh_rank(RootCheck::right(call)));
  }
  mesh.connect(std::move(peers), deadline);
}

}  // namespace

void execute(const Communicator& communicator, const Plan& plan, const PlanGraph& graph, const Call& call,
             const void* input, void* output, uint32_t sequence, Deadline deadline, const ExecuteExtras& extras) {
  // A rooted call checks its root even when its Plan is empty (nothing to move).
  if (plan.size() == 0 && !RootCheck::needed(call)) return;
  if (!communicator.mesh().fully_connected()) connect_peers(communicator, graph, call, deadline);
  PlanRun run(communicator, plan, graph, call, input, output, sequence, deadline, extras);
  try {
    run.run();
  } catch (...) {
    // Abort before the requests and the scratch go away: once abort returns
    // no transport thread writes into them or into the caller's buffers.
    const std::exception_ptr error = communicator.mesh().explain_loss(std::current_exception());
    communicator.mesh().abort(error);
    std::rethrow_exception(error);
  }
}

void execute(const Communicator& communicator, const Plan& plan, const Call& call, const void* input, void* output,
             uint32_t sequence, Deadline deadline) {
  PlanGraph graph(plan);
  execute(communicator, plan, graph, call, input, output, sequence, deadline);
}

}  // namespace chorus::algorithms
