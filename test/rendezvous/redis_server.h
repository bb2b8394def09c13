// A real redis-server for tests: started on a free loopback port with no
// persistence (--save "" --appendonly no), stopped (or SIGKILLed, or paused)
// on request. The binary is CHORUS_TEST_REDIS_SERVER (set by meson), else
// redis-server on PATH; a missing binary fails the test, it never skips.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace chorus::test {

// A port nobody listens on right now (bound to port 0, then released).
inline uint16_t free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("cannot find a free loopback port");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

class RedisServer {
 public:
  // extra: more redis-server options, e.g. {"--requirepass", "secret"}.
  explicit RedisServer(std::vector<std::string> extra = {}) : extra_(std::move(extra)) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = free_loopback_port();
      if (start()) return;
    }
    throw std::runtime_error("redis-server did not start on any of 5 free ports");
  }
  ~RedisServer() { stop(SIGTERM); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  uint16_t port() const { return port_; }
  std::string url(const std::string& suffix = "") const {
    return "redis://127.0.0.1:" + std::to_string(port_) + suffix;
  }

  void kill_now() { stop(SIGKILL); }
  void pause() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }
  // A fresh, empty server on the same port (clients see their connection drop).
  void restart() {
    stop(SIGKILL);
    for (int attempt = 0; attempt < 50; ++attempt) {
      if (start()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error("redis-server did not restart on port " + std::to_string(port_));
  }

  // A raw hiredis connection for checking what the server holds (TTL, DBSIZE).
  redisContext* raw_connection() const {
    redisContext* context = redisConnect("127.0.0.1", port_);
    if (context == nullptr || context->err != 0) throw std::runtime_error("cannot connect to the test redis-server");
    return context;
  }

 private:
  bool start() {
    const char* configured = std::getenv("CHORUS_TEST_REDIS_SERVER");
    std::string binary = configured && *configured ? configured : "redis-server";
    std::vector<std::string> arguments = {binary,      "--port",          std::to_string(port_), "--bind",
                                          "127.0.0.1", "--save",          "",                    "--appendonly",
                                          "no",        "--protected-mode", "no",                 "--loglevel",
                                          "warning"};
    arguments.insert(arguments.end(), extra_.begin(), extra_.end());
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      std::vector<char*> argv;
      for (auto& argument : arguments) argv.push_back(argument.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    // Ready when it answers PING; gone early means the port was taken (or no binary).
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
          throw std::runtime_error("cannot run " + binary + ": install the redis-server package");
        return false;
      }
      redisContext* context = redisConnect("127.0.0.1", port_);
      bool ready = false;
      if (context != nullptr && context->err == 0) {
        auto* reply = static_cast<redisReply*>(redisCommand(context, "PING"));
        ready = reply != nullptr;  // PONG, or NOAUTH from a server with --requirepass
        if (reply != nullptr) freeReplyObject(reply);
      }
      if (context != nullptr) redisFree(context);
      if (ready) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    stop(SIGKILL);
    throw std::runtime_error("redis-server started but never answered PING");
  }

  void stop(int signal) {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, signal);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  std::vector<std::string> extra_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace chorus::test
