// The setup mistakes a new user makes, with real processes: each must fail
// every rank of the job within 2 s (not after a 30 s timeout), exit non-zero,
// and say what the mistake was. Each case reports its time to error and the
// message (the issue note quotes them).
#include <catch2/catch.hpp>

#include <ifaddrs.h>
#include <net/if.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test/launch/child_process.h"

using chorus::test::ChildProcess;
using Clock = std::chrono::steady_clock;

namespace {

std::string launch_rank() { return chorus::test::binary_from_environment("CHORUS_LAUNCH_RANK"); }
std::string chorus_store() { return chorus::test::binary_from_environment("CHORUS_STORE_PROGRAM"); }
std::string tcp_store(int port) { return "tcp://127.0.0.1:" + std::to_string(port); }

struct Outcome {
  double seconds = 0;          // from start to the last rank's exit
  std::vector<int> statuses;   // raw wait statuses
  std::vector<std::string> outputs;
};

// Starts one launch_rank per environment and waits for all of them.
Outcome run_ranks(const std::vector<std::vector<std::string>>& environments) {
  const auto start = Clock::now();
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (const auto& environment : environments)
    ranks.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{launch_rank()}, environment));
  Outcome outcome;
  for (auto& rank : ranks) {
    outcome.statuses.push_back(rank->wait(std::chrono::seconds(60)));
    outcome.outputs.push_back(rank->output());
  }
  outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return outcome;
}

// Every rank failed (exit 1) within the limit, saying `expected`.
void require_every_rank_fails(const Outcome& outcome, const std::string& what, const std::string& expected,
                              double limit_seconds = 2.0) {
  for (size_t rank = 0; rank < outcome.outputs.size(); ++rank) {
    INFO(what << ": process " << rank << " said: " << outcome.outputs[rank]);
    CHECK(WIFEXITED(outcome.statuses[rank]));
    CHECK(WEXITSTATUS(outcome.statuses[rank]) == 1);
    CHECK_THAT(outcome.outputs[rank], Catch::Contains(expected));
  }
  CHECK(outcome.seconds < limit_seconds);
  WARN(what << ": every rank failed within " << outcome.seconds << " s; e.g. " << outcome.outputs.back());
}

std::vector<std::string> rank_variables(int rank, int size, const std::string& store, const std::string& job) {
  return {"CHORUS_RANK=" + std::to_string(rank), "CHORUS_SIZE=" + std::to_string(size), "CHORUS_STORE=" + store,
          "CHORUS_JOB_ID=" + job};
}

// A listener that is not a chorus store: after accepting it stays silent,
// answers like an HTTP server, or hangs up at once.
class ForeignListener {
 public:
  enum class Manner { silent, talks, hangs_up };
  explicit ForeignListener(Manner manner) : manner_(manner) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(fd_, 64) == 0);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~ForeignListener() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    for (int fd : accepted_) ::close(fd);
    ::close(fd_);
  }
  int port() const { return port_; }

 private:
  void serve() {
    while (!stop_) {
      const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) return;
      if (manner_ == Manner::hangs_up) {
        ::close(client);
        continue;
      }
      if (manner_ == Manner::talks) {
        const char reply[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        (void)!::write(client, reply, sizeof reply - 1);
      }
      accepted_.push_back(client);
    }
  }
  Manner manner_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<int> accepted_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("two processes given the same rank fail every rank at once, naming both", "[launch][mistakes]") {
  for (int twice : {1, 0}) {
    // Rank 0 twice: both try to host the store; one does, the other joins it.
    const std::string store = tcp_store(chorus::test::free_port());
    const int other = twice == 0 ? 1 : 0;
    const Outcome outcome = run_ranks({rank_variables(other, 3, store, "duplicate"),
                                       rank_variables(twice, 3, store, "duplicate"),
                                       rank_variables(twice, 3, store, "duplicate")});
    require_every_rank_fails(outcome, "rank " + std::to_string(twice) + " twice",
                             "rank " + std::to_string(twice) + " was given to two processes: pid ");
  }
}

TEST_CASE("ranks disagreeing on the job size fail every rank at once, naming both sizes", "[launch][mistakes]") {
  SECTION("a rank started for a larger job") {
    const std::string store = tcp_store(chorus::test::free_port());
    const Outcome outcome = run_ranks({rank_variables(0, 3, store, "sizes"), rank_variables(1, 3, store, "sizes"),
                                       rank_variables(2, 4, store, "sizes")});
    require_every_rank_fails(outcome, "size 3, 3, 4", "rank 2 (pid ");
    for (const std::string& output : outcome.outputs)
      CHECK_THAT(output, Catch::Contains("was started for a job of 4 ranks, but rank 0 for a job of 3"));
  }
  SECTION("rank 0 started for a smaller job (its peers would otherwise finish a job of their own)") {
    const std::string store = tcp_store(chorus::test::free_port());
    const Outcome outcome = run_ranks({rank_variables(0, 2, store, "sizes"), rank_variables(1, 3, store, "sizes"),
                                       rank_variables(2, 3, store, "sizes")});
    require_every_rank_fails(outcome, "size 2, 3, 3", "but rank 0 for a job of 2");
  }
}

TEST_CASE("a store port held by a program that is not a chorus store fails at once, saying so", "[launch][mistakes]") {
  for (auto manner : {ForeignListener::Manner::silent, ForeignListener::Manner::talks,
                      ForeignListener::Manner::hangs_up}) {
    ForeignListener listener(manner);
    const std::string store = tcp_store(listener.port());
    const Outcome outcome = run_ranks({rank_variables(0, 2, store, "foreign"), rank_variables(1, 2, store, "foreign")});
    const char* expected = "is not a chorus store";
    require_every_rank_fails(outcome,
                             manner == ForeignListener::Manner::silent  ? "a silent listener"
                             : manner == ForeignListener::Manner::talks ? "an HTTP server"
                                                                         : "a listener that hangs up",
                             expected);
  }
}

TEST_CASE("a store of another job (another secret) fails at once, saying so", "[launch][mistakes]") {
  const int port = chorus::test::free_port();
  ChildProcess other_store({chorus_store(), "--host", "127.0.0.1", "--port", std::to_string(port)},
                           {"CHORUS_SECRET=the-other-jobs-secret-0123456789"});
  REQUIRE(other_store.wait_for_output("listening", 1, std::chrono::seconds(10)));
  const std::string store = tcp_store(port);
  std::vector<std::vector<std::string>> ranks{rank_variables(0, 2, store, "mine"), rank_variables(1, 2, store, "mine")};
  for (auto& variables : ranks) variables.push_back("CHORUS_SECRET=this-jobs-own-secret-9876543210");
  require_every_rank_fails(run_ranks(ranks), "another job's store", "refused this client's proof of the job secret");
}

TEST_CASE("CHORUS_TIMEOUT sets the default timeout; a malformed value is named", "[launch][mistakes]") {
  const std::string store = tcp_store(chorus::test::free_port());
  // Rank 1 never comes: with a 1 s timeout rank 0 gives up after about a second.
  std::vector<std::string> alone = rank_variables(0, 2, store, "timeout");
  alone.push_back("CHORUS_TIMEOUT=1");
  const Outcome outcome = run_ranks({alone});
  CHECK(outcome.seconds >= 0.9);
  require_every_rank_fails(outcome, "CHORUS_TIMEOUT=1, rank 1 missing", "timed out after 1000 ms", 4.0);
  std::vector<std::string> malformed = rank_variables(0, 1, tcp_store(chorus::test::free_port()), "timeout");
  malformed.push_back("CHORUS_TIMEOUT=soon");
  require_every_rank_fails(run_ranks({malformed}), "CHORUS_TIMEOUT=soon", "CHORUS_TIMEOUT='soon' is not a number");
}

namespace {

struct Interface {
  std::string name;
  std::string address;  // IPv4, dotted
};

// A non-loopback interface with an IPv4 address; empty when the machine has none.
Interface routable_ipv4() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  Interface found;
  for (ifaddrs* entry = list; entry && found.name.empty(); entry = entry->ifa_next)
    if (entry->ifa_addr && entry->ifa_addr->sa_family == AF_INET && !(entry->ifa_flags & IFF_LOOPBACK) &&
        (entry->ifa_flags & IFF_UP)) {
      char text[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(entry->ifa_addr)->sin_addr, text, sizeof text);
      found = {entry->ifa_name, text};
    }
  ::freeifaddrs(list);
  return found;
}

std::string routable_interface() { return routable_ipv4().name; }

// Whether /proc/net/route has a default route (what the last rule of choose_local_address uses).
bool has_default_route() {
  ChildProcess route({"/bin/sh", "-c", "awk '$2 == \"00000000\" && $1 != \"lo\"' /proc/net/route"}, {});
  route.wait(std::chrono::seconds(10));
  return !route.output().empty();
}

size_t occurrences(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

}  // namespace

TEST_CASE("a job without a secret says once that other hosts can reach it, and stays quiet on loopback",
          "[launch][mistakes]") {
  const std::string interface = routable_interface();
  if (interface.empty()) {
    WARN("no routable interface on this machine: only the loopback half runs");
  }
  const std::string warning = "has no job secret and its listeners can be reached from other hosts";
  for (const std::string& chosen : {std::string("lo"), interface}) {
    if (chosen.empty()) continue;
    const std::string store = tcp_store(chorus::test::free_port());
    std::vector<std::vector<std::string>> ranks{rank_variables(0, 2, store, "open-" + chosen),
                                                rank_variables(1, 2, store, "open-" + chosen)};
    for (auto& variables : ranks) {
      variables.push_back("CHORUS_TRANSPORT=tcp");
      variables.push_back("CHORUS_SOCKET_IFNAME=" + chosen);
    }
    const Outcome outcome = run_ranks(ranks);
    INFO("interface " << chosen << "; rank 0 said: " << outcome.outputs[0] << "; rank 1 said: " << outcome.outputs[1]);
    for (int status : outcome.statuses) CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    CHECK(occurrences(outcome.outputs[0], warning) == (chosen == "lo" ? 0u : 1u));
    CHECK(occurrences(outcome.outputs[1], warning) == 0);
  }
}


// Issue 29, item 1: with no interface named, the listeners open where the job
// lives, and say so at info. The tcp transport's listener is what other hosts
// could reach; its log line names the address it bound.
TEST_CASE("with no interface named, every rank listens where the job lives, and says where", "[launch][mistakes]") {
  const std::string warning = "has no job secret and its listeners can be reached from other hosts";
  const Interface routable = routable_ipv4();
  struct Case {
    std::string what;
    std::string store;
    std::vector<std::string> extra;  // per rank
    std::string listens_on;          // the address the log line must name
    bool warns;
  };
  std::vector<Case> cases;
  cases.push_back({"store on 127.0.0.1", tcp_store(chorus::test::free_port()), {}, "127.0.0.1:", false});
  cases.push_back({"store at localhost", "tcp://localhost:" + std::to_string(chorus::test::free_port()), {},
                   "127.0.0.1:", false});
  char directory[] = "/tmp/chorus-placement-XXXXXX";
  REQUIRE(::mkdtemp(directory) != nullptr);
  const std::string file_store = std::string("file://") + directory;
  cases.push_back({"file store, the launcher says one host", file_store + "/one",
                   {"LOCAL_WORLD_SIZE=2", "WORLD_SIZE=2"}, "127.0.0.1:", false});
  if (!routable.name.empty()) {
    cases.push_back({"store on " + routable.address,
                     "tcp://" + routable.address + ":" + std::to_string(chorus::test::free_port()), {},
                     routable.address + ":", true});
    if (has_default_route())
      cases.push_back({"file store, nothing says where the ranks are", file_store + "/unknown",
                       {"LOCAL_WORLD_SIZE=1", "WORLD_SIZE=2"}, routable.address + ":", true});
  } else {
    WARN("no routable interface on this machine: only the loopback cases run");
  }
  for (const Case& job : cases) {
    std::vector<std::vector<std::string>> ranks{rank_variables(0, 2, job.store, "placement"),
                                                rank_variables(1, 2, job.store, "placement")};
    for (auto& variables : ranks) {
      variables.push_back("CHORUS_TRANSPORT=tcp");
      variables.push_back("CHORUS_LOG=info");
      variables.insert(variables.end(), job.extra.begin(), job.extra.end());
    }
    const Outcome outcome = run_ranks(ranks);
    INFO(job.what << "; rank 0 said: " << outcome.outputs[0] << "; rank 1 said: " << outcome.outputs[1]);
    for (int status : outcome.statuses) CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    for (const std::string& output : outcome.outputs) {
      CHECK_THAT(output, Catch::Contains("tcp: listening on " + job.listens_on));
      CHECK(occurrences(output, "tcp: listening on ") == 1);
    }
    CHECK(occurrences(outcome.outputs[0], warning) == (job.warns ? 1u : 0u));
  }
  std::filesystem::remove_all(directory);
}

TEST_CASE("a process started for a rank of a job that has every rank fails alone; the job goes on",
          "[launch][mistakes]") {
  const std::string store = tcp_store(chorus::test::free_port());
  std::vector<std::unique_ptr<ChildProcess>> job;
  for (int rank : {0, 1}) {
    std::vector<std::string> environment = rank_variables(rank, 2, store, "one-too-many");
    environment.push_back("CHORUS_TEST_LINGER_MS=2500");
    job.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{launch_rank()}, environment));
  }
  for (auto& rank : job) REQUIRE(rank->wait_for_output("joined", 1, std::chrono::seconds(30)));
  // Rank 1 again, while the job runs: the launcher started one process too many.
  const Outcome late = run_ranks({rank_variables(1, 2, store, "one-too-many")});
  INFO("the late process said: " << late.outputs[0]);
  CHECK(WIFEXITED(late.statuses[0]));
  CHECK(WEXITSTATUS(late.statuses[0]) == 1);
  CHECK_THAT(late.outputs[0], Catch::Contains("rank 1 of this job is already pid " + std::to_string(job[1]->pid())));
  CHECK_THAT(late.outputs[0], Catch::Contains("is one too many and leaves; the job goes on without it"));
  CHECK(late.seconds < 2.0);
  // The job it could not join finishes its second checked allreduce as if it had never come.
  for (size_t rank = 0; rank < job.size(); ++rank) {
    const int status = job[rank]->wait(std::chrono::seconds(60));
    INFO("rank " << rank << " said: " << job[rank]->output());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK_THAT(job[rank]->output(), Catch::Contains("allreduce ok"));
  }
  WARN("one process too many failed alone within " << late.seconds << " s: " << late.outputs[0]);
}
