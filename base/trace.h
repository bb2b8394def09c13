// A timeline per process in the Chrome trace format (the JSON array of
// events that chrome://tracing, Perfetto and speedscope read): CHORUS_TRACE
// names the file, and every Context of the process writes its collectives
// into it, one track (tid) per Context.
//
// Why the array format and not the object one: the closing bracket is
// optional there, so the file of a rank that was killed is still readable
// up to its last flush. Events are buffered and written in blocks (a
// collective of 8 bytes takes a few microseconds; a write per event would
// double that), flushed when a block fills, when a Context closes and when
// the process exits normally.
//
// Timestamps are wall-clock microseconds, not a per-process clock, so the
// files of ranks on one host line up when merged (tools/chorus-trace-merge),
// and those of several hosts to within their clock synchronisation.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

// Microseconds since the Unix epoch, from the real-time clock.
double trace_clock_us();

// The file a rank writes for CHORUS_TRACE=`path`: "{rank}" in the path is
// replaced by the rank; without it, ".rank<N>" goes before the extension
// ("trace.json" -> "trace.rank3.json").
std::string trace_path_for_rank(const std::string& path, int rank);

// The arguments of one event, as a JSON object built field by field.
class TraceArgs {
 public:
  TraceArgs() { fields_.reserve(192); }
  TraceArgs& add(std::string_view key, std::string_view value);
  TraceArgs& add(std::string_view key, const char* value) { return add(key, std::string_view(value)); }
  TraceArgs& add(std::string_view key, uint64_t value);
  TraceArgs& add(std::string_view key, int value);
  TraceArgs& add(std::string_view key, const std::vector<int>& values);
  // "error": the message of `error`, when there is one.
  TraceArgs& add_error(const std::exception_ptr& error);
  // Fields another TraceArgs made ("\"a\":1,\"b\":2"), e.g. cached.
  TraceArgs& add_fields(const std::string& fields);
  // "{...}"
  std::string json() const { return "{" + fields_ + "}"; }
  const std::string& fields() const { return fields_; }
  size_t size() const { return fields_.size(); }

 private:
  void key(std::string_view name);
  std::string fields_;
};

// `text` as a JSON string literal, quotes included.
std::string json_string(std::string_view text);

class TraceFile {
 public:
  // The trace file of this process for CHORUS_TRACE=`path`. The first Context
  // of the process to open it names it by its rank (the launcher's rank in
  // the usual case) and writes it; later Contexts of the process (splits,
  // PyTorch's other groups) share it, whatever their rank in their group, so
  // two processes never write one file. Throws IoError if the file cannot be
  // created.
  static std::shared_ptr<TraceFile> open(const std::string& path, int rank);
  ~TraceFile();
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;

  const std::string& file_name() const { return file_name_; }
  // A new track (a "thread" in the viewers) named `name`; returns its id.
  int add_track(const std::string& name);
  // A span of `duration_us` from `start_us` on `track` ("ph":"X").
  void span(int track, std::string_view name, std::string_view category, double start_us, double duration_us,
            const TraceArgs& args);
  // A span that may overlap others on its track (an async pair "b"/"e"),
  // identified by `id`: the steps of a Plan in flight together.
  void overlapping_span(int track, std::string_view name, std::string_view category, std::string_view id,
                        double start_us, double duration_us, const TraceArgs& args);
  // Writes what is buffered to the file.
  void flush();

 private:
  TraceFile(std::string file_name, int process_rank, int descriptor);
  void append(const std::string& event);  // with mutex_ held
  void write_out();                       // with mutex_ held
  void flush_if_stale(double now_us);     // with mutex_ held

  std::string file_name_;
  int process_rank_;
  int descriptor_;
  std::mutex mutex_;
  std::string buffer_;
  bool first_event_ = true;
  bool broken_ = false;  // a write failed: later events are dropped
  double last_write_us_ = 0;
  int next_track_ = 1;
};

}  // namespace chorus
