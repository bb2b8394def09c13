// Copies one rank's output stream to the launcher's own stdout or stderr with
// "[rank 3] " before every line, so the interleaved output of many ranks
// still says who wrote what; chorus's own log lines of that rank already
// say it and pass as they are.
#pragma once

#include <span>
#include <string>

namespace chorus::tools {

class PrefixedLineWriter {
 public:
  PrefixedLineWriter(int rank, int destination_fd);
  // Writes every complete line in pending + bytes; keeps the unfinished tail.
  void feed(std::span<const char> bytes);
  // Writes an unfinished last line, ending it with a newline.
  void finish();

 private:
  void write_line(std::string_view line_without_newline);
  std::string prefix_;
  std::string own_log_tag_;
  int destination_fd_;
  std::string pending_;
};

}  // namespace chorus::tools
