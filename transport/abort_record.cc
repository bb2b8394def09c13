// Abort reports to bytes and back, for the abort record in the store.
#include "transport/abort_record.h"

#include "base/little_endian.h"

namespace chorus::transport {

std::vector<std::byte> encode_abort_report(const AbortReport& report) {
  std::vector<std::byte> bytes(16 + report.text.size());
  store_le(bytes.data(), report.error_class, 8);
  store_le(bytes.data() + 8, report.blamed_rank, 8);
  for (size_t i = 0; i < report.text.size(); ++i) bytes[16 + i] = static_cast<std::byte>(report.text[i]);
  return bytes;
}

std::optional<AbortReport> decode_abort_report(std::span<const std::byte> bytes) {
  if (bytes.size() < 16 || bytes.size() - 16 > kMaxAbortTextBytes) return std::nullopt;
  AbortReport report;
  report.error_class = load_le(bytes.data(), 8);
  report.blamed_rank = load_le(bytes.data() + 8, 8);
  report.text.assign(reinterpret_cast<const char*>(bytes.data()) + 16, bytes.size() - 16);
  return report;
}

}  // namespace chorus::transport
