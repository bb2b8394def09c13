// The unix socket beside each shared segment. It carries the handshake (and
// with it, by SCM_RIGHTS, the segment's memfd and each side's doorbell
// eventfd), then stays open for as long as the pair lives: the kernel closes
// it when a process dies however it dies, so its end of stream is how a
// rank learns at once that a shared-memory peer vanished without a word. It
// also carries the goodbye of an orderly close and an abort's reason.
//
// The socket is SOCK_SEQPACKET (every message arrives whole or not at all)
// and the listener's name is abstract (nothing in the filesystem to leave
// behind). SO_PEERCRED tells each side the other's pid and uid, which must
// match what the peer published: a process that merely finds the socket
// cannot pass for a rank. Every message is checked before it is used.
//
// The handshake: the listener sends a fresh challenge on accept; the hello
// carries the dialer's own challenge and a proof of the job secret over the
// listener's challenge and the hello (base/job_secret.h); the ack a proof
// over both challenges, the hello and the ack; the confirm closes it. The
// segment and the listener's doorbell travel only with the ack, after the
// dialer proved itself.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "base/job_secret.h"
#include "transport/file_descriptor.h"
#include "transport/knock.h"

namespace chorus::transport::shm {

enum class SideKind : uint16_t {
  hello = 1, ack = 2, confirm = 3, goodbye = 4, abort = 5, challenge = 6,
  probe = 7, probe_answer = 8,  // liveness (Pair::send_liveness_probe): a number and a group, echoed with a position
};

// Every side message starts with this.
struct SideHeader {
  uint32_t magic = 0;
  uint16_t version = 0;
  SideKind kind = SideKind::hello;
};

struct Hello {            // dialer -> listener, with the dialer's doorbell
  uint64_t listener_nonce = 0;
  int32_t dialer_rank = -1;
  int32_t listener_rank = -1;
  uint64_t probe_address = 0;   // 8 bytes of the dialer the listener may try to read
  uint64_t probe_value = 0;
  Challenge dialer_challenge{};
};
struct Ack {              // listener -> dialer, with the segment and the listener's doorbell
  int32_t listener_rank = -1;
  int32_t dialer_rank = -1;
  uint64_t ring_bytes = 0;
  uint64_t probe_address = 0;
  uint64_t probe_value = 0;
  uint8_t listener_pulls = 0;   // the listener can copy out of the dialer's memory
};
struct Confirm {          // dialer -> listener
  uint8_t dialer_pulls = 0;     // the dialer can copy out of the listener's memory
};
struct AbortNote {
  uint64_t error_class = 0;
  uint64_t blamed_rank = 0;
  std::string text;
};

inline constexpr size_t kMaxSideMessage = 64 * 1024 + 64;

std::vector<std::byte> encode_challenge(const Challenge& challenge);
std::vector<std::byte> encode_hello(const Hello& hello);
std::vector<std::byte> encode_ack(const Ack& ack);
std::vector<std::byte> encode_confirm(const Confirm& confirm);
std::vector<std::byte> encode_goodbye();
// A probe asks where the peer is in `group`; the answer echoes number and
// group and says (transport/positions.h). Probes carry position 0.
struct ProbeNote {
  uint64_t number = 0;
  uint64_t group = 0;
  uint64_t position = 0;
};
std::vector<std::byte> encode_probe(SideKind kind, const ProbeNote& note);  // probe or probe_answer
std::vector<std::byte> encode_abort(const AbortNote& note);

// The kind of a side message, or an empty string (and `kind` set) when it is
// well-formed; else why not.
std::string check_side_message(std::span<const std::byte> message, SideKind& kind);
// Decoders for a message check_side_message accepted with that kind; they
// return why not when the body is malformed.
std::string decode_challenge(std::span<const std::byte> message, Challenge& challenge);
std::string decode_hello(std::span<const std::byte> message, Hello& hello);
std::string decode_ack(std::span<const std::byte> message, Ack& ack);
std::string decode_confirm(std::span<const std::byte> message, Confirm& confirm);
std::string decode_abort(std::span<const std::byte> message, AbortNote& note);
std::string decode_probe(std::span<const std::byte> message, ProbeNote& note);

// The hello and the ack end in a proof (see above). sign_side_message
// appends it, made over `context` and the message; verify_side_message checks
// it and returns the message without it in `body`, or why not.
inline constexpr std::string_view kShmHelloPurpose = "chorus shm hello";
inline constexpr std::string_view kShmAckPurpose = "chorus shm ack";
void sign_side_message(std::vector<std::byte>& message, const JobSecret& secret, std::string_view purpose,
                       std::initializer_list<std::span<const std::byte>> context);
std::string verify_side_message(std::span<const std::byte> message, const JobSecret& secret,
                                std::string_view purpose, std::initializer_list<std::span<const std::byte>> context,
                                std::span<const std::byte>& body);

// Listens on an abstract name ("\0..."); non-blocking. Throws IoError.
Fd listen_on(const std::string& abstract_name, int rank);
// Connects to an abstract name, retrying while nobody listens yet, until the
// deadline. Returns a blocking socket. Throws IoError or TimeoutError.
Fd dial(const std::string& abstract_name, int rank, int peer_rank, Deadline deadline);
// transport/knock.h on a peer's listener socket, for a rank waiting for it to dial.
KnockAnswer knock_listener(const std::string& abstract_name, std::chrono::milliseconds window);

struct Credentials {
  pid_t pid = 0;
  uid_t uid = 0;
};
// The peer's pid and uid as the kernel saw them at connect.
bool peer_credentials(int fd, Credentials& credentials);

// One message and up to `max_fds` descriptors. send_side returns 0 or an
// errno; receive_side returns the message's length, 0 at end of stream, -1
// with errno set (EAGAIN on a non-blocking socket with nothing to read).
// Descriptors a message carries beyond `max_fds` are closed, not leaked.
int send_side(int fd, std::span<const std::byte> message, std::span<const int> fds = {});
ssize_t receive_side(int fd, std::vector<std::byte>& message, std::vector<Fd>& fds, size_t max_fds);
// Waits until the socket is readable or the deadline passes; false on timeout.
bool wait_readable(int fd, Deadline deadline);

}  // namespace chorus::transport::shm
