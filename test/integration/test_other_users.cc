// A job started by hand with no secret, on one host, against a process of
// another user (docs/security.md, "Without a secret"): the kernel's word on
// who owns the other end of a connection (base/socket_owner.h) keeps that
// process out of the store and off every rank's listener, and keeps the
// job from using its store. The stranger is a child of this test that drops
// to the `nobody` user (uid 65534) with setresuid; the tests need root for
// that and say so when they cannot run.
#include <catch2/catch.hpp>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/job_secret.h"
#include "base/socket_owner.h"
#include "rendezvous/file_store.h"
#include "rendezvous/tcp_store.h"
#include "rendezvous/tcp_store_protocol.h"
#include "test/integration/hostile_peer.h"
#include "test/integration/rank_job.h"
#include "transport/tcp/handshake.h"

using namespace chorus;
using namespace chorus::integration;
using namespace std::chrono_literals;

namespace {

constexpr uid_t kNobody = 65534;

bool can_switch_users() { return ::geteuid() == 0; }

// Runs `body` in a child process as uid and gid 65534 and returns its exit
// code (or 100 + the signal that killed it). No Catch2 in the child: it
// reports through its exit code and whatever it writes to `report_fd`.
int as_nobody(const std::function<int()>& body) {
  std::cout.flush();
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kNobody, kNobody, kNobody) != 0 ||
        ::setresuid(kNobody, kNobody, kNobody) != 0)
      ::_exit(90);
    int code = 91;
    try {
      code = body();
    } catch (...) {
      code = 92;
    }
    ::_exit(code);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

int connect_loopback(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int listen_loopback(uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    return -1;
  port = ntohs(address.sin_port);
  return fd;
}

bool read_exactly(int fd, void* data, size_t bytes, std::chrono::milliseconds limit) {
  size_t done = 0;
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (done < bytes) {
    pollfd entry{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now());
    if (left.count() <= 0 || ::poll(&entry, 1, static_cast<int>(left.count())) <= 0) return false;
    const ssize_t n = ::recv(fd, static_cast<char*>(data) + done, bytes - done, 0);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Whether the other end closes `fd` (a refusal) within `limit`, rather than
// answering or leaving it open.
bool closed_by_peer(int fd, std::chrono::milliseconds limit) {
  pollfd entry{fd, POLLIN, 0};
  if (::poll(&entry, 1, static_cast<int>(limit.count())) <= 0) return false;
  char byte;
  return ::recv(fd, &byte, 1, 0) == 0;
}

// The stranger's attempt on a TcpStore: its greeting, then a proof made
// with no secret, which any process can make. 0 when the store closed the
// connection instead of answering, 1 when it answered, 2 on anything else.
int try_store(uint16_t port) {
  const int fd = connect_loopback(port);
  if (fd < 0) return 2;
  std::vector<std::byte> greeting(tcp_store::kServerChallengeBytes);
  Challenge challenge{};
  if (!read_exactly(fd, greeting.data(), greeting.size(), 5s) ||
      !tcp_store::decode_server_challenge(greeting, challenge).empty()) {
    ::close(fd);
    return 2;
  }
  const std::vector<std::byte> proof = tcp_store::encode_client_proof(challenge, fresh_challenge(), JobSecret{});
  if (::send(fd, proof.data(), proof.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(proof.size())) {
    ::close(fd);
    return 2;
  }
  std::vector<std::byte> answer(tcp_store::kServerProofBytes);
  const bool answered = read_exactly(fd, answer.data(), answer.size(), 5s);
  ::close(fd);
  return answered ? 1 : 0;
}

// The stranger's attempt on a rank's TCP listener: a hello claiming the
// job's last rank with a proof made with no secret. 0 when the listener
// closed the connection, 1 when it answered, 2 on anything else.
int try_listener(const ListeningEndpoint& endpoint, int job_size) {
  const int fd = ::socket(endpoint.address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&endpoint.address), endpoint.length) != 0) {
    ::close(fd);
    return 2;
  }
  transport::tcp::ChallengeMessage challenge_bytes{};
  Challenge challenge{};
  if (!read_exactly(fd, challenge_bytes.data(), challenge_bytes.size(), 5s) ||
      !transport::tcp::decode_challenge(challenge_bytes, challenge).empty()) {
    ::close(fd);
    return 2;
  }
  const transport::tcp::Hello hello{0, job_size - 1, 0, 0, 1, fresh_challenge()};
  const transport::tcp::HelloMessage bytes = transport::tcp::encode_hello(hello, challenge, JobSecret{});
  if (::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) {
    ::close(fd);
    return 2;
  }
  const int outcome = closed_by_peer(fd, 5s) ? 0 : 1;
  ::close(fd);
  return outcome;
}

uint16_t store_port(const RankJob& job) {
  const std::string& url = job.store_url();
  return static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1)));
}

size_t count(const std::string& text, const std::string& what) {
  size_t found = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++found;
  return found;
}

}  // namespace

TEST_CASE("the kernel names the user at the other end of a loopback connection, either way", "[other_users]") {
  if (!can_switch_users()) {
    WARN("skipped: switching to the nobody user needs root");
    return;
  }
  uint16_t port = 0;
  const int listener = listen_loopback(port);
  REQUIRE(listener >= 0);

  SECTION("a dialer of another user is named and refused; one of ours is admitted") {
    std::thread stranger([&] {
      as_nobody([&] {
        const int fd = connect_loopback(port);
        char byte;
        [[maybe_unused]] ssize_t n = ::recv(fd, &byte, 1, 0);  // held open until the test closes its end
        return 0;
      });
    });
    const int accepted = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    REQUIRE(accepted >= 0);
    const SocketOwner owner = tcp_peer_owner(accepted);
    CHECK(owner.where == SocketOwner::Where::this_host);
    CHECK(owner.uid == kNobody);
    const std::string why = same_user_refusal(accepted, "the dialer");
    INFO(why);
    CHECK(why.find("the dialer is a process of uid 65534") != std::string::npos);
    CHECK(why.find("CHORUS_SECRET") != std::string::npos);
    ::close(accepted);
    stranger.join();

    const int ours = connect_loopback(port);
    const int accepted_ours = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    CHECK(same_user_refusal(accepted_ours, "the dialer") == "");
    CHECK(same_user_refusal(ours, "the listener") == "");
    ::close(accepted_ours);
    ::close(ours);
  }

  SECTION("a dialer that closed before it was checked is refused, not taken for anyone") {
    const int ours = connect_loopback(port);
    const int accepted = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ::close(ours);
    std::this_thread::sleep_for(20ms);
    const std::string why = same_user_refusal(accepted, "the dialer");
    INFO(why);
    CHECK(why.find("closed its socket") != std::string::npos);
    ::close(accepted);
  }

  SECTION("a listener of another user is named before it is used") {
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    std::thread stranger([&] {
      as_nobody([&] {
        uint16_t its_port = 0;
        const int its_listener = listen_loopback(its_port);
        [[maybe_unused]] ssize_t n = ::write(pipe_fds[1], &its_port, sizeof(its_port));
        const int accepted = ::accept(its_listener, nullptr, nullptr);
        char byte;
        n = ::recv(accepted, &byte, 1, 0);
        return 0;
      });
    });
    uint16_t its_port = 0;
    REQUIRE(::read(pipe_fds[0], &its_port, sizeof(its_port)) == sizeof(its_port));
    const int fd = connect_loopback(its_port);
    REQUIRE(fd >= 0);
    const std::string why = same_user_refusal(fd, "the store server");
    INFO(why);
    CHECK(why.find("the store server is a process of uid 65534") != std::string::npos);
    ::close(fd);
    stranger.join();
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
  }
  ::close(listener);
}

TEST_CASE("a job with no secret does not use a store of another user squatting its port", "[other_users]") {
  if (!can_switch_users()) {
    WARN("skipped: switching to the nobody user needs root");
    return;
  }
  int ready[2], done[2];
  REQUIRE(::pipe(ready) == 0);
  REQUIRE(::pipe(done) == 0);
  std::thread squatter([&] {
    as_nobody([&] {
      TcpStoreServer server("127.0.0.1", 0);
      const uint16_t port = server.port();
      [[maybe_unused]] ssize_t n = ::write(ready[1], &port, sizeof(port));
      ::close(done[1]);  // this process's copy: the read below ends when the test closes its own
      char byte;
      n = ::read(done[0], &byte, 1);
      return 0;
    });
  });
  uint16_t port = 0;
  REQUIRE(::read(ready[0], &port, sizeof(port)) == sizeof(port));
  const auto started = std::chrono::steady_clock::now();
  std::string error;
  try {
    TcpStore store("127.0.0.1", port, 10s, JobSecret{});
    const std::vector<std::byte> value{std::byte{1}};
    store.set("barrier/99", value);
  } catch (const IoError& failure) {
    error = failure.what();
  }
  const auto took = std::chrono::steady_clock::now() - started;
  ::close(done[1]);
  squatter.join();
  for (int fd : {ready[0], ready[1], done[0]}) ::close(fd);
  INFO(error);
  std::string expected = "will not use 127.0.0.1:";
  expected += std::to_string(port);
  CHECK(error.find(expected) != std::string::npos);
  CHECK(error.find("uid 65534") != std::string::npos);
  CHECK(took < 2s);  // refused at once, not after the 10 s timeout
}

TEST_CASE("a stranger of another user is refused by the store and every rank listener; the job runs on",
          "[other_users][processes]") {
  if (!can_switch_users()) {
    WARN("skipped: switching to the nobody user needs root");
    return;
  }
  RankJob job({3, StoreKind::tcp,
               {"hostile", "--stop-file", "{tmp}/stop", "--timeout-ms", "10000", "--max-seconds", "90"}});
  REQUIRE(job.wait_until(
      [&] {
        for (int rank = 0; rank < job.size(); ++rank)
          if (!job.printed(rank, "READY")) return false;
        return true;
      },
      60s));
  const uint16_t port = store_port(job);
  std::string store_suffix = ":";
  store_suffix += std::to_string(port);
  std::vector<ListeningEndpoint> listeners;
  for (int rank = 0; rank < job.size(); ++rank)
    for (const ListeningEndpoint& endpoint : listening_endpoints(job.pid(rank)))
      if (endpoint.type == SOCK_STREAM && !endpoint.text.ends_with(store_suffix))
        listeners.push_back(endpoint);
  INFO(job.transcript());
  REQUIRE(listeners.size() >= static_cast<size_t>(job.size()));

  // Each attempt in a child of its own, so a refusal shows as exit code 0.
  CHECK(as_nobody([&] { return try_store(port); }) == 0);
  for (const ListeningEndpoint& endpoint : listeners) {
    INFO(endpoint.text);
    CHECK(as_nobody([&] { return try_listener(endpoint, job.size()); }) == 0);
  }
  // The same store attempt as the job's own user gets an answer: the user is what was refused.
  CHECK(try_store(port) == 1);

  std::ofstream(job.temp_dir() + "/stop").put('\n');
  REQUIRE(job.wait_for_all_exits(60s));
  for (int rank = 0; rank < job.size(); ++rank) {
    INFO("rank " << rank);
    CHECK(job.exit_status(rank) == 0);
    const auto result = job.result(rank);
    REQUIRE(result.has_value());
    CHECK(result->at("status") == "ok");
  }
  const std::string transcript = job.transcript();
  CHECK(count(transcript, "the client is a process of uid 65534") == 1);
  // Rejections are logged once per source per 10 s (base/rejection_log.h): at least one line names the user.
  CHECK(count(transcript, "the dialer is a process of uid 65534") >= 1);
}

TEST_CASE("a file store refuses a directory another user made or every user may write", "[other_users]") {
  char made[] = "/tmp/chorus-other-users.XXXXXX";
  REQUIRE(::mkdtemp(made));
  const std::string base = made;
  // Ours, mode 0700 by mkdtemp: used, and a directory it makes is 0700.
  CHECK_NOTHROW(FileStore(base + "/fresh"));
  struct stat info {};
  REQUIRE(::stat((base + "/fresh").c_str(), &info) == 0);
  CHECK((info.st_mode & 07777) == 0700);
  // Ours but writable by everyone.
  REQUIRE(::mkdir((base + "/open").c_str(), 0700) == 0);
  REQUIRE(::chmod((base + "/open").c_str(), 0777) == 0);
  std::string error;
  try {
    FileStore store(base + "/open");
  } catch (const IoError& failure) {
    error = failure.what();
  }
  CHECK(error.find("may be written by every user (mode 0777)") != std::string::npos);
  if (can_switch_users()) {
    // Another user's, made before the job (a name in /tmp taken first).
    REQUIRE(::chmod(made, 0755) == 0);
    const std::string squatted = base + "/squatted";
    REQUIRE(::mkdir(squatted.c_str(), 0755) == 0);
    REQUIRE(::chown(squatted.c_str(), kNobody, kNobody) == 0);
    error.clear();
    try {
      FileStore store(squatted);
    } catch (const IoError& failure) {
      error = failure.what();
    }
    INFO(error);
    CHECK(error.find("belongs to uid 65534, not to uid 0") != std::string::npos);
  } else {
    WARN("another user's directory: skipped, making one needs root");
  }
  std::filesystem::remove_all(base);
}
