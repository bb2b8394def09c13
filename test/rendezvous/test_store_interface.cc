// Every built-in Store implementation against the same contract (store_contract.h).
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "base/error.h"
#include "rendezvous/file_store.h"
#include "rendezvous/hash_store.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/store.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous_test_helpers.h"
#include "store_contract.h"

using namespace std::chrono_literals;
using chorus::test::bytes;
using chorus::test::text;

using chorus::test::check_store_interface;

TEST_CASE("HashStore implements the Store interface", "[store]") {
  chorus::HashStore store;
  check_store_interface(store);
}

TEST_CASE("FileStore implements the Store interface", "[store]") {
  chorus::test::TemporaryDirectory directory;
  chorus::FileStore store(directory.path() / "nested" / "store");
  check_store_interface(store);
}

TEST_CASE("TcpStore implements the Store interface", "[store]") {
  chorus::TcpStoreServer server("127.0.0.1", 0);
  chorus::TcpStore store("127.0.0.1", server.port(), 2s);
  check_store_interface(store);
}

TEST_CASE("TcpStore over a dual-stack server on every address", "[store]") {
  chorus::TcpStoreServer server;
  chorus::TcpStore store("localhost", server.port(), 2s);
  check_store_interface(store);
}

TEST_CASE("PrefixStore implements the Store interface and isolates prefixes", "[store]") {
  auto inner = std::make_shared<chorus::HashStore>();
  chorus::PrefixStore store("job-1", inner);
  check_store_interface(store);
  chorus::PrefixStore other("job-2", inner);
  store.set("shared-name", bytes("one"));
  REQUIRE_THROWS_AS(other.get("shared-name", 20ms), chorus::TimeoutError);
  REQUIRE(text(inner->get("job-1/shared-name", 1s)) == "one");
  REQUIRE_THROWS_AS(chorus::PrefixStore("p", nullptr), chorus::InvalidArgument);
}

TEST_CASE("PrefixStore over TcpStore keeps get_many batched", "[store]") {
  chorus::TcpStoreServer server("127.0.0.1", 0);
  auto inner = std::make_shared<chorus::TcpStore>("127.0.0.1", server.port(), 2s);
  chorus::PrefixStore store("job", inner);
  check_store_interface(store);
}
