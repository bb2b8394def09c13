// Matching a framework's collectives across ranks before any data moves.
//
// chorus runs the n-th collective of every rank as one call, so every rank
// must issue them in one order. Eager TensorFlow and tf.function do (a
// program's stateful ops run in program order), but a TensorFlow 1 graph
// runs independent ops in whatever order its threads reach them, and two
// allreduces of one size issued in different orders on two ranks would be
// summed with each other: a wrong answer with no error. Horovod matches its
// collectives by name instead, through a coordinator. The Negotiator does
// the same with chorus's own collectives:
//
// - A call is submitted with its Description (negotiation/description.h)
//   and a key: its position among the ordered calls, or its name and how
//   many calls of that name this rank made before.
// - Ranks exchange what they submitted in cycles: one allgather of a
//   fixed-size block per rank (and an allgatherv of the rest when a rank
//   has more to say than fits). After a cycle every rank knows the same
//   table of who announced what, so every rank decides the same things.
// - A call every rank has announced is complete. The calls a cycle
//   completes run in the order rank 0 announced them, the same order on
//   every rank, on the thread driving the cycles.
// - Before it runs, every rank compares the descriptions: where ranks
//   disagree (name, type, shape, op, root, scaling) or one refused, the
//   call fails on every rank alike, naming the ranks and what differs,
//   and no data has moved: the Context goes on.
//
// When to take part in a cycle: a rank with nothing submitted and nothing
// outstanding in the table waits; otherwise it joins the next cycle (a
// rank's view of the table is the same as everyone's, so either all ranks
// join or only those with something new, who wait in the allgather for the
// rest). While calls wait for ranks that have not reached them, the ranks
// run empty cycles with a growing pause (up to 2 ms) between them. A call
// some ranks never announce is given up after the stall limit (the
// Context's timeout by default) by whichever rank sees it first: its
// announcement of that reaches everyone in the same cycle, and every rank
// that has the call fails it with TimeoutError naming the ranks that did
// not come and what they wait on instead.
//
// Threads: a small call (up to Options::inline_max_bytes) submitted while
// nothing else is in flight drives its cycle on the submitting thread and
// usually returns run, with no thread hand-off (what an eager op wants).
// Otherwise the Negotiator's own thread drives the cycles and runs the
// calls; the submitting thread returns at once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <thread>
#include <vector>

#include "adapters/negotiation/description.h"
#include "chorus/context.h"

namespace chorus::negotiation {

struct Call {
  Description description;
  // Bytes the call moves (its input), for choosing the thread that runs it.
  size_t bytes = 0;
  // Runs the collective, once every rank's description agrees; `everyone`
  // holds them in rank order. Fails by throwing.
  std::function<void(Context& context, std::span<const Description* const> everyone)> run;
  // Called once: with null after run returned, or with what the call failed
  // with (MismatchError where ranks disagree, InvalidArgument where a rank
  // refused it, TimeoutError where ranks never came, chorus's error where
  // the Context failed, Aborted at shutdown).
  std::function<void(std::exception_ptr failure)> done;
};

class Negotiator {
 public:
  struct Options {
    TypeNamer type_name;
    OpNamer op_name;
    size_t inline_max_bytes = size_t{64} << 10;
    // How long a call may wait for ranks that never announce it. Default:
    // the Context's timeout.
    std::optional<std::chrono::milliseconds> stall_limit;
  };

  Negotiator(std::shared_ptr<Context> context, Options options);
  // Fails what is still waiting with Aborted and joins the thread, after
  // the cycle in progress (if any) ends.
  ~Negotiator();
  Negotiator(const Negotiator&) = delete;
  Negotiator& operator=(const Negotiator&) = delete;

  // Submits a call: its key is taken now (its position, or its name's
  // count), so calls of one thread keep their order.
  void submit(Call call);

  Context& context() { return *context_; }
  // Cycles run so far (tests and benchmarks read it).
  uint64_t cycles() const;

 private:
  struct Submitted {
    Key key;
    Call call;
  };
  // One call in the table: who announced it and with what.
  struct Entry {
    std::vector<std::optional<Description>> from;  // per rank
    size_t announced = 0;
    std::optional<uint64_t> rank0_order;  // when rank 0 announced it, among its announcements
    std::chrono::steady_clock::time_point first_seen;
    bool warned = false;
    bool abandon_sent = false;
  };

  void worker_loop();
  // Runs cycles until nothing is queued or outstanding (the worker), or
  // one cycle (a submitting `caller`: what is left after it goes to the
  // worker). Called with driving_ set.
  void drive(bool caller);
  void run_cycle(std::vector<Submitted> batch);
  // Compares every rank's description of a complete call and runs it, or
  // fails it on every rank alike.
  void run_complete(const Key& key, Call& call, std::span<const Description* const> everyone);
  // Every rank's announcements of this cycle (rank order), from `mine`:
  // spans into blocks_ (or assembled_, when a rank's did not fit its block).
  std::vector<std::span<const std::byte>> exchange(const std::vector<std::byte>& mine);
  void fail_everything(std::exception_ptr failure);
  void finish(Call& call, std::exception_ptr failure);
  std::string waiting_summary(int rank) const;

  std::shared_ptr<Context> context_;
  Options options_;
  int rank_;
  int size_;
  std::chrono::milliseconds stall_limit_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Submitted> queue_;  // submitted, not yet announced
  uint64_t ordered_count_ = 0;
  std::map<std::string, uint64_t> named_counts_;
  bool driving_ = false;   // some thread runs cycles (only that thread touches the table)
  bool handoff_ = false;   // a submitting thread left the driving to the worker
  bool stopping_ = false;
  std::atomic<uint64_t> cycles_{0};

  // The driving thread's alone.
  std::map<Key, Entry> table_;
  std::map<Key, Call> waiting_;   // this rank's calls, announced, not yet run
  std::set<Key> abandoned_;
  uint64_t rank0_announcements_ = 0;
  bool last_cycle_was_empty_ = false;
  std::vector<std::byte> mine_, send_block_, blocks_;
  std::vector<std::vector<std::byte>> assembled_;
  std::chrono::microseconds pause_{0};

  std::thread thread_;
};

}  // namespace chorus::negotiation
