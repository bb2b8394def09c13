// The rules of a call (call_rules.h).
#include "algorithms/model/call_rules.h"

#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

std::string type_problem(int rank, std::string_view collective, DataType type) {
  if (type_known(type)) return {};
  return cat("rank ", rank, ": ", collective, " got an unknown data type (", static_cast<unsigned>(type), ")");
}

std::string reduction_problem(int rank, std::string_view collective, DataType type, ReduceOp op) {
  if (reduction_holds(type, op)) return {};
  if (std::string problem = type_problem(rank, collective, type); !problem.empty()) return problem;
  if (static_cast<unsigned>(op) > static_cast<unsigned>(ReduceOp::bxor))
    return cat("rank ", rank, ": ", collective, " got an unknown reduce op (", static_cast<unsigned>(op), ")");
  try {
    validate_reduction(type, op);
  } catch (const InvalidArgument& error) {
    return cat("rank ", rank, ": ", collective, ": ", error.what());
  }
  return {};
}

std::string bytes_problem(int rank, std::string_view collective, size_t count, DataType type) {
  if (bytes_fit(count, type)) return {};
  return cat("rank ", rank, ": ", collective, " count ", count, " of ", to_string(type), " overflows size_t bytes");
}

std::string null_buffer_problem(int rank, std::string_view collective, std::string_view name, const void* buffer,
                                size_t count) {
  if (buffer_given(buffer, count)) return {};
  return cat("rank ", rank, ": ", collective, " got a null ", name, " buffer for ", count, " elements");
}

std::string root_problem(int rank, int size, std::string_view collective, int root) {
  if (root_in_range(root, size)) return {};
  return cat("rank ", rank, ": ", collective, " root ", root, " is out of range for a context of size ", size,
             " (expected 0..", size - 1, ")");
}

std::string counts_problem(int rank, int size, std::string_view collective, std::string_view name,
                           std::span<const size_t> counts, DataType type) {
  if (counts.size() != static_cast<size_t>(size))
    return cat("rank ", rank, ": ", collective, " ", name, " has ", counts.size(), " entries but the context has ",
               size, " ranks (expected one per rank)");
  size_t total = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > SIZE_MAX - total)
      return cat("rank ", rank, ": ", collective, " ", name, " sum overflows size_t at entry ", i);
    total += counts[i];
  }
  return bytes_problem(rank, collective, total, type);
}

}  // namespace chorus::algorithms
