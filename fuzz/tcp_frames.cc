// The TCP transport's receive path: frame headers, data/abort/goodbye/probe/eager-window
// dispatch, matching against posted receives and the unexpected-message
// queue (transport/tcp/connection*.cc), fed through a real socket.
//
// A Connection (the real one) owns one end of a unix socketpair; the harness
// plays the peer on the other end. The input is a script of steps: post a
// receive, send a well-formed frame, send a frame header with fields from the
// input, send raw bytes, let the connection read, post a send. Reading
// happens when the script says so or when the socket is full, so frames are
// split across reads in every way.
//
// Checks, beyond the sanitizers:
// - every failure is a chorus::Error, and the connection then fails every
//   request it holds (none is left pending) and tells the peer with an abort
//   frame that decodes to the same error class;
// - while the peer has only sent well-formed frames, the i-th receive of a tag
//   gets the i-th message of that tag, byte for byte; the only failures are
//   the ones the peer's frames call for (a mismatched size or signature, an
//   abort frame, a goodbye); without those, every receive whose message was
//   sent completes;
// - a posted send puts exactly one well-formed frame on the wire.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include "base/error.h"
#include "base/log.h"
#include "fuzz/fuzz_common.h"
#include "fuzz/message_order.h"
#include "fuzz/recording_owner.h"
#include "transport/abort_report.h"
#include "transport/tcp/abort_frame.h"
#include "transport/tcp/frame.h"
#include "transport/tcp/connection.h"

using namespace chorus;
using namespace chorus::fuzz;
using namespace chorus::transport;
using namespace chorus::transport::tcp;

namespace {

constexpr size_t kMaxPayload = 2000;

class Owner final : public RecordingOwner<ConnectionOwner> {
 public:
  void set_write_interest(Connection&, bool) override {}
  void stop_watching(Connection&) override {}
};

// Little-endian field of a frame, read by hand (not with frame.h's helpers).
uint64_t field(const std::vector<std::byte>& bytes, size_t offset, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) value |= std::to_integer<uint64_t>(bytes[offset + i]) << (8 * i);
  return value;
}

class Script {
 public:
  Script() {
    int ends[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) != 0) fuzz_fail("socketpair");
    peer_ = Fd(ends[1]);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(0x7f000001);
    address.sin_port = htons(4242);
    connection_ = std::make_unique<Connection>(owner_, 1, 0,
                                               SocketAddress(reinterpret_cast<sockaddr*>(&address), sizeof(address)),
                                               AdmittedSocket{Fd(ends[0]), nullptr});
  }

  void run(ByteReader& in) {
    while (!in.empty()) {
      switch (in.u8() % 8) {
        case 0: post_receive(in); break;
        case 1: send_data_frame(in); break;
        case 2: send_custom_header(in); break;
        case 3: send_raw(in); break;
        case 4: send_abort_frame(in); break;
        case 5: send_goodbye(); break;
        case 6: read(); break;
        case 7: post_send(in); break;
      }
      react_to_failure();
      model_.check_receives();
    }
    read();
    react_to_failure();
    model_.check_receives();
    check_completion();
    tear_down();
  }

 private:
  // ------------------------------------------------------------ steps

  void post_receive(ByteReader& in) { model_.post_receive(in, signal_, *connection_, owner_.failed()); }

  void send_data_frame(ByteReader& in) {
    const ScriptMessage message = model_.next_message(in);
    FrameHeader header;
    header.kind = FrameKind::data;
    header.tag_value = message.tag.value;
    header.tag_signature = message.tag.signature;
    header.tag_group = message.tag.group;
    header.payload_bytes = message.payload.size();
    write_frame(encode_header(header), message.payload);
  }

  // A header with every field from the input, and maybe a payload: the
  // hostile peer. From here on, nothing is promised about which bytes land where.
  void send_custom_header(ByteReader& in) {
    FrameHeader header;
    const uint8_t mutate = in.u8();
    if (mutate & 1) header.magic = in.u32();
    if (mutate & 2) header.version = in.u16();
    header.kind = static_cast<FrameKind>((mutate & 4) ? in.u16() : 1 + in.u8() % 9);  // every kind frame.h knows
    const Tag tag = script_tag(in.u8() % kScriptTags, false);
    header.tag_value = (mutate & 8) ? in.u64() : tag.value;
    header.tag_signature = (mutate & 16) ? in.u64() : tag.signature;
    header.tag_group = (mutate & 32) ? in.u64() : tag.group;
    header.payload_bytes = (mutate & 64) ? in.u64() : in.u16();
    const size_t follow = in.u16() % (kMaxPayload + 1);
    model_.mark_hostile();
    write_frame(encode_header(header), byte_pattern(follow, mutate));
  }

  void send_raw(ByteReader& in) {
    auto bytes = in.bytes(in.u16() % 512);
    if (!bytes.empty()) model_.mark_hostile();
    write_bytes(bytes);
  }

  void send_abort_frame(ByteReader& in) {
    const uint64_t error_class = in.u8() % 7;
    const uint64_t blamed = (in.u8() & 1) ? ~uint64_t{0} : in.u8() % 4;
    const std::string text = in.short_text();
    FrameHeader header;
    header.kind = FrameKind::abort;
    header.tag_value = error_class;
    header.tag_signature = blamed;
    header.payload_bytes = text.size();
    // what() is a C string: the text only up to its first NUL can show.
    if (!model_.hostile() && !abort_text_) abort_text_ = text.substr(0, text.find('\0'));
    model_.allow_failure(chorus_error_kind(adopt_abort(error_class, blamed, text, 0, 1), "adopt_abort"));
    write_frame(encode_header(header), std::as_bytes(std::span(text.data(), text.size())));
  }

  void send_goodbye() {
    FrameHeader header;
    header.kind = FrameKind::goodbye;
    // Receives left waiting (or posted later) fail as "closed its context".
    model_.allow_failure("IoError");
    goodbye_sent_ = true;
    write_frame(encode_header(header), {});
  }

  void read() {
    connection_->on_readable();
  }

  void post_send(ByteReader& in) {
    const int index = in.u8() % kScriptTags;
    const size_t size = in.u16() % (kMaxPayload + 1);
    ScriptSend& send = model_.add_send(index, byte_pattern(size, static_cast<uint8_t>(index)), signal_);
    const Tag tag = send.tag;
    const bool failed_before = owner_.failed();
    connection_->post_send(send.request, tag, send.data);
    if (failed_before || owner_.failed()) {
      FUZZ_CHECK(send.request.finished(), "a send posted after the failure is left pending");
      return;
    }
    // Small frames fit in the socket: the send completes at once, and the
    // peer finds exactly one frame.
    FUZZ_CHECK(send.request.state() == Request::State::done,
               "a small send to a socket with room did not complete");
    std::vector<std::byte> wire = drain_peer_past_probe_answers();
    FUZZ_CHECK(wire.size() == kFrameHeaderBytes + size, cat("a send of ", size, " bytes put ", wire.size(),
                                                            " bytes on the wire"));
    FUZZ_CHECK(field(wire, 0, 4) == 0x46524843, "the frame's magic is not CHRF");
    FUZZ_CHECK(field(wire, 4, 2) == kWireVersion, "the frame's wire version is not this build's");
    FUZZ_CHECK(field(wire, 6, 2) == 1, "a send is not a data frame");
    FUZZ_CHECK(field(wire, 8, 8) == tag.value && field(wire, 16, 8) == tag.signature &&
                   field(wire, 24, 8) == size && field(wire, 32, 8) == tag.group,
               "the frame's tag or length is not the send's");
    FUZZ_CHECK(size == 0 || std::memcmp(wire.data() + kFrameHeaderBytes, send.data.data(), size) == 0,
               "the frame's payload is not the send's data");
  }

  // ------------------------------------------------------------ the checks

  void check_completion() {
    if (model_.hostile() || owner_.failed() || goodbye_sent_) return;
    // Both sides of every pair are there now: a mismatch or an abort frame must have failed it.
    FUZZ_CHECK(model_.allowed_failures().empty(), "a failure was due but did not happen");
    model_.check_sent_messages_received("stream");
  }

  // The device's part: on the first failure, fail everything and tell the peer.
  void react_to_failure() {
    if (!owner_.failed() || reacted_) return;
    reacted_ = true;
    const std::string kind = chorus_error_kind(owner_.failure(), "the connection's failure");
    model_.check_failure_allowed(kind, owner_.failure());
    if (!model_.hostile() && abort_text_ && kind != "MismatchError" && kind != "IoError")
      FUZZ_CHECK(error_text(owner_.failure()).find(*abort_text_) != std::string::npos,
                 "the adopted abort lost the peer's text");
    const std::vector<std::byte> frame = encode_abort_frame(owner_.failure());
    drain_peer();
    connection_->fail_everything(owner_.failure(), frame, Clock::now() + std::chrono::milliseconds(100));
    model_.check_all_finished("after fail_everything");
    std::vector<std::byte> wire = drain_peer();
    if (wire.empty()) return;  // the peer said goodbye: nobody to tell
    FUZZ_CHECK(wire.size() >= kFrameHeaderBytes && field(wire, 6, 2) == 2 &&
                   field(wire, 24, 8) == wire.size() - kFrameHeaderBytes,
               "fail_everything did not send one abort frame");
    const std::string_view text(reinterpret_cast<const char*>(wire.data() + kFrameHeaderBytes),
                                wire.size() - kFrameHeaderBytes);
    check_abort_class(kind, adopt_abort(field(wire, 8, 8), field(wire, 16, 8), text, 1, 0), "the abort frame");
  }

  void tear_down() {
    drain_peer();
    peer_.reset();
    connection_->fail_everything(std::make_exception_ptr(Aborted("fuzz: tearing down")), {}, Clock::now());
    model_.check_all_finished("after the final fail_everything");
    connection_->close_socket();
  }

  // ------------------------------------------------------------ the peer's socket

  void write_frame(const EncodedHeader& header, std::span<const std::byte> payload) {
    write_bytes(header);
    write_bytes(payload);
  }

  void write_bytes(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(peer_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n > 0) {
        bytes = bytes.subspan(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN && !owner_.failed()) {
        // Full: the connection must read to make room, as over a real network.
        read();
        react_to_failure();
        if (owner_.failed()) return;
        continue;
      }
      return;  // the connection stopped reading: the rest is lost, as it would be
    }
  }

  // What the peer finds after the probe answers the connection queued for
  // probes the input sent (it answers each as it reads it, so they come
  // first); each answer must be a whole, empty probe_answer frame.
  std::vector<std::byte> drain_peer_past_probe_answers() {
    std::vector<std::byte> wire = drain_peer();
    size_t offset = 0;
    while (wire.size() - offset >= kFrameHeaderBytes && field(wire, offset + 6, 2) == 5) {
      FUZZ_CHECK(field(wire, offset, 4) == 0x46524843 && field(wire, offset + 4, 2) == kWireVersion &&
                     field(wire, offset + 24, 8) == 0,
                 "a probe answer is not a whole, empty probe_answer frame");
      offset += kFrameHeaderBytes;
    }
    wire.erase(wire.begin(), wire.begin() + static_cast<std::ptrdiff_t>(offset));
    return wire;
  }

  std::vector<std::byte> drain_peer() {
    std::vector<std::byte> bytes;
    std::byte buffer[4096];
    while (true) {
      const ssize_t n = ::recv(peer_.get(), buffer, sizeof(buffer), MSG_DONTWAIT);
      if (n <= 0) break;
      bytes.insert(bytes.end(), buffer, buffer + n);
    }
    return bytes;
  }

  Owner owner_;
  CompletionSignal signal_;
  Fd peer_;
  std::unique_ptr<Connection> connection_;
  MessageOrderModel model_{kMaxPayload};
  std::optional<std::string> abort_text_;
  bool goodbye_sent_ = false;
  bool reacted_ = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return run_script<Script>(data, size); }
