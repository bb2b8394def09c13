// What travels in an abort frame: the class of the error that aborted a
// device, the rank it blamed, and its text, so the receiving rank fails with
// the same error class and a message that says who aborted and why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string_view>
#include <vector>

namespace chorus::transport::tcp {

// A complete abort frame (header + text) describing `error`.
std::vector<std::byte> encode_abort_frame(std::exception_ptr error);

// The error a rank adopts when peer_rank's abort frame arrives:
// "rank 3: peer rank 1 aborted: <its message>", of the class it carried.
std::exception_ptr decode_abort(uint64_t error_class, uint64_t blamed_rank, std::string_view text,
                                int my_rank, int peer_rank);

}  // namespace chorus::transport::tcp
