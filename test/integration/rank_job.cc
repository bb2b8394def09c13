// Starting, watching and reaping the rank processes of one test job.
#include "test/integration/rank_job.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace chorus::integration {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

bool is_contract_variable(const char* entry) {
  for (const char* name : {"CHORUS_RANK=", "CHORUS_SIZE=", "CHORUS_STORE=", "CHORUS_JOB_ID="})
    if (std::strncmp(entry, name, std::strlen(name)) == 0) return true;
  return false;
}

std::string make_temp_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "chorus-itest-XXXXXX").string();
  if (!mkdtemp(pattern.data())) fail("mkdtemp " + pattern);
  return pattern;
}

}  // namespace

int64_t driver_monotonic_ms() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000 + now.tv_nsec / 1000000;
}

std::string rank_program_path() {
  if (const char* configured = std::getenv("CHORUS_RANK_PROGRAM")) return configured;
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "rank_program").string();
}

uint16_t pick_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    fail("bind to a free port");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

std::map<std::string, std::string> parse_result_line(const std::string& line) {
  std::map<std::string, std::string> fields;
  std::string rest = line.rfind("RESULT ", 0) == 0 ? line.substr(7) : line;
  size_t what = rest.find(" what=");
  if (rest.rfind("what=", 0) == 0) what = 0;
  if (what != std::string::npos) {
    size_t value_at = rest.find('=', what) + 1;
    fields["what"] = rest.substr(value_at);
    rest = rest.substr(0, what);
  }
  std::istringstream words(rest);
  for (std::string word; words >> word;) {
    size_t equals = word.find('=');
    if (equals != std::string::npos) fields[word.substr(0, equals)] = word.substr(equals + 1);
  }
  return fields;
}

RankJob::RankJob(const JobSpec& spec) {
  static std::atomic<int> jobs_started{0};
  temp_dir_ = make_temp_dir();
  job_id_ = "itest-" + std::to_string(::getpid()) + "-" + std::to_string(jobs_started++);
  if (spec.store == StoreKind::file) {
    std::filesystem::create_directory(temp_dir_ + "/store");
    store_url_ = "file://" + temp_dir_ + "/store";
  } else {
    store_url_ = "tcp://127.0.0.1:" + std::to_string(pick_free_port());
  }
  ranks_.resize(static_cast<size_t>(spec.size));
  try {
    for (int rank = 0; rank < spec.size; ++rank) start(rank, spec);
  } catch (...) {
    clean_up();
    throw;
  }
}

RankJob::~RankJob() { clean_up(); }

void RankJob::clean_up() {
  for (Rank& rank : ranks_) {
    if (rank.pid > 0 && !rank.exited) {
      ::kill(rank.pid, SIGKILL);  // also ends a SIGSTOPped rank
      int status = 0;
      while (::waitpid(rank.pid, &status, 0) < 0 && errno == EINTR) {
      }
      rank.exited = true;
      rank.status = status;
    }
    for (int* fd : {&rank.stdout_fd, &rank.stderr_fd}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }
  if (!temp_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(temp_dir_, ignored);
    temp_dir_.clear();
  }
}

void RankJob::start(int rank_index, const JobSpec& spec) {
  Rank& rank = ranks_[static_cast<size_t>(rank_index)];
  const std::string program = rank_program_path();
  std::vector<std::string> argument_strings{program};
  for (const std::string& argument : spec.arguments) argument_strings.push_back(replace_all(argument, "{tmp}", temp_dir_));

  std::vector<std::string> environment;
  for (char** entry = environ; *entry; ++entry)
    if (!is_contract_variable(*entry)) environment.emplace_back(*entry);
  environment.push_back("CHORUS_RANK=" + std::to_string(rank_index));
  environment.push_back("CHORUS_SIZE=" + std::to_string(spec.size));
  environment.push_back("CHORUS_STORE=" + store_url_);
  environment.push_back("CHORUS_JOB_ID=" + job_id_);

  // Everything the child touches is built before fork: after fork only
  // async-signal-safe calls are allowed.
  std::vector<char*> argv;
  for (std::string& argument : argument_strings) argv.push_back(argument.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);

  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) fail("pipe2");
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    fail("pipe2");
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    // A driver that dies (test timeout, crash) must not leave ranks behind.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) _exit(126);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    const char message[] = "rank_job: execve of the rank program failed\n";
    (void)!::write(STDERR_FILENO, message, sizeof(message) - 1);
    _exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  rank.pid = pid;
  rank.stdout_fd = out_pipe[0];
  rank.stderr_fd = err_pipe[0];
  ::fcntl(rank.stdout_fd, F_SETFL, O_NONBLOCK);
  ::fcntl(rank.stderr_fd, F_SETFL, O_NONBLOCK);
}

void RankJob::read_available(Rank& rank) {
  char buffer[65536];
  for (int* fd : {&rank.stdout_fd, &rank.stderr_fd}) {
    while (*fd >= 0) {
      ssize_t n = ::read(*fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;  // EAGAIN: nothing more for now
      if (n == 0) {
        ::close(*fd);
        *fd = -1;
        break;
      }
      if (fd == &rank.stderr_fd) {
        // Bounded: a rank logging at trace level must not exhaust memory.
        if (rank.stderr_text.size() < (size_t{4} << 20)) rank.stderr_text.append(buffer, static_cast<size_t>(n));
        continue;
      }
      rank.stdout_partial.append(buffer, static_cast<size_t>(n));
      const int64_t now = driver_monotonic_ms();
      for (size_t newline; (newline = rank.stdout_partial.find('\n')) != std::string::npos;) {
        rank.lines.push_back({rank.stdout_partial.substr(0, newline), now});
        rank.stdout_partial.erase(0, newline + 1);
      }
    }
  }
}

void RankJob::reap() {
  for (Rank& rank : ranks_) {
    if (rank.pid <= 0 || rank.exited) continue;
    int status = 0;
    pid_t reaped = ::waitpid(rank.pid, &status, WNOHANG);
    if (reaped == rank.pid) {
      rank.exited = true;
      rank.status = status;
    }
  }
}

void RankJob::pump() {
  std::vector<pollfd> fds;
  for (Rank& rank : ranks_) {
    for (int fd : {rank.stdout_fd, rank.stderr_fd})
      if (fd >= 0) fds.push_back({fd, POLLIN, 0});
  }
  if (!fds.empty()) ::poll(fds.data(), fds.size(), 0);
  for (Rank& rank : ranks_) read_available(rank);
  reap();
}

bool RankJob::wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const int64_t give_up_at = driver_monotonic_ms() + limit.count();
  for (;;) {
    pump();
    if (done()) return true;
    const int64_t remaining = give_up_at - driver_monotonic_ms();
    if (remaining <= 0) return false;
    // Wake on output; a rank that exits closes its pipes, which wakes us too.
    std::vector<pollfd> fds;
    for (Rank& rank : ranks_) {
      for (int fd : {rank.stdout_fd, rank.stderr_fd})
        if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    }
    const int wait_ms = static_cast<int>(std::min<int64_t>(remaining, 20));
    if (fds.empty()) ::usleep(static_cast<useconds_t>(wait_ms) * 1000);
    else ::poll(fds.data(), fds.size(), wait_ms);
  }
}

bool RankJob::exited(int rank_index) const {
  const Rank& rank = ranks_.at(static_cast<size_t>(rank_index));
  // Reaped and its output fully read, so its RESULT line (if any) is in.
  return rank.exited && rank.stdout_fd < 0 && rank.stderr_fd < 0;
}

bool RankJob::wait_for_exit(int rank, std::chrono::milliseconds limit) {
  return wait_until([&] { return exited(rank); }, limit);
}

bool RankJob::wait_for_all_exits(std::chrono::milliseconds limit) {
  return wait_until(
      [&] {
        for (int rank = 0; rank < size(); ++rank)
          if (!exited(rank)) return false;
        return true;
      },
      limit);
}

int RankJob::exit_status(int rank_index) const {
  const Rank& rank = ranks_.at(static_cast<size_t>(rank_index));
  if (!rank.exited) return -1000;
  if (WIFSIGNALED(rank.status)) return -WTERMSIG(rank.status);
  return WEXITSTATUS(rank.status);
}

bool RankJob::printed(int rank_index, const std::string& prefix) const {
  for (const OutputLine& line : ranks_.at(static_cast<size_t>(rank_index)).lines)
    if (line.text.rfind(prefix, 0) == 0) return true;
  return false;
}

std::optional<std::map<std::string, std::string>> RankJob::result(int rank_index) const {
  for (const OutputLine& line : ranks_.at(static_cast<size_t>(rank_index)).lines)
    if (line.text.rfind("RESULT ", 0) == 0) return parse_result_line(line.text);
  return std::nullopt;
}

std::optional<int64_t> RankJob::result_received_ms(int rank_index) const {
  for (const OutputLine& line : ranks_.at(static_cast<size_t>(rank_index)).lines)
    if (line.text.rfind("RESULT ", 0) == 0) return line.received_ms;
  return std::nullopt;
}

void RankJob::signal(int rank_index, int signal_number) {
  Rank& rank = ranks_.at(static_cast<size_t>(rank_index));
  if (rank.pid > 0 && !rank.exited) ::kill(rank.pid, signal_number);
}

std::string RankJob::transcript() const {
  std::ostringstream out;
  out << "job " << job_id_ << " store " << store_url_ << "\n";
  for (size_t index = 0; index < ranks_.size(); ++index) {
    const Rank& rank = ranks_[index];
    out << "--- rank " << index << " (pid " << rank.pid << ", "
        << (rank.exited ? "exit status " + std::to_string(exit_status(static_cast<int>(index))) : "running")
        << ")\n";
    for (const OutputLine& line : rank.lines) out << "  out: " << line.text << "\n";
    if (!rank.stdout_partial.empty()) out << "  out (no newline): " << rank.stdout_partial << "\n";
    // The tail of stderr is where a failure's log lines are.
    const size_t keep = 6000;
    std::string err = rank.stderr_text.size() > keep ? "..." + rank.stderr_text.substr(rank.stderr_text.size() - keep)
                                                    : rank.stderr_text;
    if (!err.empty()) out << "  err: " << replace_all(err, "\n", "\n  err: ") << "\n";
  }
  return out.str();
}

}  // namespace chorus::integration
