// The libchorus half of base/tls.h: finds and loads the OpenSSL module
// (libchorus_tls.so, base/tls_openssl.cc) on first use, and the parts of a
// session that only poll the socket and use the session's own calls.
#include "base/tls.h"

#include <dlfcn.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace chorus {
namespace {

struct TlsModule {
  TlsModuleEntry load = nullptr;
  std::string failure;  // why there is none
};

// The directory of the shared object (or program) that holds this code.
std::string directory_of_this_code() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&directory_of_this_code), &info) == 0 || !info.dli_fname) return {};
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

TlsModule load_module() {
  std::vector<std::string> candidates;
  if (const char* named = std::getenv("CHORUS_TLS_MODULE"); named && *named) {
    candidates.push_back(named);
  } else {
    if (std::string here = directory_of_this_code(); !here.empty()) candidates.push_back(here + "/" + kTlsModuleFile);
    candidates.push_back(std::string(CHORUS_INSTALLED_LIBDIR) + "/" + kTlsModuleFile);
  }
  TlsModule module;
  std::string tried;
  for (const std::string& path : candidates) {
    // RTLD_LOCAL: OpenSSL's symbols stay the module's, whatever else the program links.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      tried += cat(tried.empty() ? "" : "; ", why ? why : path);
      continue;
    }
    // Never closed: every context and session it makes runs its code.
    const auto version = reinterpret_cast<TlsModuleVersion>(::dlsym(handle, kTlsModuleVersion));
    const auto entry = reinterpret_cast<TlsModuleEntry>(::dlsym(handle, kTlsModuleEntry));
    if (!version || !entry) {
      tried += cat(tried.empty() ? "" : "; ", path, ": not a chorus TLS module");
      continue;
    }
    if (std::strcmp(version(), CHORUS_VERSION) != 0) {
      tried += cat(tried.empty() ? "" : "; ", path, ": built from chorus ", version(), ", this library is ",
                   CHORUS_VERSION);
      continue;
    }
    module.load = entry;
    return module;
  }
  module.failure = cat("TLS is configured (CHORUS_TLS_CERT, CHORUS_TLS_KEY, CHORUS_TLS_CA) but chorus's TLS module ",
                       kTlsModuleFile, " cannot be loaded (set CHORUS_TLS_MODULE to its path): ", tried);
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
