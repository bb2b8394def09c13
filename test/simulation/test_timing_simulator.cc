// The timing simulator and projections: exact times for cases small enough to
// work out by hand, symmetric runs against full ones, and bad input.
#include <catch2/catch.hpp>

#include <vector>

#include "algorithms/selection/registry.h"
#include "base/error.h"
#include "simulation/link_calendar.h"
#include "simulation/projection.h"
#include "simulation/timing_simulator.h"

using namespace chorus;
using namespace chorus::algorithms;

namespace {

constexpr size_t message_bytes = 1 << 20;

NetworkModel network(int hosts, int ranks_per_host) {
  NetworkModel model;
  model.hosts = hosts;
  model.ranks_per_host = ranks_per_host;
  model.local = {.alpha_seconds = 1e-6, .beta_seconds_per_byte = 1.0 / 20e9};
  model.remote = {.alpha_seconds = 10e-6, .beta_seconds_per_byte = 1.0 / 1e9};
  model.gamma_seconds_per_byte = 1.0 / 5e9;
  return model;
}

// Each rank sends one message to `targets[rank]` (or none for -1) and
// receives the ones sent to it.
std::vector<Plan> one_message_each(const std::vector<int>& targets) {
  std::vector<Plan> plans(targets.size());
  for (size_t sender = 0; sender < targets.size(); ++sender) {
    if (targets[sender] < 0) continue;
    plans[sender].send(Region{BufferKind::output, 0, message_bytes}, targets[sender], 0);
    plans[static_cast<size_t>(targets[sender])].recv(static_cast<int>(sender), 0,
                                                     Region{BufferKind::output, 0, message_bytes});
  }
  return plans;
}

ProjectionOptions forced(ProjectionMethod method) {
  ProjectionOptions options;
  options.method = method;
  return options;
}

ProjectionOptions budget(size_t steps) {
  ProjectionOptions options;
  options.step_budget = steps;
  return options;
}

double run(const std::vector<Plan>& plans, const NetworkModel& model) {
  std::vector<const Plan*> pointers;
  for (const Plan& plan : plans) pointers.push_back(&plan);
  return simulate_timing(pointers, model).seconds;
}

}  // namespace

TEST_CASE("a link calendar back-fills gaps and counts lanes", "[timing]") {
  LinkCalendar link;
  link.book(10, 10);  // busy [10, 20)
  CHECK(link.earliest_fit(0, 5) == 0);    // fits before the booking
  CHECK(link.earliest_fit(0, 15) == 20);  // does not: after it
  CHECK(link.earliest_fit(12, 1) == 20);
  link.book(0, 5);
  CHECK(link.earliest_fit(0, 5) == 5);  // the gap [5, 10) exactly
  CHECK(link.earliest_fit(0, 6) == 20);
  link.forget_until(12);
  CHECK(link.earliest_fit(12, 1) == 20);  // still busy after forgetting the past
  LinkCalendar two(2);
  two.book(0, 10);
  CHECK(two.earliest_fit(0, 10) == 0);
  two.book(0, 10);
  CHECK(two.earliest_fit(0, 10) == 10);
  LinkCalendar other;
  other.book(10, 5);
  LinkCalendar* both[] = {&link, &other};
  CHECK(earliest_common_fit(both, 12, 3) == 20);
}

TEST_CASE("one message between hosts takes alpha + n beta", "[timing]") {
  const NetworkModel model = network(2, 1);
  const double expected = 10e-6 + message_bytes / 1e9;
  CHECK(run(one_message_each({1, -1}), model) == Approx(expected).epsilon(1e-12));
  // Within a host the local link's numbers apply.
  const NetworkModel one_host = network(1, 2);
  CHECK(run(one_message_each({1, -1}), one_host) == Approx(1e-6 + message_bytes / 20e9).epsilon(1e-12));
}

TEST_CASE("the ranks of one host share its uplink", "[timing]") {
  const NetworkModel model = network(2, 2);  // ranks 0, 1 on host 0; 2, 3 on host 1
  const double one = 10e-6 + message_bytes / 1e9;
  CHECK(run(one_message_each({2, -1, -1, -1}), model) == Approx(one).epsilon(1e-12));
  // Two remote messages of host 0 at once: the second waits for the first.
  CHECK(run(one_message_each({2, 3, -1, -1}), model) == Approx(10e-6 + 2 * message_bytes / 1e9).epsilon(1e-12));
  // Each host sending one at once: uplinks and downlinks are separate.
  CHECK(run(one_message_each({2, -1, 0, -1}), model) == Approx(one).epsilon(1e-12));
  // Local messages use each rank's own port, so they do not queue.
  CHECK(run(one_message_each({1, 0, 3, 2}), model) == Approx(1e-6 + message_bytes / 20e9).epsilon(1e-12));
}

TEST_CASE("an oversubscribed core slows traffic between hosts by its factor", "[timing]") {
  NetworkModel model = network(4, 1);
  const std::vector<Plan> shift = one_message_each({1, 2, 3, 0});  // every host sends at once
  CHECK(run(shift, model) == Approx(10e-6 + message_bytes / 1e9).epsilon(1e-12));
  model.oversubscription = 2;
  CHECK(run(shift, model) == Approx(10e-6 + 2 * message_bytes / 1e9).epsilon(1e-12));
  model.oversubscription = 4;
  CHECK(run(shift, model) == Approx(10e-6 + 4 * message_bytes / 1e9).epsilon(1e-12));
  // One host alone stays under the core's share: the uplink limits it.
  CHECK(run(one_message_each({1, -1, -1, -1}), model) == Approx(10e-6 + message_bytes / 1e9).epsilon(1e-12));
}

TEST_CASE("reductions take n gamma on the rank's CPU after the message", "[timing]") {
  std::vector<Plan> plans(2);
  const Region data{BufferKind::output, 0, message_bytes};
  const Region incoming{BufferKind::scratch, 0, message_bytes};
  plans[0].send(data, 1, 0);
  const StepId received = plans[1].recv(0, 0, incoming);
  plans[1].reduce(incoming, data, {received});
  plans[1].scratch_bytes = message_bytes;
  CHECK(run(plans, network(2, 1)) == Approx(10e-6 + message_bytes / 1e9 + message_bytes / 5e9).epsilon(1e-12));
}

TEST_CASE("the timing simulator reports deadlocks and bad input", "[timing]") {
  std::vector<Plan> plans(2);
  plans[1].recv(0, 0, Region{BufferKind::output, 0, 8});  // nobody sends it
  CHECK_THROWS_WITH(run(plans, network(2, 1)), Catch::Contains("deadlock"));
  CHECK_THROWS_AS(run(plans, network(3, 1)), InvalidArgument);
  std::vector<Plan> outside(2);
  outside[0].send(Region{BufferKind::output, 0, 8}, 5, 0);
  CHECK_THROWS_AS(run(outside, network(2, 1)), InvalidArgument);
  NetworkModel model = network(2, 1);
  model.oversubscription = 0.5;
  CHECK_THROWS_AS(model.validate(), InvalidArgument);
  model = network(0, 1);
  CHECK_THROWS_AS(model.validate(), InvalidArgument);
}

TEST_CASE("a symmetric run of host 0 matches simulating every rank", "[timing]") {
  struct Case {
    Collective collective;
    const char* name;
    HostSymmetry symmetry;
  };
  const Case cases[] = {
      {Collective::allreduce, "ring", HostSymmetry::rotation},
      {Collective::allreduce, "recursive_doubling", HostSymmetry::exclusive_or},
      {Collective::allgather, "ring", HostSymmetry::rotation},
      {Collective::reduce_scatter, "ring", HostSymmetry::rotation},
  };
  for (double oversubscription : {1.0, 2.0}) {
    for (const Case& test : cases) {
      NetworkModel model = network(8, 2);
      model.oversubscription = oversubscription;
      const Algorithm& algorithm = *find_algorithm(test.collective, test.name);
      const size_t count = test.collective == Collective::allgather ? 1 << 14 : 1 << 20;
      const Call call = model_call(test.collective, count, model);
      INFO(to_string(test.collective) << " " << test.name << ", oversubscription " << oversubscription);
      const Projection full = project(algorithm, call, model, forced(ProjectionMethod::simulated));
      const Projection symmetric = project(algorithm, call, model, forced(ProjectionMethod::symmetric));
      CHECK(full.method == ProjectionMethod::simulated);
      CHECK(symmetric.method == ProjectionMethod::symmetric);
      CHECK(symmetric.symmetry == test.symmetry);
      CHECK(symmetric.simulated_steps * 8 == full.simulated_steps);
      CHECK(project(algorithm, call, model).method == ProjectionMethod::symmetric);  // the cheaper, when it holds
      // Exact without a core limit; with one, the full run's first-come
      // first-served core lets some hosts finish early, which the
      // symmetric run (every host as late as the last) cannot.
      CHECK(symmetric.seconds == Approx(full.seconds).epsilon(oversubscription == 1 ? 1e-9 : 0.05));
    }
  }
}

TEST_CASE("rooted Plans are not symmetric and fall back to the formula past the budget", "[timing]") {
  const NetworkModel model = network(8, 2);
  const Algorithm& binomial = *find_algorithm(Collective::broadcast, "binomial");
  const Call call = model_call(Collective::broadcast, 1 << 16, model);
  CHECK_THROWS_AS(project(binomial, call, model, forced(ProjectionMethod::symmetric)), InvalidArgument);
  CHECK(project(binomial, call, model).method == ProjectionMethod::simulated);
  const Projection capped = project(binomial, call, model, budget(4));
  CHECK(capped.method == ProjectionMethod::formula);
  CHECK(capped.seconds == Approx(formula_seconds(binomial, call, model)));
  // An oversubscribed core makes the formula pay the factor on every byte
  // between hosts.
  NetworkModel oversubscribed = model;
  oversubscribed.oversubscription = 4;
  CHECK(formula_seconds(binomial, call, oversubscribed) > 3 * formula_seconds(binomial, call, model));
}

TEST_CASE("formula and simulation agree where the formula's assumptions hold", "[timing]") {
  // Two hosts of one rank: one message, no sharing, no ordering to get wrong.
  const NetworkModel model = network(2, 1);
  const Algorithm& binomial = *find_algorithm(Collective::broadcast, "binomial");
  const Call call = model_call(Collective::broadcast, 1 << 16, model);
  CHECK(project(binomial, call, model).seconds == Approx(formula_seconds(binomial, call, model)).epsilon(0.01));
}
