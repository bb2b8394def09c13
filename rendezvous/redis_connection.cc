// RedisConnection (see redis_connection.h). hiredis does the protocol; this
// file decides when a batch was lost before or after it reached the server
// (only the first may always be resent), keeps SIGPIPE from killing the
// process when the server vanishes, and words the errors.
#include "rendezvous/redis_connection.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "base/error.h"
#include "base/log.h"
#include "rendezvous/redis_store.h"

namespace chorus::redis_detail {

void ReplyDeleter::operator()(redisReply* reply) const { freeReplyObject(reply); }

namespace {

// However close a caller's deadline is, a healthy server gets this long to
// answer: on a loaded machine a reply can take tens of milliseconds, and a
// spurious TimeoutError would throw away a good connection.
constexpr std::chrono::milliseconds kShortestReplyWait{500};

timeval to_timeval(std::chrono::milliseconds duration) {
  // A zero timeval means "no timeout" to SO_RCVTIMEO; never ask for that.
  auto ms = std::max<int64_t>(duration.count(), 1);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

// hiredis writes with write(), so a write to a server that has just died
// raises SIGPIPE, whose default action kills the process. While this guard
// lives SIGPIPE is blocked in the calling thread; one raised meanwhile is
// consumed, and the write reports EPIPE instead.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    already_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &previous_);
  }
  ~SigpipeBlocked() {
    int saved_errno = errno;
    if (!already_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        timespec no_wait{};
        while (sigtimedwait(&pipe_, nullptr, &no_wait) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
    errno = saved_errno;
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_;
  sigset_t previous_;
  bool already_pending_ = false;
};

bool is_timeout_errno(int error) { return error == EAGAIN || error == EWOULDBLOCK; }

std::string context_error(const redisContext* context) {
  if (context->err == REDIS_ERR_EOF) return "the server closed the connection";
  return context->errstr[0] != '\0' ? std::string(context->errstr) : std::string("unknown hiredis error");
}

std::string printable(const std::string& text, size_t limit = 80) {
  std::string out;
  for (unsigned char c : text.substr(0, limit)) out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  if (text.size() > limit) out += "...";
  return out;
}

}  // namespace

RedisConnection::RedisConnection(ServerAddress address, std::chrono::milliseconds connect_timeout,
                                 std::chrono::milliseconds reply_timeout)
    : address_(std::move(address)), connect_timeout_(connect_timeout), reply_timeout_(reply_timeout) {
  name_ = cat("RedisStore ", address_.host, ":", address_.port);
  if (address_.database != 0) name_ += cat("/", address_.database);
  if (connect_timeout_.count() <= 0 || reply_timeout_.count() <= 0)
    throw InvalidArgument(cat(name_, ": connect and reply timeouts must be positive"));
  std::lock_guard lock(mutex_);
  connect_locked("");
}

RedisConnection::~RedisConnection() { disconnect_locked(); }

void RedisConnection::disconnect_locked() {
  if (context_ != nullptr) redisFree(context_);
  context_ = nullptr;
}

void RedisConnection::connect_locked(const std::string& lost) {
  // After a drop, every error says so: "lost the connection (EOF) and reconnecting failed: ...".
  std::string why = lost.empty() ? std::string() : cat("lost the connection (", lost, ") and reconnecting failed: ");
  redisContext* context =
      redisConnectWithTimeout(address_.host.c_str(), static_cast<int>(address_.port), to_timeval(connect_timeout_));
  if (context == nullptr) throw IoError(cat(name_, ": ", why, "cannot allocate a hiredis context"));
  if (context->err != 0) {
    std::string error = context_error(context);
    redisFree(context);
    throw IoError(cat(name_, ": ", why, "cannot connect to Redis: ", error));
  }
  context_ = context;
  socket_timeout_ = std::chrono::milliseconds(-1);
  // A peer host that vanishes without a FIN is noticed by keepalive probes.
  redisEnableKeepAlive(context_);

  std::vector<Command> setup;
  if (!address_.password.empty()) setup.push_back({"AUTH", address_.password});
  if (address_.database != 0) setup.push_back({"SELECT", std::to_string(address_.database)});
  if (setup.empty()) return;
  std::vector<Reply> replies;
  Failure failure = exchange_locked(setup, reply_timeout_, replies);
  if (failure.outcome != Outcome::ok) {
    disconnect_locked();
    throw IoError(cat(name_, ": ", why, "connection lost while logging in and selecting the database: ",
                      failure.error));
  }
  for (size_t i = 0; i < setup.size(); ++i) {
    if (replies[i]->type == REDIS_REPLY_ERROR) {
      std::string error(replies[i]->str, replies[i]->len);
      disconnect_locked();
      throw IoError(cat(name_, ": ", why, setup[i][0], " refused: ", error));
    }
  }
}

bool RedisConnection::looks_dropped_locked() const {
  // Between round trips the server owes us nothing, so a readable socket
  // means it closed the connection (restart, idle timeout) or sent garbage.
  pollfd descriptor{};
  descriptor.fd = context_->fd;
  descriptor.events = POLLIN | POLLRDHUP;
  return ::poll(&descriptor, 1, 0) > 0 && descriptor.revents != 0;
}

RedisConnection::Failure RedisConnection::exchange_locked(const std::vector<Command>& commands,
                                                          std::chrono::milliseconds reply_wait,
                                                          std::vector<Reply>& replies) {
  if (reply_wait != socket_timeout_) {
    if (redisSetTimeout(context_, to_timeval(reply_wait)) != REDIS_OK)
      return {Outcome::lost_before_sending, context_error(context_)};
    socket_timeout_ = reply_wait;
  }
  for (const Command& command : commands) {
    std::vector<const char*> arguments;
    std::vector<size_t> lengths;
    for (const std::string& argument : command) {
      arguments.push_back(argument.data());
      lengths.push_back(argument.size());
    }
    if (redisAppendCommandArgv(context_, static_cast<int>(arguments.size()), arguments.data(), lengths.data()) !=
        REDIS_OK) {
      return {Outcome::lost_before_sending, context_error(context_)};
    }
  }
  {
    SigpipeBlocked guard;
    bool wrote_something = false;
    int done = 0;
    while (done == 0) {
      if (redisBufferWrite(context_, &done) != REDIS_OK) {
        int error = errno;
        if (context_->err == REDIS_ERR_IO && is_timeout_errno(error)) return {Outcome::timed_out, "send timed out"};
        // A failed first write() wrote nothing: the server cannot have seen any command.
        return {wrote_something ? Outcome::lost_after_sending : Outcome::lost_before_sending,
                context_error(context_)};
      }
      wrote_something = true;
    }
  }
  replies.clear();
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK) {
      int error = errno;
      if (context_->err == REDIS_ERR_IO && is_timeout_errno(error)) return {Outcome::timed_out, "no reply"};
      return {Outcome::lost_after_sending, context_error(context_)};
    }
    replies.emplace_back(static_cast<redisReply*>(raw));
  }
  return {};
}

std::string RedisConnection::describe_commands(const std::vector<Command>& commands) const {
  if (commands.empty()) return "nothing";
  const Command& first = commands.front();
  std::string text = first.empty() ? std::string("?") : first[0];
  if (first.size() > 1) text += " '" + printable(first[1]) + "'";
  if (commands.size() > 1) text += cat(" (and ", commands.size() - 1, " more commands)");
  return text;
}

std::vector<Reply> RedisConnection::round_trip(const std::vector<Command>& commands, Resend resend,
                                               Deadline deadline) {
  std::lock_guard lock(mutex_);
  std::chrono::milliseconds reply_wait = reply_timeout_;
  if (deadline.at() != Clock::time_point::max())
    reply_wait = std::min(reply_timeout_, std::max(deadline.remaining(), kShortestReplyWait));

  std::string lost;  // why this call dropped a connection, if it did
  for (int attempt = 0;; ++attempt) {
    if (context_ != nullptr && looks_dropped_locked()) {
      lost = "the server closed the connection";
      disconnect_locked();
    }
    if (context_ == nullptr) {
      connect_locked(lost);
      if (!lost.empty()) CHORUS_LOG(info, -1, name_, ": reconnected after losing the connection (", lost, ")");
    }
    std::vector<Reply> replies;
    Failure failure = exchange_locked(commands, reply_wait, replies);
    if (failure.outcome == Outcome::ok) return replies;
    disconnect_locked();
    if (failure.outcome == Outcome::timed_out) {
      throw TimeoutError(cat(name_, ": no reply to ", describe_commands(commands), " within ", reply_wait.count(),
                             " ms (", failure.error, "; the server is hung or overloaded)"));
    }
    bool may_resend = failure.outcome == Outcome::lost_before_sending || resend == Resend::safe;
    if (attempt > 0 || !may_resend) {
      throw IoError(cat(name_, ": connection lost during ", describe_commands(commands), ": ", failure.error,
                        attempt > 0 ? " (again, after reconnecting)" : " (not resent: it may have run already)"));
    }
    lost = failure.error;
  }
}

}  // namespace chorus::redis_detail
