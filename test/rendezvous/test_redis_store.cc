// RedisStore against a real redis-server: the Store contract, namespaces,
// expiry of every written key, remove_namespace, database and password from
// the URL, errors when Redis is down, dies, hangs or restarts, and whole jobs
// of forked processes that rendezvous through Redis (and fail cleanly when
// Redis is SIGKILLed mid-rendezvous).
#include <catch2/catch.hpp>

#include <hiredis/hiredis.h>

#include <memory>
#include <thread>

#include "base/error.h"
#include "chorus/collectives.h"
#include "chorus/connect.h"
#include "redis_server.h"
#include "rendezvous/bootstrap.h"
#include "rendezvous/redis_store.h"
#include "rendezvous/store.h"
#include "rendezvous/store_url.h"
#include "rendezvous_test_helpers.h"
#include "store_contract.h"

using namespace std::chrono_literals;
using chorus::test::bytes;
using chorus::test::RedisServer;
using chorus::test::text;

namespace {

chorus::RedisStoreOptions options_for(const RedisServer& server, const std::string& key_namespace = "test-job") {
  chorus::RedisStoreOptions options;
  options.port = server.port();
  options.key_namespace = key_namespace;
  return options;
}

// Runs one command on a raw connection and returns its integer reply.
long long raw_integer(const RedisServer& server, const std::vector<std::string>& command, int database = 0) {
  redisContext* context = server.raw_connection();
  if (database != 0) freeReplyObject(redisCommand(context, "SELECT %d", database));
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const auto& part : command) {
    argv.push_back(part.data());
    lengths.push_back(part.size());
  }
  auto* reply = static_cast<redisReply*>(redisCommandArgv(context, static_cast<int>(argv.size()), argv.data(),
                                                          lengths.data()));
  REQUIRE(reply != nullptr);
  REQUIRE(reply->type == REDIS_REPLY_INTEGER);
  long long value = reply->integer;
  freeReplyObject(reply);
  redisFree(context);
  return value;
}

}  // namespace

TEST_CASE("RedisStore implements the Store interface", "[redis]") {
  RedisServer server;
  chorus::RedisStore store(options_for(server));
  chorus::test::check_store_interface(store);
}

TEST_CASE("RedisStore keeps namespaces apart and remove_namespace empties only its own", "[redis]") {
  RedisServer server;
  chorus::RedisStore job_a(options_for(server, "job-a"));
  chorus::RedisStore job_b(options_for(server, "job-b"));
  // A namespace with glob characters is matched literally by remove_namespace.
  chorus::RedisStore job_glob(options_for(server, "job-*"));
  job_a.set("address", bytes("a"));
  job_b.set("address", bytes("b"));
  job_glob.set("address", bytes("glob"));
  REQUIRE(text(job_a.get("address", 1s)) == "a");
  REQUIRE(text(job_b.get("address", 1s)) == "b");
  job_a.add("counter", 2);
  for (int i = 0; i < 2500; ++i) job_a.set("many/" + std::to_string(i), bytes("x"));  // several SCAN pages

  REQUIRE(raw_integer(server, {"EXISTS", "job-a/address"}) == 1);  // keys are "<namespace>/<key>"
  REQUIRE(job_glob.remove_namespace() == 1);
  REQUIRE(job_a.remove_namespace() == 2502);
  REQUIRE(job_a.remove_namespace() == 0);
  REQUIRE_THROWS_AS(job_a.get("address", 20ms), chorus::TimeoutError);
  REQUIRE(text(job_b.get("address", 1s)) == "b");
  REQUIRE(raw_integer(server, {"DBSIZE"}) == 1);
  REQUIRE_THROWS_AS(chorus::RedisStore(options_for(server, "")), chorus::InvalidArgument);
}

TEST_CASE("RedisStore gives every key it writes a TTL, so finished jobs leave nothing behind", "[redis]") {
  RedisServer server;
  SECTION("the default TTL is one hour, on set and on add") {
    chorus::RedisStore store(options_for(server));
    store.set("set-key", bytes("v"));
    store.add("added-key", 1);
    for (const char* key : {"test-job/set-key", "test-job/added-key"}) {
      INFO(key);
      long long ttl = raw_integer(server, {"PTTL", key});
      REQUIRE(ttl > 3590 * 1000);
      REQUIRE(ttl <= 3600 * 1000);
    }
  }
  SECTION("a short TTL expires the keys") {
    auto options = options_for(server);
    options.key_ttl = 200ms;
    chorus::RedisStore store(options);
    store.set("short", bytes("v"));
    store.add("short-counter", 5);
    REQUIRE(text(store.get("short", 1s)) == "v");
    std::this_thread::sleep_for(400ms);
    REQUIRE_THROWS_AS(store.get("short", 0ms), chorus::TimeoutError);
    REQUIRE_THROWS_AS(store.get("short-counter", 0ms), chorus::TimeoutError);
    REQUIRE(raw_integer(server, {"DBSIZE"}) == 0);
  }
  SECTION("a TTL of 0 keeps keys until removed") {
    auto options = options_for(server);
    options.key_ttl = 0ms;
    chorus::RedisStore store(options);
    store.set("kept", bytes("v"));
    REQUIRE(raw_integer(server, {"PTTL", "test-job/kept"}) == -1);  // exists, no expiry
    REQUIRE(store.remove_namespace() == 1);
  }
}

TEST_CASE("RedisStore URLs select the database and log in with the password", "[redis]") {
  SECTION("database") {
    RedisServer server;
    auto opened = chorus::open_store(server.url("/3"), 0, "db-job", 2s);
    opened.store->set("key", bytes("in db 3"));
    REQUIRE(raw_integer(server, {"EXISTS", "chorus/db-job/key"}, 3) == 1);
    REQUIRE(raw_integer(server, {"EXISTS", "chorus/db-job/key"}, 0) == 0);
  }
  SECTION("password") {
    RedisServer server({"--requirepass", "s3cret/:@"});
    auto opened = chorus::open_store("redis://:s3cret/:@@127.0.0.1:" + std::to_string(server.port()), 0, "job", 2s);
    opened.store->set("key", bytes("v"));
    REQUIRE(text(opened.store->get("key", 1s)) == "v");
    std::string message = chorus::test::thrown_message<chorus::IoError>([&] {
      chorus::open_store("redis://:wrong@127.0.0.1:" + std::to_string(server.port()), 0, "job", 2s);
    });
    REQUIRE_THAT(message, Catch::Contains("AUTH refused") && Catch::Contains(std::to_string(server.port())));
    // Without a password the first command is refused by the server.
    chorus::RedisStore no_password(options_for(server));
    REQUIRE_THROWS_WITH(no_password.set("k", bytes("v")), Catch::Contains("NOAUTH"));
  }
}

TEST_CASE("Store URLs parse every form and reject malformed ones", "[redis][url]") {
  auto redis = chorus::parse_store_url("redis://10.1.2.3:7000/5");
  REQUIRE(redis.scheme == "redis");
  REQUIRE(redis.host == "10.1.2.3");
  REQUIRE(redis.port == 7000);
  REQUIRE(redis.database == 5);
  auto defaults = chorus::parse_store_url("redis://cache.example");
  REQUIRE(defaults.port == 6379);
  REQUIRE(defaults.database == 0);
  auto v6 = chorus::parse_store_url("redis://:pw@[::1]:6380/");
  REQUIRE(v6.host == "::1");
  REQUIRE(v6.port == 6380);
  REQUIRE(v6.password == "pw");
  auto tcp = chorus::parse_store_url("tcp://[fe80::1]:29500");
  REQUIRE(tcp.host == "fe80::1");
  REQUIRE(tcp.port == 29500);
  REQUIRE(chorus::parse_store_url("file:///shared/dir").path == "/shared/dir");

  for (const char* bad : {"redis://host:0", "redis://host:65536", "redis://host:port", "redis://:6379",
                          "redis://host/x", "redis://host/-1", "redis://user:pw@host", "rediss://host",
                          "tcp://host", "tcp://host:", "localhost:6379", "file://", "redis://[::1"}) {
    INFO(bad);
    REQUIRE_THROWS_WITH(chorus::parse_store_url(bad), Catch::Contains(bad));
  }
  // Redis outlives the job: a job id is required so a rerun never reads stale keys.
  REQUIRE_THROWS_WITH(chorus::open_store("redis://127.0.0.1:1", 2, "", 1s),
                      Catch::Contains("rank 2") && Catch::Contains("CHORUS_JOB_ID"));
}

TEST_CASE("RedisStore errors name host:port when Redis is down, dies, hangs or restarts", "[redis]") {
  SECTION("nothing listens: IoError at once") {
    uint16_t port = chorus::test::free_loopback_port();
    chorus::RedisStoreOptions options;
    options.port = port;
    options.key_namespace = "job";
    chorus::test::Stopwatch watch;
    std::string message = chorus::test::thrown_message<chorus::IoError>([&] { chorus::RedisStore store(options); });
    REQUIRE_THAT(message, Catch::Contains("127.0.0.1:" + std::to_string(port)) &&
                              Catch::Contains("Connection refused"));
    REQUIRE(watch.elapsed() < 2s);
  }
  SECTION("SIGKILLed during a blocking get: IoError long before the get's timeout") {
    RedisServer server;
    chorus::RedisStore store(options_for(server));
    std::thread killer([&] {
      std::this_thread::sleep_for(200ms);
      server.kill_now();
    });
    chorus::test::Stopwatch watch;
    std::string message =
        chorus::test::thrown_message<chorus::IoError>([&] { store.get("never-set", 20s); });
    killer.join();
    // The one reconnect either finds the port closed, or (the kernel still
    // tearing the dead server's sockets down) connects and is reset at once.
    REQUIRE_THAT(message, Catch::Contains("127.0.0.1:" + std::to_string(server.port())) &&
                              ((Catch::Contains("reconnecting failed") && Catch::Contains("Connection refused")) ||
                               Catch::Contains("again, after reconnecting")));
    REQUIRE(watch.elapsed() < 3s);
    // Later calls keep failing clearly instead of hanging.
    REQUIRE_THROWS_AS(store.add("x", 1), chorus::IoError);
  }
  SECTION("hung (SIGSTOP): TimeoutError after the reply timeout, then it works again") {
    RedisServer server;
    auto options = options_for(server);
    options.reply_timeout = 300ms;
    chorus::RedisStore store(options);
    store.set("before", bytes("1"));
    server.pause();
    chorus::test::Stopwatch watch;
    REQUIRE_THROWS_WITH(store.set("during", bytes("2")), Catch::Contains("no reply") && Catch::Contains("300 ms"));
    REQUIRE(watch.elapsed() < 2s);
    server.resume();
    REQUIRE(text(store.get("before", 2s)) == "1");
  }
  SECTION("restarted on the same port: the next call reconnects, add included") {
    RedisServer server;
    chorus::RedisStore store(options_for(server));
    REQUIRE(store.add("count", 1) == 1);
    server.restart();  // empty again: no persistence
    REQUIRE(store.add("count", 1) == 1);
    store.set("after", bytes("restart"));
    REQUIRE(text(store.get("after", 1s)) == "restart");
  }
}

TEST_CASE("Four processes connect a Context through Redis and allreduce", "[redis][process]") {
  RedisServer server;
  const int size = 4;
  const std::string url = server.url();
  std::vector<pid_t> children;
  for (int rank = 0; rank < size; ++rank) {
    children.push_back(chorus::test::fork_child([&, rank] {
      auto opened = chorus::open_store(url, rank, "four-ranks", 20s);
      chorus::StoreBootstrap bootstrap(opened.store, rank, size, 20s);
      chorus::ConnectOptions options;
      options.hostname = "127.0.0.1";
      options.timeout = 20s;
      auto context = chorus::connect(bootstrap, options);
      std::vector<float> data(1000);
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(rank * 1000 + static_cast<int>(i) % 97);
      chorus::allreduce(*context, std::span(data), chorus::ReduceOp::sum);
      for (size_t i = 0; i < data.size(); ++i) {
        float expected = static_cast<float>(6000 + 4 * (static_cast<int>(i) % 97));
        chorus::test::child_check(data[i] == expected, "allreduce element " + std::to_string(i));
      }
      bootstrap.barrier();
    }));
  }
  for (pid_t child : children) REQUIRE(chorus::test::wait_child(child) == 0);
  // Only the last barrier's keys and the join records (a claim and an
  // identity per rank, rank 0's job size) remain, each with a TTL.
  redisContext* raw = server.raw_connection();
  auto* keys = static_cast<redisReply*>(redisCommand(raw, "KEYS *"));
  REQUIRE(keys->type == REDIS_REPLY_ARRAY);
  REQUIRE(keys->elements > 0);
  REQUIRE(keys->elements <= static_cast<size_t>(size + 2 + 2 * size + 1));
  for (size_t i = 0; i < keys->elements; ++i) {
    std::string key(keys->element[i]->str, keys->element[i]->len);
    INFO(key);
    REQUIRE(key.rfind("chorus/four-ranks/", 0) == 0);
    REQUIRE(raw_integer(server, {"PTTL", key}) > 0);
  }
  freeReplyObject(keys);
  redisFree(raw);
}

TEST_CASE("Redis SIGKILLed mid-rendezvous: every rank fails clearly within the timeout", "[redis][process]") {
  RedisServer server;
  const int size = 4;
  const std::string url = server.url();
  const std::string where = "127.0.0.1:" + std::to_string(server.port());
  std::vector<pid_t> children;
  for (int rank = 0; rank < size; ++rank) {
    children.push_back(chorus::test::fork_child([&, rank] {
      // Rank 3 is late: Redis is gone before it starts, while the others wait for it.
      if (rank == size - 1) std::this_thread::sleep_for(600ms);
      try {
        auto opened = chorus::open_store(url, rank, "killed", 10s);
        chorus::StoreBootstrap bootstrap(opened.store, rank, size, 10s);
        bootstrap.allgather(chorus::test::rank_blob(rank, 0));
      } catch (const chorus::IoError& error) {
        std::string message = error.what();
        chorus::test::child_check(message.find(where) != std::string::npos, "the error names Redis: " + message);
        std::fprintf(stderr, "rank %d: %s\n", rank, message.c_str());
        return;
      }
      chorus::test::child_check(false, "rank " + std::to_string(rank) + " completed a rendezvous without Redis");
    }));
  }
  std::this_thread::sleep_for(300ms);
  chorus::test::Stopwatch watch;
  server.kill_now();
  for (pid_t child : children) REQUIRE(chorus::test::wait_child(child, 9s) == 0);
  REQUIRE(watch.elapsed() < 5s);
}
