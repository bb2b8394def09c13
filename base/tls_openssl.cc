// libchorus_tls.so: the OpenSSL half of base/tls.h, a module libchorus
// loads only when a job asks for TLS (tls.h says why). It holds the
// TlsContext and TlsSession implementations and two C entry points; it uses
// only header-only parts of the base (errors, deadlines), so it needs
// nothing from the program that loads it.
#include "base/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace chorus {
namespace {

std::string errno_text(int error) { return std::strerror(error); }

// Plaintext one write() seals at most (eight 16 KiB records, one send()).
constexpr size_t kWriteChunkBytes = 128 * 1024;
// Sealed bytes the socket has not taken yet past which write() takes no more.
constexpr size_t kSealedHighWaterBytes = 256 * 1024;
// What one read from the socket may take with read-ahead: several records.
constexpr size_t kReadAheadBytes = 128 * 1024;

void initialize_openssl() {
  // Like job_secret.cc: no openssl.cnf, whose contents a library must not inherit.
  static const bool initialized = OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr) == 1;
  if (!initialized) throw IoError("OpenSSL's libssl failed to initialize");
}

// OpenSSL's queued reasons, most specific last, as one line.
std::string drain_errors() {
  std::string text;
  while (unsigned long code = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(code);
    if (!text.empty()) text += "; ";
    if (reason) {
      text += reason;
    } else {
      char number[48];
      std::snprintf(number, sizeof(number), "OpenSSL error 0x%lx", code);
      text += number;
    }
  }
  return text;
}

// What the session's BIO works on: reads come from the socket; writes are
// sealed records collected here, which the session sends itself, many
// records per send() (OpenSSL's socket BIO makes one write(2) per 16 KiB
// record, and with write(2) a closed socket raises SIGPIPE, which a library
// must not do to its process).
struct Wire {
  int fd;
  std::vector<std::byte> sealed;
  size_t sent = 0;     // of sealed
  int send_error = 0;  // sticky once the socket failed
  size_t pending() const { return sealed.size() - sent; }
};

int bio_write(BIO* bio, const char* data, size_t bytes, size_t* written) {
  auto& wire = *static_cast<Wire*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  const auto* from = reinterpret_cast<const std::byte*>(data);
  wire.sealed.insert(wire.sealed.end(), from, from + bytes);
  *written = bytes;
  return 1;
}

int bio_read(BIO* bio, char* data, size_t bytes, size_t* read) {
  const int fd = static_cast<Wire*>(BIO_get_data(bio))->fd;
  BIO_clear_retry_flags(bio);
  ssize_t n;
  do n = ::recv(fd, data, bytes, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(bio);
    return 0;
  }
  if (n == 0) errno = 0;  // the end of the stream, not an error
  *read = static_cast<size_t>(n);
  return n > 0 ? 1 : 0;
}

long bio_control(BIO*, int command, long, void*) {
  // The session sends what was sealed itself, after each call into OpenSSL.
  return command == BIO_CTRL_FLUSH ? 1 : 0;
}

BIO_METHOD* socket_method() {
  static BIO_METHOD* method = [] {
    BIO_METHOD* made = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "chorus socket");
    if (!made || !BIO_meth_set_write_ex(made, bio_write) || !BIO_meth_set_read_ex(made, bio_read) ||
        !BIO_meth_set_ctrl(made, bio_control))
      throw IoError("OpenSSL: cannot create a socket BIO method");
    return made;
  }();
  return method;
}

// ---------------------------------------------------------------- context

class OpensslContext final : public TlsContext {
 public:
  OpensslContext(SSL_CTX* context, const TlsFiles& files) : TlsContext(files), context_(context) {}
  ~OpensslContext() override { SSL_CTX_free(context_); }

 protected:
  std::unique_ptr<TlsSession> make_session(int fd, TlsRole role, std::string& why) const noexcept override;

 private:
  SSL_CTX* context_;
};

std::unique_ptr<OpensslContext> load_context(const TlsFiles& files) {
  initialize_openssl();
  if (files.certificate.empty() || files.key.empty() || files.authority.empty())
    throw InvalidArgument("TLS needs CHORUS_TLS_CERT, CHORUS_TLS_KEY and CHORUS_TLS_CA all set");
  ERR_clear_error();
  SSL_CTX* context = SSL_CTX_new(TLS_method());
  if (!context) throw IoError(cat("OpenSSL: cannot create a TLS context: ", drain_errors()));
  auto loaded = std::make_unique<OpensslContext>(context, files);
  auto refuse = [&](const char* variable, const std::string& file, const char* what) {
    return InvalidArgument(cat(variable, "='", file, "' ", what, ": ", drain_errors()));
  };
  if (SSL_CTX_use_certificate_chain_file(context, files.certificate.c_str()) != 1)
    throw refuse("CHORUS_TLS_CERT", files.certificate, "is not a readable PEM certificate chain");
  if (SSL_CTX_use_PrivateKey_file(context, files.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    // OpenSSL compares the key with the certificate as it loads it.
    const bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
    throw refuse("CHORUS_TLS_KEY", files.key,
                 mismatch ? cat("does not match CHORUS_TLS_CERT='", files.certificate, "'").c_str()
                          : "is not a readable PEM private key");
  }
  if (SSL_CTX_check_private_key(context) != 1)
    throw refuse("CHORUS_TLS_KEY", files.key, cat("does not match CHORUS_TLS_CERT='", files.certificate, "'").c_str());
  if (SSL_CTX_load_verify_file(context, files.authority.c_str()) != 1)
    throw refuse("CHORUS_TLS_CA", files.authority, "holds no readable PEM certificate");
  SSL_CTX_set_min_proto_version(context, TLS1_3_VERSION);
  SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  // Connections live as long as the job: nothing to resume.
  SSL_CTX_set_num_tickets(context, 0);
  SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);
  // Our frames say where a stream ends (a goodbye frame); an end without
  // close_notify is a lost peer, which the protocol above reports
  // (TlsSession::read returns 0 for it).
  // Reads take what the socket has (many records per recv), not a record
  // header and then its body: half the system calls. The bytes it holds
  // back are what buffered_input() reports.
  SSL_CTX_set_read_ahead(context, 1);
  SSL_CTX_set_default_read_buffer_len(context, kReadAheadBytes);
  return loaded;
}

class OpensslSession final : public TlsSession {
 public:
  OpensslSession(SSL* ssl, int fd, TlsRole role);
  ~OpensslSession() override { SSL_free(ssl_); }
  Step handshake() override;
  ssize_t read(void* data, size_t bytes) override;
  ssize_t write(const void* data, size_t bytes) override;
  int flush() override;
  bool unsent_output() const override;
  bool buffered_input() const override;
  void close_notify() override;
  std::string error() const override;

 private:
  int fail(int ssl_result, const char* doing);  // sets error_, returns an errno
  // 0 once every sealed byte went out; EAGAIN, or the socket's errno (sticky).
  int send_sealed_locked();

  mutable std::mutex mutex_;
  Wire wire_;
  SSL* ssl_;
  std::string error_;
};

// ---------------------------------------------------------------- session

OpensslSession::OpensslSession(SSL* ssl, int fd, TlsRole role) : TlsSession(fd), ssl_(ssl) {
  wire_.fd = fd;
  // The BIO is made by make_session, which hands it over with the SSL.
  BIO* bio = SSL_get_rbio(ssl_);
  BIO_set_data(bio, &wire_);
  BIO_set_init(bio, 1);
  if (role == TlsRole::client) SSL_set_connect_state(ssl_);
  else SSL_set_accept_state(ssl_);
}

std::unique_ptr<TlsSession> OpensslContext::make_session(int fd, TlsRole role, std::string& why) const noexcept {
  try {
    ERR_clear_error();
    SSL* ssl = SSL_new(context_);
    BIO* bio = ssl ? BIO_new(socket_method()) : nullptr;
    if (!bio) {
      SSL_free(ssl);
      why = cat("OpenSSL: cannot create a TLS session: ", drain_errors());
      return nullptr;
    }
    SSL_set_bio(ssl, bio, bio);
    return std::make_unique<OpensslSession>(ssl, fd, role);
  } catch (const std::exception& error) {
    why = error.what();
    return nullptr;
  }
}

int OpensslSession::send_sealed_locked() {
  Wire& wire = wire_;
  if (wire.send_error != 0) return wire.send_error;
  while (wire.pending() > 0) {
    const ssize_t n = ::send(wire.fd, wire.sealed.data() + wire.sent, wire.pending(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      wire.sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return EAGAIN;
    wire.send_error = n < 0 ? errno : EPIPE;
    error_ = cat("TLS write: ", errno_text(wire.send_error));
    return wire.send_error;
  }
  wire.sealed.clear();  // keeps its capacity for the next records
  wire.sent = 0;
  return 0;
}

int OpensslSession::fail(int ssl_result, const char* doing) {
  const int saved_errno = errno;
  const int code = SSL_get_error(ssl_, ssl_result);
  switch (code) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      return EAGAIN;
    case SSL_ERROR_SYSCALL:
      ERR_clear_error();
      error_ = cat("TLS ", doing, ": ", saved_errno != 0 ? errno_text(saved_errno) : "the connection closed");
      return saved_errno != 0 ? saved_errno : EPIPE;
    case SSL_ERROR_ZERO_RETURN:
      error_ = cat("TLS ", doing, ": the peer closed the session");
      return EPIPE;
    default: {
      std::string reasons = drain_errors();
      const long verify = SSL_get_verify_result(ssl_);
      if (verify != X509_V_OK)
        reasons += cat(reasons.empty() ? "" : " (", "the peer's certificate: ",
                       X509_verify_cert_error_string(verify), reasons.empty() ? "" : ")");
      error_ = cat("TLS ", doing, ": ", reasons.empty() ? "protocol error" : reasons);
      return EPROTO;
    }
  }
}

TlsSession::Step OpensslSession::handshake() {
  std::lock_guard<std::mutex> lock(mutex_);
  int sending = send_sealed_locked();
  if (sending == EAGAIN) return Step::want_write;
  if (sending != 0) return Step::failed;
  ERR_clear_error();
  const int result = SSL_do_handshake(ssl_);
  const int code = result == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl_, result);
  Step step = Step::failed;
  if (result == 1) step = Step::done;
  else if (code == SSL_ERROR_WANT_READ) step = Step::want_read;
  else if (code == SSL_ERROR_WANT_WRITE) step = Step::want_write;
  else fail(result, "handshake");
  // What it sealed (its next flight, or the alert that says why it failed) goes out now.
  sending = send_sealed_locked();
  if (step == Step::failed) return step;
  if (sending == EAGAIN) return Step::want_write;
  if (sending != 0) return Step::failed;
  return step;
}

ssize_t OpensslSession::read(void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  ERR_clear_error();
  size_t got = 0;
  const int result = SSL_read_ex(ssl_, data, std::min<size_t>(bytes, INT_MAX), &got);
  const int saved_errno = errno;
  // Reading may seal something to send (an alert); it goes out best-effort.
  if (wire_.pending() > 0) send_sealed_locked();
  if (result == 1) return static_cast<ssize_t>(got);
  const int code = SSL_get_error(ssl_, 0);
  // The socket's end without close_notify comes as a "system call" error
  // with no errno (our BIO answers no BIO_CTRL_EOF): the end of the stream.
  if (code == SSL_ERROR_ZERO_RETURN || (code == SSL_ERROR_SYSCALL && saved_errno == 0)) return 0;
  errno = saved_errno;
  errno = fail(0, "read");
  return -1;
}

int OpensslSession::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  return send_sealed_locked();
}

ssize_t OpensslSession::write(const void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int sending = send_sealed_locked();
  if (sending != 0 && sending != EAGAIN) {
    errno = sending;
    return -1;
  }
  if (wire_.pending() >= kSealedHighWaterBytes) {
    errno = EAGAIN;
    return -1;
  }
  const size_t chunk = std::min(bytes, kWriteChunkBytes);
  ERR_clear_error();
  size_t written = 0;
  // The BIO never refuses a record, so this seals the whole chunk or fails for good.
  if (SSL_write_ex(ssl_, data, chunk, &written) != 1) {
    errno = fail(0, "write");
    return -1;
  }
  // A socket error here shows at the next call, or at flush().
  send_sealed_locked();
  return static_cast<ssize_t>(written);
}

bool OpensslSession::unsent_output() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return wire_.pending() > 0;
}

bool OpensslSession::buffered_input() const {
  std::lock_guard<std::mutex> lock(mutex_);
  // Decrypted bytes, and with read-ahead whole records not yet decrypted.
  return SSL_has_pending(ssl_) == 1;
}

void OpensslSession::close_notify() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!SSL_is_init_finished(ssl_) || wire_.send_error != 0) return;
  ERR_clear_error();
  SSL_shutdown(ssl_);
  ERR_clear_error();
  send_sealed_locked();
}

std::string OpensslSession::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

}  // namespace
}  // namespace chorus

extern "C" __attribute__((visibility("default"))) chorus::TlsContext* chorus_tls_load_context(
    const chorus::TlsFiles& files, std::string& why, bool& invalid_argument) noexcept {
  try {
    return chorus::load_context(files).release();
  } catch (const chorus::InvalidArgument& error) {
    why = error.what();
    invalid_argument = true;
  } catch (const std::exception& error) {
    why = error.what();
    invalid_argument = false;
  }
  return nullptr;
}

extern "C" __attribute__((visibility("default"))) const char* chorus_tls_module_version() noexcept {
  return CHORUS_VERSION;
}
