// Optional TLS for the job's TCP connections (pairs and the TcpStore), on
// OpenSSL's libssl.
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
// writer call in from different threads, and every call into OpenSSL for one
// session holds that session's mutex (an SSL object must not be used from
// two threads at once).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/deadline.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace chorus {

// The three files; all set or none.
struct TlsFiles {
  std::string certificate;  // PEM chain, leaf first
  std::string key;          // PEM private key of the leaf
  std::string authority;    // PEM certificate(s) of the job's CA
  bool configured() const { return !certificate.empty(); }
};

// A loaded certificate, key and authority, shared by every session of a process.
class TlsContext {
 public:
  // Throws InvalidArgument naming the variable, the file and OpenSSL's reason
  // when a file cannot be read, is not PEM, or the key does not match the certificate.
  static std::shared_ptr<const TlsContext> load(const TlsFiles& files);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  SSL_CTX* native() const { return context_; }
  const TlsFiles& files() const { return files_; }

 private:
  TlsContext(SSL_CTX* context, TlsFiles files) : context_(context), files_(std::move(files)) {}
  SSL_CTX* context_;
  TlsFiles files_;
};

enum class TlsRole { client, server };

// One TLS connection over a connected non-blocking socket it does not own
// (destroy the session before closing the socket).
class TlsSession {
 public:
  TlsSession(const TlsContext& context, int fd, TlsRole role);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // One non-blocking step of the handshake. On failed, error() says why
  // (OpenSSL's reasons, e.g. "certificate verify failed").
  enum class Step { done, want_read, want_write, failed };
  Step handshake();
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
  ssize_t read(void* data, size_t bytes);
  // Seals up to 128 KiB into records and sends what the socket takes; the
  // rest waits in the session (unsent_output()) and goes out first on the
  // next call. The bytes count as taken once sealed. EAGAIN when 256 KiB of
  // sealed records are still waiting for the socket.
  ssize_t write(const void* data, size_t bytes);
  // Sends sealed records still waiting; 0 when none is left, else an errno (EAGAIN: the socket is full).
  int flush();
  bool unsent_output() const;
  // Bytes already read off the socket (decrypted or not): readiness will not
  // announce them, so a reader must take them before it waits again.
  bool buffered_input() const;
  // Sends close_notify if the socket takes it now; never waits.
  void close_notify();
  std::string error() const;

 private:
  int fail(int ssl_result, const char* doing);  // sets error_, returns an errno
  // 0 once every sealed byte went out; EAGAIN, or the socket's errno (sticky).
  int send_sealed_locked();

 public:
  struct Wire;  // the socket and the sealed records not sent yet (tls.cc)

 private:
  mutable std::mutex mutex_;
  std::unique_ptr<Wire> wire_;
  SSL* ssl_ = nullptr;
  int fd_;
  std::string error_;
};

}  // namespace chorus
