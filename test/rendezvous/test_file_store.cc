// FileStore specifics: keys never escape the directory, errors name the path,
// several store objects and processes share one directory, add is atomic
// across processes.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "rendezvous/file_store.h"
#include "rendezvous/store.h"
#include "rendezvous_test_helpers.h"

using namespace std::chrono_literals;
using chorus::test::bytes;
using chorus::test::text;

TEST_CASE("FileStore keeps every key inside its directory as one plain file", "[file_store]") {
  chorus::test::TemporaryDirectory root;
  auto directory = root.path() / "store";
  chorus::FileStore store(directory);
  store.set("../escape", bytes("1"));
  store.set("/etc/absolute", bytes("2"));
  store.set("a/b/c", bytes("3"));
  store.set(std::string("nul\0byte", 8), bytes("4"));
  store.set(".hidden", bytes("5"));
  REQUIRE(store.add("counter", 1) == 1);
  REQUIRE_FALSE(std::filesystem::exists(root.path() / "escape"));
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    REQUIRE(entry.is_regular_file());
    std::string name = entry.path().filename().string();
    bool expected = name.rfind("k_", 0) == 0 || name == ".lock";
    REQUIRE(expected);
    REQUIRE(name.find('/') == std::string::npos);
    ++files;
  }
  REQUIRE(files == 7);  // six keys and the add lock; no temporaries left behind
  REQUIRE(text(store.get("../escape", 1s)) == "1");
  REQUIRE(text(store.get(std::string("nul\0byte", 8), 1s)) == "4");
}

TEST_CASE("FileStore stores on one object are seen by another on the same directory", "[file_store]") {
  chorus::test::TemporaryDirectory root;
  chorus::FileStore writer(root.path());
  chorus::FileStore reader(root.path());
  std::thread late([&] {
    std::this_thread::sleep_for(30ms);
    writer.set("shared", bytes("hello"));
  });
  REQUIRE(text(reader.get("shared", 5s)) == "hello");
  late.join();
  REQUIRE(reader.remove("shared"));
  REQUIRE_FALSE(writer.remove("shared"));
}

TEST_CASE("FileStore errors name the path and the reason", "[file_store]") {
  chorus::test::TemporaryDirectory root;
  auto plain_file = root.path() / "plain";
  std::ofstream(plain_file) << "not a directory";

  SECTION("the directory is a file") {
    std::string message = chorus::test::thrown_message<chorus::IoError>([&] { chorus::FileStore store(plain_file); });
    REQUIRE_THAT(message, Catch::Contains(plain_file.string()) && Catch::Contains("not a directory", Catch::CaseSensitive::No));
  }
  SECTION("the directory cannot be created under a file") {
    std::string message =
        chorus::test::thrown_message<chorus::IoError>([&] { chorus::FileStore store(plain_file / "below"); });
    REQUIRE_THAT(message, Catch::Contains(plain_file.string()));
  }
  SECTION("the directory is not writable") {
    auto locked = root.path() / "locked";
    chorus::FileStore(locked).set("readable", bytes("yes"));
    ::chmod(root.path().c_str(), 0755);
    ::chmod(locked.c_str(), 0555);
    // Root ignores permissions, so the check runs in a child as an
    // unprivileged user, who must own the store (a store of another user's
    // is refused: test_other_users).
    if (::geteuid() == 0) {
      for (const auto& entry : std::filesystem::directory_iterator(locked))
        REQUIRE(::chown(entry.path().c_str(), 65534, 65534) == 0);
      REQUIRE(::chown(locked.c_str(), 65534, 65534) == 0);
    }
    pid_t child = chorus::test::fork_child([&] {
      if (::geteuid() == 0) {
        chorus::test::child_check(::setgid(65534) == 0 && ::setuid(65534) == 0, "drop privileges to nobody");
      }
      chorus::FileStore store(locked);
      chorus::test::child_check(chorus::test::text(store.get("readable", 1s)) == "yes", "read in a read-only store");
      std::string message = chorus::test::thrown_message<chorus::IoError>([&] { store.set("k", bytes("v")); });
      chorus::test::child_check(message.find(locked.string()) != std::string::npos, "path in: " + message);
      chorus::test::child_check(message.find("Permission denied") != std::string::npos, "errno text in: " + message);
    });
    REQUIRE(chorus::test::wait_child(child) == 0);
  }
  SECTION("a key too long for a file name") {
    chorus::FileStore store(root.path() / "store");
    REQUIRE_THROWS_AS(store.set(std::string(300, 'k'), bytes("v")), chorus::InvalidArgument);
    REQUIRE_THROWS_AS(store.get(std::string(300, 'k'), 10ms), chorus::InvalidArgument);
  }
}

TEST_CASE("FileStore add is atomic across processes", "[file_store]") {
  chorus::test::TemporaryDirectory root;
  std::vector<pid_t> children;
  for (int p = 0; p < 4; ++p) {
    children.push_back(chorus::test::fork_child([&] {
      chorus::FileStore store(root.path());
      for (int i = 0; i < 100; ++i) store.add("counter", p + 1);
    }));
  }
  for (pid_t child : children) REQUIRE(chorus::test::wait_child(child) == 0);
  chorus::FileStore store(root.path());
  REQUIRE(store.add("counter", 0) == 100 * (1 + 2 + 3 + 4));
  REQUIRE(text(store.get("counter", 1s)) == "1000");
}

TEST_CASE("FileStore readers in other processes never see a partial value", "[file_store]") {
  chorus::test::TemporaryDirectory root;
  std::vector<std::byte> a(1 << 20, std::byte{'a'});
  std::vector<std::byte> b(1 << 20, std::byte{'b'});
  chorus::FileStore store(root.path());
  store.set("big", a);
  pid_t writer = chorus::test::fork_child([&] {
    chorus::FileStore child_store(root.path());
    for (int i = 0; i < 50; ++i) child_store.set("big", i % 2 ? a : b);
  });
  for (int i = 0; i < 50; ++i) {
    auto value = store.get("big", 1s);
    REQUIRE((value == a || value == b));
  }
  REQUIRE(chorus::test::wait_child(writer) == 0);
}
