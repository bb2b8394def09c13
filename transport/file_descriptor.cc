// File descriptors for the transports.
#include "transport/file_descriptor.h"

#include <unistd.h>

#include <cstring>

#include "base/log.h"

namespace chorus::transport {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string errno_text(int error) {
  char buffer[256] = {};
  // GNU strerror_r may return a static string instead of filling the buffer.
  const char* text = strerror_r(error, buffer, sizeof(buffer));
  return text ? std::string(text) : cat("errno ", error);
}

}  // namespace chorus::transport
