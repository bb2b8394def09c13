// How much a tcp connection moves per system call and per turn of the
// progress thread: shared by its sending, receiving and closing code.
#pragma once

#include <cstddef>

namespace chorus::transport::tcp {

// Frames and small payloads are read through this buffer so one read syscall
// serves many small messages; large payloads bypass it (readv lands them in
// place and only the bytes after the payload's end come here).
inline constexpr size_t kStagingBytes = 256 * 1024;
// Linux moves at most ~2 GiB per call; smaller iovecs keep every call well-formed.
inline constexpr size_t kMaxIovBytes = size_t{1} << 30;
inline constexpr size_t kMaxIovecs = 64;
// Bytes read from one connection per readiness event before the progress
// thread looks at the others, so one streaming peer cannot starve the rest.
inline constexpr size_t kReadBudgetBytes = 16 * 1024 * 1024;
// A frame's header goes into one TLS record with up to this much of its
// payload (one record's worth), so a small message is one record.
inline constexpr size_t kTlsRecordBytes = 16 * 1024;

}  // namespace chorus::transport::tcp
