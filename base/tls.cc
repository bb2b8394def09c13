// The libchorus half of base/tls.h: finds and loads the OpenSSL module
// (libchorus_tls.so, base/tls_openssl.cc) on first use, and the parts of a
// session that only poll the socket and use the session's own calls.
#include "base/tls.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/module_loader.h"

namespace chorus {
namespace {

struct TlsModule {
  TlsModuleEntry load = nullptr;
  std::string failure;  // why there is none
};

TlsModule load_module() {
  TlsModule module;
  std::string why;
  const ModuleSymbols symbols{"TLS", kTlsModuleFile, "CHORUS_TLS_MODULE", kTlsModuleVersion, kTlsModuleEntry};
  module.load = reinterpret_cast<TlsModuleEntry>(load_module_entry(symbols, why));
  if (!module.load)
    module.failure = cat("TLS is configured (CHORUS_TLS_CERT, CHORUS_TLS_KEY, CHORUS_TLS_CA) but chorus's TLS module ",
                         why);
  return module;
}

std::string errno_text(int error) { return std::strerror(error); }

constexpr char kConfirmation[8] = {'c', 'h', 'o', 'r', 'u', 's', 'o', 'k'};

}  // namespace

std::shared_ptr<const TlsContext> TlsContext::load(const TlsFiles& files) {
  if (files.certificate.empty() || files.key.empty() || files.authority.empty())
    throw InvalidArgument("TLS needs CHORUS_TLS_CERT, CHORUS_TLS_KEY and CHORUS_TLS_CA all set");
  static const TlsModule module = load_module();
  if (!module.load) throw IoError(module.failure);
  std::string why;
  bool invalid_argument = false;
  TlsContext* loaded = module.load(files, why, invalid_argument);
  if (!loaded) {
    if (invalid_argument) throw InvalidArgument(why);
    throw IoError(why);
  }
  return std::shared_ptr<const TlsContext>(loaded);
}

std::unique_ptr<TlsSession> TlsContext::open(int fd, TlsRole role) const {
  std::string why;
  std::unique_ptr<TlsSession> session = make_session(fd, role, why);
  if (!session) throw IoError(why);
  return session;
}

std::string TlsSession::handshake_until(Deadline deadline) {
  while (true) {
    const Step step = handshake();
    if (step == Step::done) return {};
    if (step == Step::failed) return error();
    if (deadline.expired()) return "no TLS handshake before the deadline";
    pollfd entry{fd_, static_cast<short>(step == Step::want_read ? POLLIN : POLLOUT), 0};
    const auto wait = std::min<long long>(deadline.remaining().count() + 1, 60'000);
    if (::poll(&entry, 1, static_cast<int>(wait)) < 0 && errno != EINTR)
      return cat("TLS handshake: poll: ", errno_text(errno));
  }
}

bool TlsSession::send_confirmation() {
  return write(kConfirmation, sizeof(kConfirmation)) == sizeof(kConfirmation) && !unsent_output();
}

std::string TlsSession::await_confirmation(Deadline deadline) {
  char received[sizeof(kConfirmation)];
  size_t got = 0;
  while (got < sizeof(received)) {
    const ssize_t n = read(received + got, sizeof(received) - got);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return "the peer closed the connection after the TLS handshake (it refused this side's certificate?)";
    if (errno != EAGAIN && errno != EINTR) return error().empty() ? errno_text(errno) : error();
    if (deadline.expired()) return "no TLS confirmation before the deadline";
    pollfd entry{fd_, POLLIN, 0};
    const auto wait = std::min<long long>(deadline.remaining().count() + 1, 60'000);
    if (::poll(&entry, 1, static_cast<int>(wait)) < 0 && errno != EINTR)
      return cat("TLS confirmation: poll: ", errno_text(errno));
  }
  if (std::memcmp(received, kConfirmation, sizeof(received)) != 0) return "an invalid TLS confirmation";
  return "";
}

}  // namespace chorus
