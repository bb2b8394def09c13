// The buffer descriptor a cuda_ipc sender posts to its receiver
// (transport/cuda_ipc/descriptor.cc), which decides what the receiver maps
// and how much it copies out of the mapping: bytes a peer wrote.
//
// Checks: a descriptor is rejected only with IoError; one that decodes
// describes a message inside its allocation (the copy never reads past the
// mapping, whatever the sums), and encodes to bytes that decode to the same
// fields.
#include <cstring>

#include "fuzz/fuzz_common.h"
#include "transport/cuda_ipc/descriptor.h"

using namespace chorus;
using namespace chorus::fuzz;
using namespace chorus::transport::cuda_ipc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  IpcDescriptor decoded;
  const std::string kind = run_expecting_chorus_errors("decode_descriptor", [&] { decoded = decode_descriptor(bytes, 0, 1); });
  FUZZ_CHECK(kind.empty() || kind == "IoError", cat("decode_descriptor rejected a descriptor with ", kind));
  if (!kind.empty()) return 0;
  FUZZ_CHECK(decoded.offset <= decoded.allocation_bytes && decoded.length <= decoded.allocation_bytes - decoded.offset,
             cat("a descriptor of ", decoded.length, " bytes at ", decoded.offset, " in ", decoded.allocation_bytes,
                 " was accepted"));
  const IpcDescriptor again = decode_descriptor(encode_descriptor(decoded), 0, 1);
  FUZZ_CHECK(again.handle == decoded.handle && again.base == decoded.base && again.buffer_id == decoded.buffer_id &&
                 again.allocation_bytes == decoded.allocation_bytes && again.offset == decoded.offset &&
                 again.length == decoded.length,
             "a descriptor did not survive encoding");
  return 0;
}
