// The Chrome trace writer: JSON text built by hand (the core links no JSON
// library), buffered, written with plain write(2).
#include "base/trace.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

#include "base/error.h"
#include "base/log.h"

namespace chorus {

namespace {

constexpr size_t kFlushBytes = size_t{64} << 10;
// A long job's file is readable while it runs: a block is written at least
// this often when events keep coming.
constexpr double kFlushIntervalUs = 1e6;

// Every trace file of the process, alive until exit: a Context that closes
// and a later one that opens the same CHORUS_TRACE keep writing one file
// (reopening would truncate it). At exit each is flushed, so a Context the
// program never closed still has its events on disk.
struct Registry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<TraceFile>> files;
  ~Registry() {
    for (auto& entry : files) entry.second->flush();
  }
};

Registry& registry() {
  static Registry instance;
  return instance;
}

// Microseconds to the nanosecond, without a stream (events are formatted on
// the collective's own thread: a stream per number would cost microseconds).
void append_number(std::string& out, double value) {
  char text[64];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value, std::chars_format::fixed, 3);
  out.append(text, error == std::errc() ? end : text);
}

void append_number(std::string& out, int value) {
  char text[16];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value);
  out.append(text, error == std::errc() ? end : text);
}

}  // namespace

double trace_clock_us() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()) / 1e3;
}

std::string trace_path_for_rank(const std::string& path, int rank) {
  const std::string rank_text = std::to_string(rank);
  const size_t placeholder = path.find("{rank}");
  if (placeholder != std::string::npos) {
    std::string expanded = path;
    expanded.replace(placeholder, 6, rank_text);
    return expanded;
  }
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == 0 ||
      (slash != std::string::npos && dot == slash + 1))
    return path + ".rank" + rank_text;
  return path.substr(0, dot) + ".rank" + rank_text + path.substr(dot);
}

std::string json_string(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

void TraceArgs::key(std::string_view name) {
  if (!fields_.empty()) fields_ += ',';
  fields_ += json_string(name);
  fields_ += ':';
}

TraceArgs& TraceArgs::add(std::string_view name, std::string_view value) {
  key(name);
  fields_ += json_string(value);
  return *this;
}

TraceArgs& TraceArgs::add(std::string_view name, uint64_t value) {
  key(name);
  fields_ += std::to_string(value);
  return *this;
}

TraceArgs& TraceArgs::add(std::string_view name, int value) {
  key(name);
  fields_ += std::to_string(value);
  return *this;
}

TraceArgs& TraceArgs::add(std::string_view name, const std::vector<int>& values) {
  key(name);
  fields_ += '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) fields_ += ',';
    fields_ += std::to_string(values[i]);
  }
  fields_ += ']';
  return *this;
}

TraceArgs& TraceArgs::add_fields(const std::string& fields) {
  if (fields.empty()) return *this;
  if (!fields_.empty()) fields_ += ',';
  fields_ += fields;
  return *this;
}

TraceArgs& TraceArgs::add_error(const std::exception_ptr& error) {
  if (!error) return *this;
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& failure) {
    return add("error", failure.what());
  } catch (...) {
    return add("error", "an exception that is not a std::exception");
  }
}

std::shared_ptr<TraceFile> TraceFile::open(const std::string& path, int rank) {
  Registry& files = registry();
  std::lock_guard<std::mutex> lock(files.mutex);
  auto found = files.files.find(path);
  if (found != files.files.end()) return found->second;
  const std::string file_name = trace_path_for_rank(path, rank);
  const int descriptor = ::open(file_name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (descriptor < 0)
    throw IoError(cat("rank ", rank, ": cannot create the trace file '", file_name, "' (CHORUS_TRACE='", path,
                      "'): ", std::strerror(errno)));
  std::shared_ptr<TraceFile> file(new TraceFile(file_name, rank, descriptor));
  files.files.emplace(path, file);
  return file;
}

TraceFile::TraceFile(std::string file_name, int process_rank, int descriptor)
    : file_name_(std::move(file_name)), process_rank_(process_rank), descriptor_(descriptor) {
  std::lock_guard<std::mutex> lock(mutex_);
  buffer_ = "[\n";
  append(cat("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", process_rank_, ",\"args\":{\"name\":",
             json_string(cat("rank ", process_rank_)), "}}"));
  append(cat("{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":", process_rank_, ",\"args\":{\"sort_index\":",
             process_rank_, "}}"));
  write_out();
}

TraceFile::~TraceFile() {
  std::lock_guard<std::mutex> lock(mutex_);
  buffer_ += "\n]\n";
  write_out();
  ::close(descriptor_);
}

int TraceFile::add_track(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int track = next_track_++;
  append(cat("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":", process_rank_, ",\"tid\":", track,
             ",\"args\":{\"name\":", json_string(name), "}}"));
  append(cat("{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":", process_rank_, ",\"tid\":", track,
             ",\"args\":{\"sort_index\":", track, "}}"));
  return track;
}

void TraceFile::span(int track, std::string_view name, std::string_view category, double start_us,
                     double duration_us, const TraceArgs& args) {
  std::string event;
  event.reserve(160 + args.size());
  event += "{\"name\":";
  event += json_string(name);
  event += ",\"cat\":";
  event += json_string(category);
  event += ",\"ph\":\"X\",\"pid\":";
  append_number(event, process_rank_);
  event += ",\"tid\":";
  append_number(event, track);
  event += ",\"ts\":";
  append_number(event, start_us);
  event += ",\"dur\":";
  append_number(event, duration_us);
  event += ",\"args\":{";
  event += args.fields();
  event += "}}";
  std::lock_guard<std::mutex> lock(mutex_);
  append(event);
  flush_if_stale(start_us + duration_us);
}

void TraceFile::overlapping_span(int track, std::string_view name, std::string_view category, std::string_view id,
                                 double start_us, double duration_us, const TraceArgs& args) {
  std::string common = "\"name\":" + json_string(name) + ",\"cat\":" + json_string(category) +
                       ",\"id\":" + json_string(id) + ",\"pid\":";
  append_number(common, process_rank_);
  common += ",\"tid\":";
  append_number(common, track);
  std::string begin = "{" + common + ",\"ph\":\"b\",\"ts\":";
  append_number(begin, start_us);
  begin += ",\"args\":" + args.json() + "}";
  std::string end = "{" + common + ",\"ph\":\"e\",\"ts\":";
  append_number(end, start_us + duration_us);
  end += "}";
  std::lock_guard<std::mutex> lock(mutex_);
  append(begin);
  append(end);
  flush_if_stale(start_us + duration_us);
}

void TraceFile::flush_if_stale(double now_us) {
  if (now_us - last_write_us_ > kFlushIntervalUs) write_out();
}

void TraceFile::append(const std::string& event) {
  if (!first_event_) buffer_ += ",\n";
  first_event_ = false;
  buffer_ += event;
  if (buffer_.size() >= kFlushBytes) write_out();
}

void TraceFile::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  write_out();
}

void TraceFile::write_out() {
  last_write_us_ = trace_clock_us();
  if (broken_) {
    buffer_.clear();
    return;
  }
  size_t written = 0;
  while (written < buffer_.size()) {
    const ssize_t result = ::write(descriptor_, buffer_.data() + written, buffer_.size() - written);
    if (result < 0 && errno == EINTR) continue;
    if (result <= 0) {
      // A full disk must not fail the collectives: the trace loses the rest.
      CHORUS_LOG(warn, process_rank_, "writing the trace file '", file_name_, "' failed (",
                 result < 0 ? std::strerror(errno) : "no progress", "); its later events are dropped");
      broken_ = true;
      break;
    }
    written += static_cast<size_t>(result);
  }
  buffer_.clear();
}

}  // namespace chorus
