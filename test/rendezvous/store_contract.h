// The Store contract every implementation must meet: set/get/overwrite,
// get_many order, wait, add, remove, fast timeouts naming the missing keys,
// blocking calls woken by another thread, empty and binary values. Shared by
// the tests of the built-in stores and of RedisStore (its own test binary).
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <thread>

#include "base/error.h"
#include "rendezvous/store.h"
#include "rendezvous_test_helpers.h"

namespace chorus::test {

using namespace std::chrono_literals;

inline void check_store_interface(chorus::Store& store) {
  SECTION("set then get, and overwrite") {
    store.set("alpha", bytes("one"));
    REQUIRE(text(store.get("alpha", 1s)) == "one");
    store.set("alpha", bytes("second value"));
    REQUIRE(text(store.get("alpha", 1s)) == "second value");
  }
  SECTION("empty values and binary values with NUL bytes") {
    store.set("empty", {});
    REQUIRE(store.get("empty", 1s).empty());
    std::vector<std::byte> binary(256 * 3);
    for (size_t i = 0; i < binary.size(); ++i) binary[i] = static_cast<std::byte>(i % 256);
    store.set("binary", binary);
    REQUIRE(store.get("binary", 1s) == binary);
    std::string nul_key("nul\0key", 7);
    store.set(nul_key, bytes(std::string("a\0b", 3)));
    REQUIRE(text(store.get(nul_key, 1s)) == std::string("a\0b", 3));
    REQUIRE_THROWS_AS(store.get("nul", 50ms), chorus::TimeoutError);
  }
  SECTION("keys that look like paths stay distinct") {
    std::vector<std::string> keys{"a/b", "a%2Fb", "../up", "..", ".", "a b", "", "x/../y", "UPPER", "upper"};
    for (size_t i = 0; i < keys.size(); ++i) store.set(keys[i], bytes(std::to_string(i)));
    for (size_t i = 0; i < keys.size(); ++i) REQUIRE(text(store.get(keys[i], 1s)) == std::to_string(i));
  }
  SECTION("get_many returns values in the order of the keys") {
    std::vector<std::string> keys;
    for (int i = 0; i < 50; ++i) {
      keys.push_back("many/" + std::to_string(49 - i));
      store.set(keys.back(), bytes("value " + std::to_string(49 - i)));
    }
    auto values = store.get_many(keys, 1s);
    REQUIRE(values.size() == keys.size());
    for (int i = 0; i < 50; ++i) REQUIRE(text(values[i]) == "value " + std::to_string(49 - i));
    REQUIRE(store.get_many({}, 1s).empty());
  }
  SECTION("get and get_many time out fast, naming the missing key") {
    store.set("present", bytes("x"));
    chorus::test::Stopwatch watch;
    REQUIRE_THROWS_WITH(store.get("absent", 100ms),
                        Catch::Contains("absent'") && Catch::Contains("100 ms"));
    REQUIRE(watch.elapsed() >= 100ms);
    REQUIRE(watch.elapsed() < 1000ms);
    REQUIRE_THROWS_AS(store.get_many({"present", "absent"}, 100ms), chorus::TimeoutError);
  }
  SECTION("wait returns for present keys and names only the missing ones") {
    store.set("w1", bytes("1"));
    store.set("w2", bytes("2"));
    store.wait({"w1", "w2"}, 1s);
    store.wait({}, 1s);
    chorus::test::Stopwatch watch;
    try {
      store.wait({"w1", "w-missing", "w2"}, 100ms);
      FAIL("wait did not time out");
    } catch (const chorus::TimeoutError& error) {
      std::string message = error.what();
      REQUIRE(message.find("w-missing'") != std::string::npos);
      REQUIRE(message.find("w1'") == std::string::npos);
      REQUIRE(message.find("w2'") == std::string::npos);
    }
    REQUIRE(watch.elapsed() >= 100ms);
    REQUIRE(watch.elapsed() < 1000ms);
  }
  SECTION("a timeout of 0 looks once") {
    store.set("here", bytes("1"));
    store.wait({"here"}, 0ms);
    REQUIRE(text(store.get("here", 0ms)) == "1");
    REQUIRE_THROWS_AS(store.wait({"not-here"}, 0ms), chorus::TimeoutError);
  }
  SECTION("get and wait block until another thread sets the key") {
    std::thread setter([&] {
      std::this_thread::sleep_for(50ms);
      store.set("late", bytes("arrived"));
      std::this_thread::sleep_for(50ms);
      store.set("later", bytes("also"));
    });
    chorus::test::Stopwatch watch;
    REQUIRE(text(store.get("late", 5s)) == "arrived");
    REQUIRE(watch.elapsed() >= 40ms);
    store.wait({"late", "later"}, 5s);
    REQUIRE(watch.elapsed() >= 90ms);
    setter.join();
    REQUIRE(text(store.get("later", 1s)) == "also");
  }
  SECTION("add counts from zero and get reads the counter as decimal text") {
    REQUIRE(store.add("counter", 5) == 5);
    REQUIRE(store.add("counter", -7) == -2);
    REQUIRE(store.add("counter", 0) == -2);
    REQUIRE(text(store.get("counter", 1s)) == "-2");
    store.set("counter2", bytes("40"));
    REQUIRE(store.add("counter2", 2) == 42);
    store.set("not-a-number", bytes("forty"));
    REQUIRE_THROWS_AS(store.add("not-a-number", 1), chorus::InvalidArgument);
    REQUIRE(store.add("big", INT64_MAX) == INT64_MAX);
    REQUIRE_THROWS_AS(store.add("big", 1), chorus::InvalidArgument);
  }
  SECTION("add wakes a waiter") {
    std::thread adder([&] {
      std::this_thread::sleep_for(30ms);
      store.add("woken-by-add", 3);
    });
    REQUIRE(text(store.get("woken-by-add", 5s)) == "3");
    adder.join();
  }
  SECTION("add is atomic under concurrent threads") {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&] {
        for (int i = 0; i < 50; ++i) store.add("shared-counter", 1);
      });
    for (auto& thread : threads) thread.join();
    REQUIRE(store.add("shared-counter", 0) == 200);
  }
  SECTION("remove reports whether the key existed") {
    store.set("doomed", bytes("x"));
    REQUIRE(store.remove("doomed"));
    REQUIRE_FALSE(store.remove("doomed"));
    REQUIRE_THROWS_AS(store.get("doomed", 30ms), chorus::TimeoutError);
    store.set("doomed", bytes("back"));
    REQUIRE(text(store.get("doomed", 1s)) == "back");
  }
}


}  // namespace chorus::test
