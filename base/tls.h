// Optional TLS for the job's TCP connections (pairs and the TcpStore), on
// OpenSSL's libssl.
//
// libchorus does not link libssl: the OpenSSL code is a module of its own,
// libchorus_tls.so (base/tls_openssl.cc), loaded the first time a process
// asks for TLS. A job without TLS, most jobs, never maps libssl or
// libcrypto, which cost every rank process about 1 ms at exec
// (benchmarks/README.md, "Trust and survival"). TlsContext::load finds the
// module next to the library holding this code (libchorus.so, installed or
// in the build tree), else in the installed library directory; the
// environment variable CHORUS_TLS_MODULE names it instead (the tests whose
// programs link the layers statically set it).
//
// Trust model: every rank and every store holds a certificate and key
// (CHORUS_TLS_CERT, CHORUS_TLS_KEY) issued by the job's certificate authority
// (CHORUS_TLS_CA). Both ends of every connection present their certificate
// and check the other's chain against that authority; a peer without one
// the authority signed is refused. Host names are not checked: ranks dial
// addresses the store handed out, and the authority is what the job trusts.
// TLS 1.3 only, no session tickets (connections are made once per job).
//
// TLS runs after the job-secret handshake (job_secret.h) on the same socket,
// so bytes from a stranger never reach the TLS parser; it adds
// confidentiality and integrity to what follows, not a second admission rule.
//
// Sessions are non-blocking and thread-safe: a connection's reader and its
// writer call in from different threads, and each session serializes its
// calls into OpenSSL (an SSL object must not be used from two threads at once).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "base/deadline.h"

namespace chorus {

// The three files; all set or none.
struct TlsFiles {
  std::string certificate;  // PEM chain, leaf first
  std::string key;          // PEM private key of the leaf
  std::string authority;    // PEM certificate(s) of the job's CA
  bool configured() const { return !certificate.empty(); }
};

enum class TlsRole { client, server };

// One TLS connection over a connected non-blocking socket it does not own
// (destroy the session before closing the socket).
class TlsSession {
 public:
  virtual ~TlsSession() = default;
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // One non-blocking step of the handshake. On failed, error() says why
  // (OpenSSL's reasons, e.g. "certificate verify failed").
  enum class Step { done, want_read, want_write, failed };
  virtual Step handshake() = 0;
  // The whole handshake, polling the socket until `deadline`. Returns "" or why it failed.
  std::string handshake_until(Deadline deadline);

  // TLS 1.3 lets a client finish its handshake before the server has checked
  // the client's certificate, so a refused client would learn it only at its
  // first read. Instead the server, once its handshake is done, sends a
  // confirmation inside TLS and the client waits for it: both ends know at
  // connect whether the other accepted them. send_confirmation returns false
  // when a fresh socket did not take it (then it is broken).
  bool send_confirmation();
  // Client: "" once the confirmation arrived, else why not (the server's
  // alert, e.g. "tlsv13 alert certificate required").
  std::string await_confirmation(Deadline deadline);

  // Like recv/send on a non-blocking socket: bytes moved (> 0); 0 from read
  // at the end of the stream (a close_notify, or the socket closed without
  // one: the protocol above tells an orderly end from a lost peer); -1 with
  // errno EAGAIN, a socket error, or EPROTO for a TLS error (error() says which).
  virtual ssize_t read(void* data, size_t bytes) = 0;
  // Seals up to 128 KiB into records and sends what the socket takes; the
  // rest waits in the session (unsent_output()) and goes out first on the
  // next call. The bytes count as taken once sealed. EAGAIN when 256 KiB of
  // sealed records are still waiting for the socket.
  virtual ssize_t write(const void* data, size_t bytes) = 0;
  // Sends sealed records still waiting; 0 when none is left, else an errno (EAGAIN: the socket is full).
  virtual int flush() = 0;
  virtual bool unsent_output() const = 0;
  // Bytes already read off the socket (decrypted or not): readiness will not
  // announce them, so a reader must take them before it waits again.
  virtual bool buffered_input() const = 0;
  // Sends close_notify if the socket takes it now; never waits.
  virtual void close_notify() = 0;
  virtual std::string error() const = 0;

 protected:
  explicit TlsSession(int fd) : fd_(fd) {}
  const int fd_;
};

// A loaded certificate, key and authority, shared by every session of a process.
class TlsContext {
 public:
  // Loads the TLS module (above) and the files. Throws InvalidArgument
  // naming the variable, the file and OpenSSL's reason when a file cannot be
  // read, is not PEM, or the key does not match the certificate; IoError
  // naming where it looked when the module cannot be loaded.
  static std::shared_ptr<const TlsContext> load(const TlsFiles& files);
  virtual ~TlsContext() = default;
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // A session on `fd`. Throws IoError if OpenSSL cannot make one (memory).
  std::unique_ptr<TlsSession> open(int fd, TlsRole role) const;
  const TlsFiles& files() const { return files_; }

 protected:
  explicit TlsContext(TlsFiles files) : files_(std::move(files)) {}
  // nullptr with `why` set on failure; never throws (it runs in the module).
  virtual std::unique_ptr<TlsSession> make_session(int fd, TlsRole role, std::string& why) const noexcept = 0;

 private:
  TlsFiles files_;
};

// The module's entry point, looked up by name (kTlsModuleEntry): a loaded
// context, or nullptr with `why` set and `invalid_argument` telling a bad
// file (InvalidArgument) from a failure of OpenSSL itself (IoError). Never throws.
using TlsModuleEntry = TlsContext* (*)(const TlsFiles& files, std::string& why, bool& invalid_argument) noexcept;
inline constexpr const char* kTlsModuleEntry = "chorus_tls_load_context";
// Returns the chorus version the module was built from; it must be this library's.
using TlsModuleVersion = const char* (*)() noexcept;
inline constexpr const char* kTlsModuleVersion = "chorus_tls_module_version";
inline constexpr const char* kTlsModuleFile = "libchorus_tls.so";

}  // namespace chorus
