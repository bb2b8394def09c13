// recv_any / recv_any_async (chorus/point_to_point.h), ranks as threads over
// shared memory and over TCP (and TCP with connections on demand), at 2, 3
// and 4 ranks: every sender taken exactly once, FIFO per sender, waking on a
// late arrival without spinning, mismatch, timeout, an aborting peer, mixed
// specific and any-source receives; and (tag [kill], in a process of its
// own) a peer killed while rank 0 waits.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "rendezvous/file_store.h"
#include "test/integration/rank_threads.h"

using namespace chorus;
using namespace std::chrono_literals;
using chorus::testing::require_all_ok;
using chorus::testing::run_ranks;

namespace {

struct Setup {
  const char* name;
  const char* transport;
  bool on_demand;
};
// CHORUS_TEST_TRANSPORT=ibverbs (test/ibverbs/in_vm.sh, on Soft-RoCE) runs
// every case over that one transport instead.
std::vector<Setup> setups() {
  if (const char* transport = std::getenv("CHORUS_TEST_TRANSPORT")) return {{transport, transport, false}};
  return {{"shm", "shm", false}, {"tcp", "tcp", false}, {"tcp on demand", "tcp", true}};
}

std::function<void(int, ConnectOptions&)> configure(const Setup& setup) {
  return [setup](int, ConnectOptions& options) {
    options.transports = {setup.transport};
    // Network transports publish the interface the job names (veth0 in the VM).
    if (const char* interface = std::getenv("CHORUS_SOCKET_IFNAME")) options.interface = interface;
    if (setup.on_demand) options.connections = Connections::on_demand;
  };
}

// Element i of message `sequence` from `sender`.
int64_t value(int sender, int sequence, size_t i) {
  return static_cast<int64_t>(sender) * 1'000'000'007 + sequence * 1'000'003 + static_cast<int64_t>(i);
}
std::vector<int64_t> message(int sender, int sequence, size_t count) {
  std::vector<int64_t> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = value(sender, sequence, i);
  return data;
}
// The (sender, sequence) a received message is, checking every element; -1s if garbled.
std::pair<int, int> identify(const std::vector<int64_t>& data) {
  if (data.empty()) return {-1, -1};
  const int sender = static_cast<int>(data[0] / 1'000'000'007);
  const int sequence = static_cast<int>((data[0] % 1'000'000'007) / 1'000'003);
  for (size_t i = 0; i < data.size(); ++i)
    if (data[i] != value(sender, sequence, i)) return {-1, -1};
  return {sender, sequence};
}

void send_message(Context& context, std::vector<int64_t> data, int peer, uint32_t tag) {
  send(context, std::span(data), peer, tag);
}

double thread_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

}  // namespace

TEST_CASE("recv_any takes every sender exactly once, with its data, and keeps each sender's order", "[recv_any]") {
  for (const Setup& setup : setups()) {
    for (int size : {2, 3, 4}) {
      // 1000 elements: one eager message; 200000 (1.6 MB): shm's single-copy
      // pull and more than its ring, many TCP reads.
      for (size_t count : {size_t{1000}, size_t{200000}}) {
        DYNAMIC_SECTION(setup.name << ", " << size << " ranks, " << count << " elements") {
          constexpr int kPerSender = 3;
          require_all_ok(run_ranks(size, [&](Context& context) {
            const uint32_t tag = 42;
            if (context.rank() != 0) {
              for (int sequence = 0; sequence < kPerSender; ++sequence)
                send_message(context, message(context.rank(), sequence, count), 0, tag);
              // Another tag, received specifically after: recv_any must leave it alone.
              send_message(context, message(context.rank(), 99, 10), 0, tag + 1);
              barrier(context);
              return;
            }
            std::map<int, int> next_sequence;
            for (int received = 0; received < kPerSender * (size - 1); ++received) {
              std::vector<int64_t> data(count);
              int source = -1;
              if (received % 2 == 0) {
                source = recv_any(context, std::span(data), tag);
              } else {
                Work work = recv_any_async(context, std::span(data), tag);
                work.wait();
                source = work.source_rank();
              }
              const auto [sender, sequence] = identify(data);
              REQUIRE(sender == source);
              REQUIRE(sender >= 1);
              REQUIRE(sender < size);
              REQUIRE(sequence == next_sequence[sender]++);
            }
            for (int sender = 1; sender < size; ++sender) {
              REQUIRE(next_sequence[sender] == kPerSender);
              std::vector<int64_t> other(10);
              recv(context, std::span(other), sender, tag + 1);
              REQUIRE(identify(other) == std::make_pair(sender, 99));
            }
            barrier(context);
          }, 20s, configure(setup)));
        }
      }
    }
  }
}

TEST_CASE("a waiting recv_any wakes when a message arrives later, without spinning", "[recv_any]") {
  for (const Setup& setup : setups()) {
    for (int size : {2, 4}) {
      DYNAMIC_SECTION(setup.name << ", " << size << " ranks") {
        require_all_ok(run_ranks(size, [&](Context& context) {
          // Connected (on demand too) and everyone past connect before the clock starts.
          barrier(context);
          const int late = context.size() - 1;
          if (context.rank() == late) {
            std::this_thread::sleep_for(300ms);
            send_message(context, message(late, 0, 100), 0, 5);
          } else if (context.rank() == 0) {
            std::vector<int64_t> data(100);
            const double cpu_before = thread_cpu_seconds();
            const auto started = std::chrono::steady_clock::now();
            const int source = recv_any(context, std::span(data), 5);
            const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
            const double cpu = thread_cpu_seconds() - cpu_before;
            REQUIRE(source == late);
            REQUIRE(identify(data) == std::make_pair(late, 0));
            REQUIRE(waited > 0.2);
            // A spinning waiter burns about `waited`; a sleeping one a few ms
            // (on demand: a look every 20 ms until the pairs are up). Loose: 25%.
            REQUIRE(cpu < 0.25 * waited);
          }
          barrier(context);
        }, 20s, configure(setup)));
      }
    }
  }
}

TEST_CASE("recv_any and specific receives on other threads neither lose nor duplicate messages", "[recv_any]") {
  for (const Setup& setup : setups()) {
    DYNAMIC_SECTION(setup.name) {
      constexpr int kPerSender = 40;
      const int size = 3;
      require_all_ok(run_ranks(size, [&](Context& context) {
        const uint32_t tag = 7;
        if (context.rank() != 0) {
          for (int sequence = 0; sequence < kPerSender; ++sequence)
            send_message(context, message(context.rank(), sequence, 64), 0, tag);
          barrier(context);
          return;
        }
        // Two threads take 15 each from any peer while one thread per sender
        // takes 10 from it specifically; then the rest (30) from any peer.
        // Sized so that the greedy any-source threads cannot leave a
        // specific receiver without messages: 2 * 15 + 10 <= kPerSender.
        std::mutex mutex;
        std::vector<std::pair<int, int>> got;
        std::map<std::string, std::vector<int>> orders;  // per receiving thread and sender
        std::vector<std::string> failures;
        auto take = [&](const std::string& who, int specific, int messages) {
          try {
            for (int i = 0; i < messages; ++i) {
              std::vector<int64_t> data(64);
              int source = specific;
              if (specific < 0) source = recv_any(context, std::span(data), tag);
              else recv(context, std::span(data), specific, tag);
              const auto [sender, sequence] = identify(data);
              std::lock_guard<std::mutex> lock(mutex);
              if (sender != source) failures.push_back(cat(who, " got a message of rank ", sender, " from ", source));
              got.emplace_back(sender, sequence);
              orders[cat(who, " from ", sender)].push_back(sequence);
            }
          } catch (const std::exception& error) {
            std::lock_guard<std::mutex> lock(mutex);
            failures.push_back(cat(who, ": ", error.what()));
          }
        };
        std::vector<std::thread> threads;
        threads.emplace_back(take, "any 1", -1, 15);
        threads.emplace_back(take, "any 2", -1, 15);
        threads.emplace_back(take, "from 1", 1, 10);
        threads.emplace_back(take, "from 2", 2, 10);
        for (auto& thread : threads) thread.join();
        take("rest", -1, 2 * kPerSender - 50);
        REQUIRE(failures == std::vector<std::string>{});
        std::set<std::pair<int, int>> unique(got.begin(), got.end());
        REQUIRE(got.size() == static_cast<size_t>(2 * kPerSender));
        REQUIRE(unique.size() == got.size());
        // What one thread took from one sender came in that sender's order.
        std::vector<std::string> out_of_order;
        for (const auto& [who, sequences] : orders)
          if (!std::is_sorted(sequences.begin(), sequences.end())) out_of_order.push_back(who);
        REQUIRE(out_of_order == std::vector<std::string>{});
        barrier(context);
      }, 30s, configure(setup)));
    }
  }
}

TEST_CASE("recv_any of another size fails with MismatchError naming the sender", "[recv_any]") {
  for (const Setup& setup : setups()) {
    DYNAMIC_SECTION(setup.name) {
      auto outcomes = run_ranks(3, [&](Context& context) {
        if (context.rank() == 2) {
          send_message(context, message(2, 0, 10), 0, 3);
        } else if (context.rank() == 0) {
          std::vector<int64_t> data(11);
          try {
            recv_any(context, std::span(data), 3);
            FAIL("recv_any of 11 elements took a message of 10");
          } catch (const MismatchError& error) {
            REQUIRE_THAT(std::string(error.what()), Catch::Contains("rank 2"));
          }
          return;
        }
        // Ranks 1 and 2 learn of rank 0's abort instead of hanging.
        std::vector<int64_t> never(1);
        REQUIRE_THROWS_AS(recv(context, std::span(never), 0, 1000), Error);
      }, 10s, configure(setup));
      require_all_ok(outcomes);
    }
  }
}

TEST_CASE("recv_any times out naming what it waited for; a peer's abort ends it", "[recv_any]") {
  for (const Setup& setup : setups()) {
    DYNAMIC_SECTION(setup.name << ": timeout") {
      require_all_ok(run_ranks(3, [&](Context& context) {
        if (context.rank() == 0) {
          std::vector<int64_t> data(4);
          CollectiveOptions options;
          options.timeout = 400ms;
          const auto started = std::chrono::steady_clock::now();
          try {
            recv_any(context, std::span(data), 9, options);
            FAIL("recv_any with no sender returned");
          } catch (const TimeoutError& error) {
            REQUIRE_THAT(std::string(error.what()), Catch::Contains("any peer, tag 9"));
          }
          REQUIRE(std::chrono::steady_clock::now() - started < 5s);
          return;
        }
        std::vector<int64_t> never(1);
        REQUIRE_THROWS_AS(recv(context, std::span(never), 0, 1000), Error);
      }, 10s, configure(setup)));
    }
    DYNAMIC_SECTION(setup.name << ": a peer aborts") {
      require_all_ok(run_ranks(3, [&](Context& context) {
        barrier(context);
        if (context.rank() == 1) {
          std::this_thread::sleep_for(200ms);
          context.abort("rank 1 gives up");
          return;
        }
        const auto started = std::chrono::steady_clock::now();
        std::vector<int64_t> data(4);
        if (context.rank() == 0) {
          try {
            recv_any(context, std::span(data), 9);
            FAIL("recv_any returned though rank 1 aborted");
          } catch (const Error& error) {
            REQUIRE_THAT(std::string(error.what()), Catch::Contains("rank 1 gives up"));
          }
        } else {
          REQUIRE_THROWS_AS(recv(context, std::span(data), 0, 1000), Error);
        }
        REQUIRE(std::chrono::steady_clock::now() - started < 8s);
      }, 15s, configure(setup)));
    }
  }
}

// Its own process (meson runs it alone): fork is only safe before threads.
TEST_CASE("a peer killed while recv_any waits fails it, naming the peer", "[kill]") {
  for (const Setup& setup : setups()) {
    DYNAMIC_SECTION(setup.name) {
      const std::filesystem::path directory = std::filesystem::temp_directory_path() /
                                              cat("chorus-recv-any-", ::getpid(), "-", setup.transport,
                                                  setup.on_demand ? "-on-demand" : "");
      std::filesystem::remove_all(directory);
      std::filesystem::create_directories(directory);
      const int size = 3;
      std::vector<pid_t> children;
      for (int rank = 1; rank < size; ++rank) {
        const pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
          int status = 0;
          try {
            StoreBootstrap bootstrap(std::make_shared<FileStore>(directory), rank, size, 20s);
            ConnectOptions options;
            options.timeout = 20s;
            options.hostname = "127.0.0.1";
            configure(setup)(rank, options);
            auto context = connect(bootstrap, options);
            // No collective first: on demand rank 1 then never connects to
            // rank 0, which must find it gone by knocking on its listener.
            if (rank == 1) {
              std::this_thread::sleep_for(300ms);
              ::kill(::getpid(), SIGKILL);
            }
            std::vector<int64_t> never(1);
            recv(*context, std::span(never), 0, 1000);  // fails once rank 0 gives up
          } catch (...) {
            status = 0;
          }
          ::_exit(status);
        }
        children.push_back(child);
      }
      std::string error_text;
      std::chrono::steady_clock::duration took{};
      {
        StoreBootstrap bootstrap(std::make_shared<FileStore>(directory), 0, size, 20s);
        ConnectOptions options;
        options.timeout = 20s;
        options.hostname = "127.0.0.1";
        configure(setup)(0, options);
        auto context = connect(bootstrap, options);
        std::vector<int64_t> data(4);
        const auto started = std::chrono::steady_clock::now();
        try {
          recv_any(*context, std::span(data), 9);
        } catch (const Error& error) {
          error_text = error.what();
        }
        took = std::chrono::steady_clock::now() - started;
      }
      for (pid_t child : children) ::waitpid(child, nullptr, 0);
      std::filesystem::remove_all(directory);
      INFO(error_text);
      REQUIRE(!error_text.empty());
      REQUIRE(error_text.find("rank 1") != std::string::npos);
      REQUIRE(took < 8s);
    }
  }
}
