// The abort frame: what a TCP device sends its peers when it aborts (an
// abort report, transport/abort_report.h, in a frame).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <vector>

namespace chorus::transport::tcp {

// A complete abort frame (header + text) describing `error`.
std::vector<std::byte> encode_abort_frame(std::exception_ptr error);

}  // namespace chorus::transport::tcp
