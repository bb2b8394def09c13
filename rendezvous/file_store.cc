// FileStore: a directory that every rank sees (NFS, Lustre, a local /tmp for
// ranks on one host). One file per key. Readers never see half a value
// because set() writes a temporary file and renames it into place; add() is
// atomic across processes because it holds flock() on one lock file while it
// reads, computes and renames. Waiting is polling with a short backoff: a
// shared filesystem offers nothing better that works everywhere.
#include "rendezvous/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "rendezvous/store_common.h"

namespace chorus {
namespace {

// Longest file name we create; NAME_MAX is 255 on every Linux filesystem.
constexpr size_t kMaxFileNameBytes = 250;

std::string errno_text(int error) { return std::strerror(error); }

[[noreturn]] void throw_io(const std::string& what, const std::filesystem::path& path, int error) {
  throw IoError(cat("FileStore: cannot ", what, " ", path.string(), ": ", errno_text(error)));
}

// Keys are arbitrary bytes ("job/allgather/0/3", "../x", "a\0b"); file names
// are not. Letters, digits, '-' and '_' stay readable; every other byte,
// including '/' and '.', becomes %XX, so no key can name a path outside the
// directory, a hidden file or another key's file.
std::string file_name_for(const std::string& key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string name = "k_";
  for (unsigned char c : key) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                 c == '_';
    if (plain) {
      name += static_cast<char>(c);
    } else {
      name += '%';
      name += kHex[c >> 4];
      name += kHex[c & 0xF];
    }
  }
  if (name.size() > kMaxFileNameBytes) {
    throw InvalidArgument(cat("FileStore: key of ", key.size(), " bytes is too long (its file name would be ",
                              name.size(), " bytes; the limit is ", kMaxFileNameBytes, ")"));
  }
  return name;
}

// Unique among processes (pid), threads (counter) and hosts sharing the
// directory (random tag), so concurrent set()s never write the same temporary.
std::string temporary_name() {
  static const uint64_t host_tag = std::random_device{}() ^ (uint64_t{std::random_device{}()} << 32);
  static std::atomic<uint64_t> counter{0};
  return cat(".tmp.", ::getpid(), ".", host_tag, ".", counter.fetch_add(1));
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// The value in `path`, or nullopt if there is no such file.
std::optional<std::vector<std::byte>> read_file(const std::filesystem::path& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw_io("open", path, errno);
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw_io("stat", path, errno);
  // rename() swaps whole files, so the inode we opened never changes size under us.
  std::vector<std::byte> value(static_cast<size_t>(info.st_size));
  size_t done = 0;
  while (done < value.size()) {
    ssize_t n = ::read(fd.get(), value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_io("read", path, errno);
    if (n == 0) throw IoError(cat("FileStore: ", path.string(), " ended after ", done, " of ", value.size(), " bytes"));
    done += static_cast<size_t>(n);
  }
  return value;
}

bool file_exists(const std::filesystem::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) return true;
  if (errno == ENOENT) return false;
  throw_io("stat", path, errno);
}

// Writes a temporary next to `final_path` and renames it over: atomic for readers.
void write_file_atomically(const std::filesystem::path& directory, const std::filesystem::path& final_path,
                           std::span<const std::byte> value) {
  std::filesystem::path temporary = directory / temporary_name();
  int raw = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (raw < 0) throw_io("create", temporary, errno);
  {
    FileDescriptor fd(raw);
    size_t done = 0;
    while (done < value.size()) {
      ssize_t n = ::write(fd.get(), value.data() + done, value.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int error = errno;
        ::unlink(temporary.c_str());
        throw_io("write", temporary, error);
      }
      done += static_cast<size_t>(n);
    }
  }
  if (::rename(temporary.c_str(), final_path.c_str()) != 0) {
    int error = errno;
    ::unlink(temporary.c_str());
    throw_io("rename a temporary file to", final_path, error);
  }
}

// Polls `ready` with a backoff from 1 ms to 20 ms: quick for keys that appear
// at once, gentle on a shared filesystem for keys that take seconds.
template <class Ready>
bool poll_until(Deadline deadline, Ready ready) {
  auto backoff = std::chrono::milliseconds(1);
  while (true) {
    if (ready()) return true;
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(backoff, deadline.remaining() + std::chrono::milliseconds(1)));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(20));
  }
}

}  // namespace

FileStore::FileStore(std::filesystem::path directory) : directory_(std::move(directory)) {
  std::error_code error;
  // The directory this call makes is the job user's alone (the parents it
  // makes follow the umask): keys hold the ranks' addresses.
  const bool existed = std::filesystem::exists(directory_, error);
  std::filesystem::create_directories(directory_, error);
  if (error && error != std::errc::file_exists) {
    throw IoError(cat("FileStore: cannot create directory ", directory_.string(), ": ", error.message()));
  }
  if (!std::filesystem::is_directory(directory_, error)) {
    throw IoError(cat("FileStore: ", directory_.string(), " is not a directory",
                      error ? ": " + error.message() : std::string()));
  }
  if (!existed) ::chmod(directory_.c_str(), 0700);
  refuse_foreign_directory();
}

// Whoever can write the directory can forge the job's keys (addresses,
// abort records) and, for a file store, nothing proves a writer is a rank.
// A directory made beforehand by another user (a name in /tmp taken before
// the job starts) or one every user may write is therefore refused.
void FileStore::refuse_foreign_directory() const {
  struct stat info {};
  if (::stat(directory_.c_str(), &info) != 0) throw_io("stat", directory_, errno);
  const uid_t mine = ::geteuid();
  if (info.st_uid != mine)
    throw IoError(cat("FileStore: ", directory_.string(), " belongs to uid ", info.st_uid, ", not to uid ", mine,
                      " that this job runs as: its owner could read and forge the job's keys. Use a directory of "
                      "this user's (file:// stores are not shared between users)"));
  if (info.st_mode & S_IWOTH) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(info.st_mode & 07777));
    throw IoError(cat("FileStore: ", directory_.string(), " may be written by every user (mode ", mode,
                      "): any of them could forge the job's keys. chmod o-w it, or use a directory of this user's"));
  }
}

FileStore::~FileStore() = default;

void FileStore::set(const std::string& key, std::span<const std::byte> value) {
  write_file_atomically(directory_, directory_ / file_name_for(key), value);
}

std::vector<std::byte> FileStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::filesystem::path path = directory_ / file_name_for(key);
  std::optional<std::vector<std::byte>> value;
  bool found = poll_until(store_detail::deadline_after(timeout), [&] {
    value = read_file(path);
    return value.has_value();
  });
  if (!found) store_detail::throw_key_timeout(cat("FileStore ", directory_.string()), {key}, timeout);
  return std::move(*value);
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::vector<std::filesystem::path> paths;
  for (const auto& key : keys) paths.push_back(directory_ / file_name_for(key));
  // Keys never seen yet; a key that appeared once is not re-checked.
  std::vector<size_t> pending(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) pending[i] = i;
  bool all = poll_until(store_detail::deadline_after(timeout), [&] {
    std::erase_if(pending, [&](size_t i) { return file_exists(paths[i]); });
    return pending.empty();
  });
  if (!all) {
    std::vector<std::string> missing;
    for (size_t i : pending) missing.push_back(keys[i]);
    store_detail::throw_key_timeout(cat("FileStore ", directory_.string()), missing, timeout);
  }
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  std::filesystem::path path = directory_ / file_name_for(key);
  std::filesystem::path lock_path = directory_ / ".lock";
  // One lock file for the directory: adds are rare, and one lock cannot deadlock.
  FileDescriptor lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
  if (lock.get() < 0) throw_io("open lock file", lock_path, errno);
  while (::flock(lock.get(), LOCK_EX) != 0) {
    if (errno != EINTR) throw_io("lock", lock_path, errno);
  }
  auto current = read_file(path);
  int64_t sum = store_detail::add_to_counter(cat("FileStore ", directory_.string()), key,
                                             current ? &*current : nullptr, delta);
  write_file_atomically(directory_, path, store_detail::format_counter(sum));
  return sum;  // closing the descriptor releases the lock
}

bool FileStore::remove(const std::string& key) {
  std::filesystem::path path = directory_ / file_name_for(key);
  if (::unlink(path.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  throw_io("remove", path, errno);
}

}  // namespace chorus
