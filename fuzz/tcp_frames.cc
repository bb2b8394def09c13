// The TCP transport's receive path: frame headers, data/abort/goodbye
// dispatch, matching against posted receives and the unexpected-message
// queue (transport/tcp/pair.cc), fed through a real socket.
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
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "base/error.h"
#include "base/log.h"
#include "fuzz/fuzz_common.h"
#include "transport/abort_report.h"
#include "transport/tcp/abort_frame.h"
#include "transport/tcp/frame.h"
#include "transport/tcp/pair.h"

using namespace chorus;
using namespace chorus::fuzz;
using namespace chorus::transport;
using namespace chorus::transport::tcp;

namespace {

constexpr int kTags = 4;
constexpr size_t kMaxPayload = 2000;

Tag tag_number(int index, bool wrong_signature) {
  Tag tag;
  tag.group = index < 2 ? 0 : 0x5eed;
  tag.value = 1 + (index & 1);
  tag.signature = wrong_signature ? 0xbad : 100 + static_cast<uint64_t>(index);
  return tag;
}

class Owner final : public ConnectionOwner {
 public:
  int rank() const override { return 0; }
  bool failed() const override { return failure_ != nullptr; }
  std::exception_ptr failure() const override { return failure_; }
  void abort(std::exception_ptr reason, LogLevel) override {
    if (!failure_) failure_ = std::move(reason);
  }
  bool shutting_down() const override { return false; }
  void set_write_interest(Connection&, bool) override {}
  void stop_watching(Connection&) override {}
  std::string describe_signature(uint64_t signature) const override { return cat("signature ", signature); }
  size_t max_unexpected_bytes() const override { return size_t{1} << 30; }
  uint64_t position_in(uint64_t) const override { return 0; }
  ArrivalNotifier& arrivals() override { return arrivals_; }

  std::exception_ptr failure_;
  ArrivalNotifier arrivals_;
};

struct Receive {
  Request request;
  Tag tag;
  int tag_index = 0;
  size_t number = 0;  // of its tag
  std::vector<std::byte> buffer;
  bool checked = false;
};

struct Send {
  Request request;
  std::vector<std::byte> data;
};

// Little-endian field of a frame, read by hand (not with frame.h's helpers).
uint64_t field(const std::vector<std::byte>& bytes, size_t offset, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) value |= std::to_integer<uint64_t>(bytes[offset + i]) << (8 * i);
  return value;
}

std::vector<std::byte> pattern(size_t size, uint8_t seed) {
  std::vector<std::byte> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>(seed + i * 31 + (i >> 8));
  return bytes;
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
      check_receives();
    }
    read();
    react_to_failure();
    check_receives();
    check_completion();
    tear_down();
  }

 private:
  // ------------------------------------------------------------ steps

  void post_receive(ByteReader& in) {
    const int index = in.u8() % kTags;
    const bool wrong_signature = (in.u8() & 7) == 7;
    size_t size = in.u16() % (kMaxPayload + 1);
    auto& receive = receives_.emplace_back(std::make_unique<Receive>());
    receive->tag = tag_number(index, wrong_signature);
    receive->tag_index = index;
    receive->number = receives_of_[index]++;
    // Mostly the size of the message it will meet, so most pairs match.
    if (!wrong_signature && (size & 1) == 0 && receive->number < sent_[index].size())
      size = sent_[index][receive->number].size();
    receive->buffer.assign(size, std::byte{0xee});
    receive->request.attach(&signal_);
    const bool failed_before = owner_.failed();
    note_pairing(index, receive->number);
    connection_->post_recv(receive->request, receive->tag, receive->buffer);
    if (failed_before)
      FUZZ_CHECK(receive->request.finished(), "a receive posted after the failure is left pending");
  }

  void send_data_frame(ByteReader& in) {
    const int index = in.u8() % kTags;
    const bool wrong_signature = (in.u8() & 15) == 15;
    size_t size = in.u16() % (kMaxPayload + 1);
    // Mostly the size of the receive it will meet, so most pairs match.
    if ((size & 1) == 0)
      if (const Receive* receive = find_receive(index, sent_[index].size())) size = receive->buffer.size();
    const Tag tag = tag_number(index, wrong_signature);
    std::vector<std::byte> payload = pattern(size, in.u8());
    FrameHeader header;
    header.kind = FrameKind::data;
    header.tag_value = tag.value;
    header.tag_signature = tag.signature;
    header.tag_group = tag.group;
    header.payload_bytes = size;
    // Known to the model before the connection can read any of it.
    sent_[index].push_back(payload);
    sent_signatures_[index].push_back(tag.signature);
    note_pairing(index, sent_[index].size() - 1);
    write_frame(encode_header(header), payload);
  }

  // A header with every field from the input, and maybe a payload: the
  // hostile peer. From here on, nothing is promised about which bytes land where.
  void send_custom_header(ByteReader& in) {
    FrameHeader header;
    const uint8_t mutate = in.u8();
    if (mutate & 1) header.magic = in.u32();
    if (mutate & 2) header.version = in.u16();
    header.kind = static_cast<FrameKind>((mutate & 4) ? in.u16() : 1 + in.u8() % 3);
    const Tag tag = tag_number(in.u8() % kTags, false);
    header.tag_value = (mutate & 8) ? in.u64() : tag.value;
    header.tag_signature = (mutate & 16) ? in.u64() : tag.signature;
    header.tag_group = (mutate & 32) ? in.u64() : tag.group;
    header.payload_bytes = (mutate & 64) ? in.u64() : in.u16();
    const size_t follow = in.u16() % (kMaxPayload + 1);
    hostile_ = true;
    write_frame(encode_header(header), pattern(follow, mutate));
  }

  void send_raw(ByteReader& in) {
    auto bytes = in.bytes(in.u16() % 512);
    if (!bytes.empty()) hostile_ = true;
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
    if (!hostile_ && !abort_text_) abort_text_ = text.substr(0, text.find('\0'));
    allowed_failures_.insert(chorus_error_kind(adopt_abort(error_class, blamed, text, 0, 1), "adopt_abort"));
    write_frame(encode_header(header), std::as_bytes(std::span(text.data(), text.size())));
  }

  void send_goodbye() {
    FrameHeader header;
    header.kind = FrameKind::goodbye;
    // Receives left waiting (or posted later) fail as "closed its context".
    allowed_failures_.insert("IoError");
    goodbye_sent_ = true;
    write_frame(encode_header(header), {});
  }

  void read() {
    connection_->on_readable();
  }

  void post_send(ByteReader& in) {
    const int index = in.u8() % kTags;
    const size_t size = in.u16() % (kMaxPayload + 1);
    auto& send = sends_.emplace_back(std::make_unique<Send>());
    send->data = pattern(size, static_cast<uint8_t>(index));
    send->request.attach(&signal_);
    const Tag tag = tag_number(index, false);
    const bool failed_before = owner_.failed();
    connection_->post_send(send->request, tag, send->data);
    if (failed_before || owner_.failed()) {
      FUZZ_CHECK(send->request.finished(), "a send posted after the failure is left pending");
      return;
    }
    // Small frames fit in the socket: the send completes at once, and the
    // peer finds exactly one frame.
    FUZZ_CHECK(send->request.state() == Request::State::done,
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
    FUZZ_CHECK(size == 0 || std::memcmp(wire.data() + kFrameHeaderBytes, send->data.data(), size) == 0,
               "the frame's payload is not the send's data");
  }

  // ------------------------------------------------------------ the model

  // The i-th receive and the i-th message of a tag meet (both sides keep
  // their order per tag); a different size or signature is a mismatch.
  void note_pairing(int index, size_t number) {
    const auto& sent = sent_[index];
    if (number >= sent.size() || number >= receives_of_[index]) return;
    const Receive* receive = find_receive(index, number);
    if (!receive) return;
    if (receive->buffer.size() != sent[number].size() || receive->tag.signature != sent_signatures_[index][number])
      allowed_failures_.insert("MismatchError");
  }

  const Receive* find_receive(int index, size_t number) const {
    for (const auto& receive : receives_)
      if (receive->tag_index == index && receive->number == number) return receive.get();
    return nullptr;
  }

  void check_receives() {
    if (hostile_) return;
    for (const auto& receive : receives_) {
      if (receive->checked || receive->request.state() != Request::State::done) continue;
      receive->checked = true;
      const auto& sent = sent_[receive->tag_index];
      FUZZ_CHECK(receive->number < sent.size(),
                 cat("receive #", receive->number, " of tag ", receive->tag_index, " completed, but only ",
                     sent.size(), " messages of that tag were sent"));
      const auto& message = sent[receive->number];
      FUZZ_CHECK(receive->buffer.size() == message.size() &&
                     (message.empty() || std::memcmp(receive->buffer.data(), message.data(), message.size()) == 0),
                 cat("receive #", receive->number, " of tag ", receive->tag_index,
                     " completed with bytes other than its message's"));
    }
  }

  void check_completion() {
    if (hostile_ || owner_.failed() || goodbye_sent_) return;
    // Both sides of every pair are there now: a mismatch or an abort frame must have failed it.
    FUZZ_CHECK(allowed_failures_.empty(), "a failure was due but did not happen");
    for (const auto& receive : receives_) {
      if (receive->number >= sent_[receive->tag_index].size()) continue;
      FUZZ_CHECK(receive->request.state() == Request::State::done,
                 cat("receive #", receive->number, " of tag ", receive->tag_index,
                     " did not complete though its message was sent and the stream is sound"));
    }
  }

  // The device's part: on the first failure, fail everything and tell the peer.
  void react_to_failure() {
    if (!owner_.failed() || reacted_) return;
    reacted_ = true;
    const std::string kind = chorus_error_kind(owner_.failure(), "the connection's failure");
    if (!hostile_) {
      FUZZ_CHECK(allowed_failures_.count(kind),
                 cat("a sound stream failed with ", kind, ": ", error_text(owner_.failure())));
      if (abort_text_ && kind != "MismatchError" && kind != "IoError")
        FUZZ_CHECK(error_text(owner_.failure()).find(*abort_text_) != std::string::npos,
                   "the adopted abort lost the peer's text");
    }
    const std::vector<std::byte> frame = encode_abort_frame(owner_.failure());
    drain_peer();
    connection_->fail_everything(owner_.failure(), frame, Clock::now() + std::chrono::milliseconds(100));
    check_all_finished("after fail_everything");
    std::vector<std::byte> wire = drain_peer();
    if (wire.empty()) return;  // the peer said goodbye: nobody to tell
    FUZZ_CHECK(wire.size() >= kFrameHeaderBytes && field(wire, 6, 2) == 2 &&
                   field(wire, 24, 8) == wire.size() - kFrameHeaderBytes,
               "fail_everything did not send one abort frame");
    const std::string_view text(reinterpret_cast<const char*>(wire.data() + kFrameHeaderBytes),
                                wire.size() - kFrameHeaderBytes);
    FUZZ_CHECK(chorus_error_kind(adopt_abort(field(wire, 8, 8), field(wire, 16, 8), text, 1, 0), "abort frame") ==
                   (kind == "Error" ? "Aborted" : kind),
               "the abort frame does not carry the failure's class");
  }

  void check_all_finished(const char* when) {
    for (const auto& receive : receives_)
      FUZZ_CHECK(receive->request.finished(), cat("a receive is still pending ", when));
    for (const auto& send : sends_) FUZZ_CHECK(send->request.finished(), cat("a send is still pending ", when));
  }

  void tear_down() {
    drain_peer();
    peer_.reset();
    connection_->fail_everything(std::make_exception_ptr(Aborted("fuzz: tearing down")), {}, Clock::now());
    check_all_finished("after the final fail_everything");
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
  std::deque<std::unique_ptr<Receive>> receives_;
  std::deque<std::unique_ptr<Send>> sends_;
  std::map<int, std::vector<std::vector<std::byte>>> sent_;
  std::map<int, std::vector<uint64_t>> sent_signatures_;
  std::map<int, size_t> receives_of_;
  std::set<std::string> allowed_failures_;
  std::optional<std::string> abort_text_;
  bool hostile_ = false;
  bool goodbye_sent_ = false;
  bool reacted_ = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return run_script<Script>(data, size); }
