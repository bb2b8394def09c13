// An abort report (transport/abort_report.h) in a TCP frame: the error class
// travels in the tag value, the blamed rank in the signature, the text as payload.
#include "transport/tcp/abort_frame.h"

#include <cstring>

#include "transport/abort_report.h"
#include "transport/tcp/frame.h"

namespace chorus::transport::tcp {

std::vector<std::byte> encode_abort_frame(std::exception_ptr error) {
  const AbortReport report = report_abort(std::move(error));
  FrameHeader header;
  header.kind = FrameKind::abort;
  header.tag_value = report.error_class;
  header.tag_signature = report.blamed_rank;
  header.payload_bytes = report.text.size();
  EncodedHeader encoded = encode_header(header);
  std::vector<std::byte> frame(kFrameHeaderBytes + report.text.size());
  std::memcpy(frame.data(), encoded.data(), kFrameHeaderBytes);
  if (!report.text.empty()) std::memcpy(frame.data() + kFrameHeaderBytes, report.text.data(), report.text.size());
  return frame;
}

}  // namespace chorus::transport::tcp
