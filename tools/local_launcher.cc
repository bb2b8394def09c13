// Local launch: fork/exec every rank, then one loop that waits on the ranks'
// output pipes and a self-pipe written by signal handlers (SIGCHLD, and the
// stop signals to forward), so the launcher sleeps until something happens
// and never needs a thread of its own.
#include "tools/local_launcher.h"

#include <array>
#include <charconv>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <optional>
#include <poll.h>
#include <iomanip>
#include <random>
#include <string>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/config.h"
#include "base/error.h"
#include "base/job_secret.h"
#include "base/log.h"
#include "tools/first_failure.h"
#include "tools/launch_store.h"
#include "tools/rank_output.h"

extern char** environ;

namespace chorus::tools {
namespace {

using Clock = std::chrono::steady_clock;

// Signal handlers can only set a flag and write a byte; everything else
// happens in the supervision loop that the byte wakes up.
int g_wake_write_fd = -1;
volatile sig_atomic_t g_stop_signal = 0;
volatile sig_atomic_t g_stop_signal_count = 0;

void on_signal(int signal_number) {
  if (signal_number != SIGCHLD) {
    if (g_stop_signal == 0) g_stop_signal = signal_number;
    g_stop_signal_count = g_stop_signal_count + 1;
  }
  int saved_errno = errno;
  char byte = 0;
  [[maybe_unused]] ssize_t ignored = ::write(g_wake_write_fd, &byte, 1);
  errno = saved_errno;
}

constexpr std::array<int, 4> kWatchedSignals{SIGCHLD, SIGINT, SIGTERM, SIGHUP};

// Installs the handlers for the lifetime of one launch and restores the
// previous ones after it.
class SignalWatch {
 public:
  SignalWatch() {
    if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0)
      throw IoError(cat("cannot create the launcher's wake-up pipe: ", std::strerror(errno)));
    g_wake_write_fd = wake_pipe_[1];
    g_stop_signal = 0;
    g_stop_signal_count = 0;
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    // Without SA_NOCLDSTOP: a rank stopped (SIGSTOP, a debugger) wakes the
    // supervisor too, which notes it as evidence of who failed first.
    action.sa_flags = SA_RESTART;
    for (size_t i = 0; i < kWatchedSignals.size(); ++i) sigaction(kWatchedSignals[i], &action, &previous_[i]);
  }
  ~SignalWatch() {
    for (size_t i = 0; i < kWatchedSignals.size(); ++i) sigaction(kWatchedSignals[i], &previous_[i], nullptr);
    g_wake_write_fd = -1;
    ::close(wake_pipe_[0]);
    ::close(wake_pipe_[1]);
  }
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;
  int read_fd() const { return wake_pipe_[0]; }
  void drain() {
    char buffer[64];
    while (::read(wake_pipe_[0], buffer, sizeof(buffer)) > 0) {
    }
  }

 private:
  int wake_pipe_[2] = {-1, -1};
  std::array<struct sigaction, kWatchedSignals.size()> previous_{};
};

// 32 random bytes as hex: the secret of a job whose launcher was given none.
std::string random_secret() {
  const Challenge first = fresh_challenge(), second = fresh_challenge();
  std::string text;
  for (const auto& half : {first, second})
    for (std::byte b : half) text += cat(std::hex, std::setw(2), std::setfill('0'), std::to_integer<unsigned>(b));
  return text;
}

// The secret a launcher generated, in a file only its owner can read, for
// the ranks' CHORUS_SECRET_FILE: a value in the environment is readable in
// /proc/PID/environ and inherited by every process a rank starts. The file
// and its private directory go when the launcher ends.
class SecretFile {
 public:
  explicit SecretFile(const std::string& secret) {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = cat(base && *base ? base : "/tmp", "/chorus-run-XXXXXX");
    if (!::mkdtemp(pattern.data()))
      throw IoError(cat("chorus-run: cannot make a private directory for the job secret (", pattern, "): ",
                        std::strerror(errno)));
    directory_ = pattern;
    path_ = directory_ + "/secret";
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ::write(fd, secret.data(), secret.size()) != static_cast<ssize_t>(secret.size())) {
      const int error = errno;
      if (fd >= 0) ::close(fd);
      remove();
      throw IoError(cat("chorus-run: cannot write the job secret to ", path_, ": ", std::strerror(error)));
    }
    ::close(fd);
  }
  ~SecretFile() { remove(); }
  SecretFile(const SecretFile&) = delete;
  SecretFile& operator=(const SecretFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  void remove() {
    if (!path_.empty()) ::unlink(path_.c_str());
    if (!directory_.empty()) ::rmdir(directory_.c_str());
  }
  std::string directory_, path_;
};

// How long the launcher looks for the ranks' suspect reports in the job's
// store once every rank has ended: they are written before a rank exits,
// so they are there or never will be.
constexpr std::chrono::milliseconds kSuspectReadBudget{1000};

std::string random_job_id() {
  std::random_device device;
  return cat("local-", getpid(), "-", std::hex, device());
}

std::string describe_status(int rank, int status) {
  if (WIFSIGNALED(status))
    return cat("rank ", rank, " was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  return cat("rank ", rank, " exited with status ", WEXITSTATUS(status));
}


const char* signal_name(int signal_number) {
  switch (signal_number) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}

// The parent's environment without any CHORUS_* the launcher sets itself
// (a launcher started under another launcher must not leak its rank).
// secret_file: CHORUS_SECRET_FILE for the ranks when the launcher made a
// secret (else they inherit the launcher's CHORUS_SECRET or CHORUS_SECRET_FILE).
// local_rank/local_size: the rank's place among the ranks of its (fake) host,
// as CHORUS_LOCAL_RANK/SIZE and torchrun's LOCAL_RANK/LOCAL_WORLD_SIZE, which
// training scripts read to pick a device.
std::vector<std::string> rank_environment(int rank, int size, const std::string& store, const std::string& job_id,
                                          const std::string& host_id, const std::string& secret_file,
                                          int local_rank, int local_size) {
  std::vector<std::string> variables;
  bool interface_given = false;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    bool ours = false;
    for (std::string_view name : {"CHORUS_RANK=", "CHORUS_SIZE=", "CHORUS_STORE=", "CHORUS_JOB_ID=",
                                  "CHORUS_LOCAL_RANK=", "CHORUS_LOCAL_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE="})
      ours = ours || text.starts_with(name);
    ours = ours || (!host_id.empty() && text.starts_with("CHORUS_HOST_ID="));
    interface_given = interface_given || text.starts_with("CHORUS_SOCKET_IFNAME=");
    if (!ours) variables.emplace_back(text);
  }
  variables.push_back(cat("CHORUS_RANK=", rank));
  variables.push_back(cat("CHORUS_SIZE=", size));
  variables.push_back("CHORUS_STORE=" + store);
  variables.push_back("CHORUS_JOB_ID=" + job_id);
  variables.push_back(cat("CHORUS_LOCAL_RANK=", local_rank));
  variables.push_back(cat("CHORUS_LOCAL_SIZE=", local_size));
  variables.push_back(cat("LOCAL_RANK=", local_rank));
  variables.push_back(cat("LOCAL_WORLD_SIZE=", local_size));
  // Every rank runs on this machine: TCP between them stays on loopback
  // instead of the default route's address (which may be filtered, or be
  // a slower path through the NIC). The caller's choice wins.
  if (!interface_given) variables.push_back("CHORUS_SOCKET_IFNAME=lo");
  if (!host_id.empty()) variables.push_back("CHORUS_HOST_ID=" + host_id);
  if (!secret_file.empty()) variables.push_back("CHORUS_SECRET_FILE=" + secret_file);
  return variables;
}

// Each rank's index on its fake host and that host's size (one host: rank, ranks).
std::vector<std::pair<int, int>> local_places(const LaunchOptions& options) {
  std::vector<std::pair<int, int>> places;
  if (options.fake_hosts.empty()) {
    for (int rank = 0; rank < options.ranks; ++rank) places.emplace_back(rank, options.ranks);
    return places;
  }
  for (int host_size : options.fake_hosts)
    for (int local = 0; local < host_size; ++local) places.emplace_back(local, host_size);
  return places;
}

// The fake host of each rank ("" without fake hosts), or why the layout is wrong.
std::string fake_host_ids(const LaunchOptions& options, const std::string& job_id, std::vector<std::string>& ids) {
  ids.assign(static_cast<size_t>(options.ranks), std::string());
  if (options.fake_hosts.empty()) return "";
  int total = 0;
  for (int count : options.fake_hosts) {
    if (count < 1) return cat("fake hosts need at least one rank each, got ", count);
    total += count;
  }
  if (total != options.ranks)
    return cat("fake hosts hold ", total, " ranks but ", options.ranks, " are launched");
  int rank = 0;
  for (size_t host = 0; host < options.fake_hosts.size(); ++host)
    for (int k = 0; k < options.fake_hosts[host]; ++k) ids[static_cast<size_t>(rank++)] = cat(job_id, "-host", host);
  return "";
}

struct Rank {
  pid_t pid = -1;  // also its process group id; -1 once reaped
  struct Stream {
    int fd = -1;  // read end of the pipe, -1 when not captured or closed
    std::unique_ptr<PrefixedLineWriter> writer;
  };
  std::array<Stream, 2> output;  // stdout, stderr
};

void close_stream(Rank::Stream& stream) {
  if (stream.fd < 0) return;
  stream.writer->finish();
  ::close(stream.fd);
  stream.fd = -1;
}

// Only async-signal-safe calls between fork and exec: the launcher may have
// threads (the TcpStore server) whose locks a child must not touch.
[[noreturn]] void exec_rank(const std::vector<char*>& argv, const std::vector<char*>& envp, pid_t launcher,
                            int stdout_fd, int stderr_fd) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a SIGKILLed launcher must not leave ranks behind
  if (::getppid() != launcher) ::_exit(126);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
  if (stdout_fd >= 0) ::dup2(stdout_fd, STDOUT_FILENO);
  if (stderr_fd >= 0) ::dup2(stderr_fd, STDERR_FILENO);
  ::execvpe(argv[0], argv.data(), envp.data());
  const char* reason = std::strerror(errno);
  for (const char* piece : {"cannot execute ", static_cast<const char*>(argv[0]), ": ", reason, "\n"})
    [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, piece, std::strlen(piece));
  ::_exit(127);
}

class Supervisor {
 public:
  Supervisor(const LaunchOptions& options, std::vector<Rank>& ranks, SignalWatch& signals)
      : options_(options), ranks_(ranks), signals_(signals), endings_(ranks.size()), signalled_(ranks.size(), 0) {}

  // How each rank ended, for choose_first_failure once run() returns.
  const std::vector<RankEnding>& endings() const { return endings_; }

  LaunchResult run() {
    for (const Rank& rank : ranks_) running_ += rank.pid > 0;
    while (running_ > 0) {
      wait_for_events(std::chrono::milliseconds(100));
      handle_stop_signal();
      reap();
      escalate();
    }
    // Everything a rank wrote before it exited is in its pipe by now; take
    // what is there without waiting for an EOF that a rank's orphaned
    // children (holding the pipe open) might never send.
    while (wait_for_events(std::chrono::milliseconds(0))) {
    }
    for (Rank& rank : ranks_)
      for (Rank::Stream& stream : rank.output) close_stream(stream);
    return result_;
  }

 private:
  // Polls the wake-up pipe and the output pipes and copies what arrived.
  // Returns whether any output pipe had something (data or EOF).
  bool wait_for_events(std::chrono::milliseconds timeout) {
    std::vector<pollfd> fds{{signals_.read_fd(), POLLIN, 0}};
    std::vector<Rank::Stream*> streams{nullptr};
    for (Rank& rank : ranks_) {
      for (Rank::Stream& stream : rank.output) {
        if (stream.fd < 0) continue;
        fds.push_back({stream.fd, POLLIN, 0});
        streams.push_back(&stream);
      }
    }
    int ready = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
    if (ready <= 0) return false;
    if (fds[0].revents != 0) signals_.drain();
    bool output = false;
    char buffer[65536];
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      output = true;
      ssize_t got = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (got > 0) {
        streams[i]->writer->feed(std::span<const char>(buffer, static_cast<size_t>(got)));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        close_stream(*streams[i]);
      }
    }
    return output;
  }

  void signal_running_ranks(int signal_number) {
    for (size_t i = 0; i < ranks_.size(); ++i) {
      const Rank& rank = ranks_[i];
      if (rank.pid <= 0) continue;
      // Remembered, so a rank dying of it is not taken for one that failed on its own.
      if (signal_number < 64) signalled_[i] |= uint64_t{1} << signal_number;
      // The whole process group: a rank that is a shell script takes its children along.
      if (::kill(-rank.pid, signal_number) != 0) ::kill(rank.pid, signal_number);
    }
  }

  void start_stopping() {
    if (stopping_since_) return;
    stopping_since_ = Clock::now();
  }

  void handle_stop_signal() {
    // A second Ctrl-C means "now": no more grace.
    if (g_stop_signal_count > 1 && !killed_on_repeat_) {
      std::fprintf(stderr, "%s: stop signal received again; killing every rank\n", options_.launcher_name.c_str());
      signal_running_ranks(SIGKILL);
      killed_on_repeat_ = true;
    }
    int received = g_stop_signal;
    if (received == 0 || result_.interrupted_by_signal != 0) return;
    result_.interrupted_by_signal = received;
    std::fprintf(stderr, "%s: received %s; forwarding it to every rank\n", options_.launcher_name.c_str(),
                 signal_name(received));
    signal_running_ranks(received);
    sent_sigterm_ = sent_sigterm_ || received == SIGTERM;
    if (result_.first_failed_rank < 0) {
      result_.exit_code = 128 + received;
      result_.description = cat("interrupted by ", signal_name(received), " (forwarded to every rank)");
    }
    start_stopping();
  }

  void reap() {
    ++pass_;
    for (;;) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG | WUNTRACED | WCONTINUED);
      if (pid == 0) return;
      if (pid < 0) {
        if (errno == EINTR) continue;
        running_ = 0;  // ECHILD: nobody left (should not happen while running_ > 0)
        return;
      }
      int rank = -1;
      for (size_t i = 0; i < ranks_.size(); ++i)
        if (ranks_[i].pid == pid) rank = static_cast<int>(i);
      if (rank < 0) continue;  // not ours (the embedding program's own child)
      RankEnding& ending = endings_[static_cast<size_t>(rank)];
      if (WIFSTOPPED(status) || WIFCONTINUED(status)) {
        // A stop lasts until a SIGCONT; only one still in force tells on the rank.
        ending.stop_signal = WIFSTOPPED(status) ? WSTOPSIG(status) : 0;
        ending.stopped_pass = pass_;
        continue;
      }
      ranks_[static_cast<size_t>(rank)].pid = -1;
      --running_;
      ending.ended = true;
      ending.status = status;
      ending.ended_pass = pass_;
      ending.killed_by_launcher = WIFSIGNALED(status) && WTERMSIG(status) < 64 &&
                                  (signalled_[static_cast<size_t>(rank)] >> WTERMSIG(status) & 1) != 0;
      bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      // After a forwarded signal the ranks dying of it are no news.
      if (!failed || result_.first_failed_rank >= 0 || result_.interrupted_by_signal != 0) continue;
      result_.first_failed_rank = rank;
      result_.exit_code = exit_code_of(status);
      result_.description = describe_status(rank, status);
      if (running_ > 0) {
        std::fprintf(stderr, "%s: %s; stopping the other ranks (SIGTERM in %.1f s, SIGKILL in %.1f s)\n",
                     options_.launcher_name.c_str(), result_.description.c_str(), options_.grace.count() / 1000.0,
                     2 * options_.grace.count() / 1000.0);
      }
      start_stopping();
    }
  }

  // The grace period lets the other ranks report their own view of a failure
  // (usually an IoError naming the failed rank); a launcher must still never
  // hang on a stuck rank.
  void escalate() {
    if (!stopping_since_ || running_ == 0) return;
    auto waited = Clock::now() - *stopping_since_;
    if (waited >= 2 * options_.grace) {
      signal_running_ranks(SIGKILL);
    } else if (waited >= options_.grace && !sent_sigterm_) {
      signal_running_ranks(SIGTERM);
      sent_sigterm_ = true;
    }
  }

  const LaunchOptions& options_;
  std::vector<Rank>& ranks_;
  SignalWatch& signals_;
  LaunchResult result_;
  std::vector<RankEnding> endings_;
  std::vector<uint64_t> signalled_;  // by rank: bit n set once the launcher sent it signal n
  int pass_ = 0;
  int running_ = 0;
  std::optional<Clock::time_point> stopping_since_;
  bool sent_sigterm_ = false;
  bool killed_on_repeat_ = false;
};

}  // namespace

LaunchResult launch_local(const LaunchOptions& options) {
  LaunchResult result;
  if (options.ranks < 1 || options.argv.empty()) {
    result.exit_code = 2;
    result.description = options.ranks < 1 ? cat("cannot launch ", options.ranks, " ranks (need at least 1)")
                                            : std::string("no program to launch");
    return result;
  }
  // Every job is authenticated: the caller's secret if it gave one, else a fresh one.
  std::unique_ptr<LaunchStore> store;
  std::unique_ptr<SecretFile> secret_file;
  JobSecret secret;
  try {
    secret = secret_from_environment();
    if (!secret.configured()) {
      const std::string generated = random_secret();
      secret_file = std::make_unique<SecretFile>(generated);
      secret = JobSecret(generated);
    }
    store = std::make_unique<LaunchStore>(options.store, secret);
  } catch (const Error& error) {
    result.exit_code = 2;
    result.description = error.what();
    return result;
  }
  const std::string job_id = random_job_id();
  std::vector<std::string> host_ids;
  if (std::string why = fake_host_ids(options, job_id, host_ids); !why.empty()) {
    result.exit_code = 2;
    result.description = why;
    return result;
  }
  SignalWatch signals;

  std::vector<char*> argv;
  for (const auto& arg : options.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);

  const std::vector<std::pair<int, int>> places = local_places(options);
  std::vector<Rank> ranks(static_cast<size_t>(options.ranks));
  for (int rank = 0; rank < options.ranks; ++rank) {
    // Everything the child needs is built before fork (see exec_rank).
    const auto [local_rank, local_size] = places[static_cast<size_t>(rank)];
    std::vector<std::string> environment =
        rank_environment(rank, options.ranks, store->url(), job_id, host_ids[static_cast<size_t>(rank)],
                         secret_file ? secret_file->path() : std::string(), local_rank, local_size);
    std::vector<char*> envp;
    for (auto& variable : environment) envp.push_back(variable.data());
    envp.push_back(nullptr);
    std::array<int, 2> stdout_pipe{-1, -1}, stderr_pipe{-1, -1};
    if (options.prefix_output &&
        (::pipe2(stdout_pipe.data(), O_CLOEXEC) != 0 || ::pipe2(stderr_pipe.data(), O_CLOEXEC) != 0)) {
      result.exit_code = 1;
      result.description = cat("cannot create output pipes for rank ", rank, ": ", std::strerror(errno));
      break;
    }
    const pid_t launcher = ::getpid();
    pid_t pid = ::fork();
    if (pid == 0) exec_rank(argv, envp, launcher, stdout_pipe[1], stderr_pipe[1]);
    for (int fd : {stdout_pipe[1], stderr_pipe[1]})
      if (fd >= 0) ::close(fd);
    if (pid < 0) {
      for (int fd : {stdout_pipe[0], stderr_pipe[0]})
        if (fd >= 0) ::close(fd);
      result.exit_code = 1;
      result.description = cat("fork failed for rank ", rank, ": ", std::strerror(errno));
      break;
    }
    ::setpgid(pid, pid);  // also in the child: whichever runs first, the group exists before any kill
    Rank& started = ranks[static_cast<size_t>(rank)];
    started.pid = pid;
    if (options.prefix_output) {
      started.output[0] = {stdout_pipe[0], std::make_unique<PrefixedLineWriter>(rank, STDOUT_FILENO)};
      started.output[1] = {stderr_pipe[0], std::make_unique<PrefixedLineWriter>(rank, STDERR_FILENO)};
    }
  }
  if (result.exit_code != 0) {
    // Could not start them all: the ones started would wait for the rest until their timeout.
    for (const Rank& rank : ranks)
      if (rank.pid > 0) ::kill(-rank.pid, SIGKILL);
  }
  Supervisor supervisor(options, ranks, signals);
  LaunchResult supervised = supervisor.run();
  if (result.exit_code != 0) return result;
  if (supervised.first_failed_rank >= 0 && supervised.interrupted_by_signal == 0) {
    // The first to exit is usually a survivor that reported a lost peer: ask
    // what the launcher saw and what the ranks reported (tools/first_failure.h).
    const std::vector<SuspectReport> reports =
        store->outlives_ranks()
            ? read_suspect_reports(store->url(), job_id, secret, options.ranks, kSuspectReadBudget)
            : std::vector<SuspectReport>();
    const FirstFailure first = choose_first_failure(supervisor.endings(), supervised.first_failed_rank, reports);
    supervised.first_failed_rank = first.rank;
    supervised.exit_code = first.exit_code;
    supervised.description = first.description;
  }
  return supervised;
}

std::optional<std::vector<int>> parse_fake_hosts(const std::string& text) {
  std::vector<int> counts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    int count = 0;
    auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), count);
    if (item.empty() || error != std::errc() || end != item.data() + item.size() || count < 1) return std::nullopt;
    counts.push_back(count);
    start = comma + 1;
  }
  return counts;
}

LaunchResult launch_local(int ranks, const std::vector<std::string>& argv, const std::vector<int>& fake_hosts) {
  LaunchOptions options;
  options.ranks = ranks;
  options.argv = argv;
  options.fake_hosts = fake_hosts;
  options.launcher_name = "chorus-bench";
  return launch_local(options);
}

}  // namespace chorus::tools
