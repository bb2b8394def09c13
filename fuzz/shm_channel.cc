// The shared-memory transport's receive side (transport/shm/ring.cc's reader,
// transport/shm/connection*.cc): records a peer writes into the shared ring, the
// single-copy pull offers and their completions, and the side channel's
// goodbye and abort messages, fed to a real Connection over a real segment.
//
// The harness is the peer. It writes the incoming ring with a ring writer of
// its own (written from ring.h's description, not with RingWriter), reads
// the channel's outgoing ring with a reader of its own, and holds the other
// end of the side socket. The input is a script: post a receive, send a
// message (in records), offer one to pull, write a record with fields from
// the input, move the ring's head anywhere, send a side message, hang up the
// side socket, post a send, let the channel progress.
//
// Checks, beyond the sanitizers:
// - every failure is a chorus::Error; the channel then fails every request
//   it holds and tells the peer with an abort message of the same class;
// - while the peer plays by the rules, the i-th receive of a tag gets the
//   i-th message of that tag (eager or pulled), byte for byte, and the only
//   failures are the ones the peer asked for (mismatched size or signature,
//   a withdrawn pull, an abort, a goodbye with receives pending); without
//   them, every receive whose message was sent completes;
// - what the channel writes (its sends, its pull offers, its notes for
//   pulls it finished) follows ring.h's format and carries the sends' bytes.
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <set>

#include "fuzz/fuzz_common.h"
#include "fuzz/message_order.h"
#include "fuzz/recording_owner.h"
#include "transport/abort_report.h"
#include "transport/shm/connection.h"
#include "transport/shm/ring.h"
#include "transport/shm/segment.h"
#include "transport/shm/side_channel.h"

using namespace chorus;
using namespace chorus::fuzz;
using namespace chorus::transport;
using namespace chorus::transport::shm;

namespace {

constexpr size_t kRingBytes = 4096;
constexpr size_t kMaxMessage = 3000;
constexpr size_t kPullThreshold = 256;

size_t padded(size_t payload) { return kRecordHeaderBytes + (payload + 63) / 64 * 64; }

// Can this process read its own memory with process_vm_readv (a seccomp
// filter may forbid it)? If not, the channel is told it cannot pull.
bool pulls_work() {
  static const bool works = [] {
    uint64_t from = 42, to = 0;
    iovec local{&to, sizeof(to)}, remote{&from, sizeof(from)};
    return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == sizeof(to) && to == 42;
  }();
  return works;
}

class Owner final : public RecordingOwner<ConnectionOwner> {
 public:
  void work_pending() override {}
};

class Script {
 public:
  Script(bool we_pull, bool peer_pulls) : we_pull_(we_pull && pulls_work()) {
    Segment segment = Segment::create(kRingBytes, 0);
    // The channel listens: it writes direction 0 and reads direction 1.
    in_control_ = segment.control(1);
    in_ring_ = segment.ring(1);
    out_control_ = segment.control(0);
    out_ring_ = segment.ring(0);
    peer_offers_ = segment.pull_slots(1);
    our_offers_ = segment.pull_slots(0);
    int ends[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) != 0) fuzz_fail("socketpair");
    side_ = Fd(ends[1]);
    ConnectionSetup setup;
    setup.peer_rank = 1;
    setup.peer_pid = ::getpid();
    setup.side = Fd(ends[0]);
    setup.peer_doorbell = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    setup.segment = std::move(segment);
    setup.listener = true;
    setup.peer_pulls = peer_pulls;
    setup.we_pull = we_pull_;
    setup.pull_threshold = kPullThreshold;
    channel_ = std::make_unique<Connection>(owner_, std::move(setup));
  }

  void run(ByteReader& in) {
    while (!in.empty()) {
      switch (in.u8() % 11) {
        case 0: post_receive(in); break;
        case 1: send_message(in); break;
        case 2: offer_pull(in); break;
        case 3: write_custom_record(in); break;
        case 4: move_head(in); break;
        case 5: progress(); break;
        case 6: side_message(in); break;
        case 7: post_send(in); break;
        case 8: drain_outgoing(); break;
        case 9: pulled_note(in); break;
        case 10: hang_up_side(); break;
      }
      react_to_failure();
      model_.check_receives();
    }
    // Until nothing moves: the channel's queued sends need the peer to read.
    for (int i = 0; i < 1000; ++i) {
      const uint64_t before = out_tail_ + head_;
      progress();
      drain_outgoing();
      react_to_failure();
      if (out_tail_ + head_ == before && i > 2) break;
    }
    model_.check_receives();
    check_completion();
    tear_down();
  }

 private:
  // ------------------------------------------------------------ steps

  void post_receive(ByteReader& in) { model_.post_receive(in, signal_, *channel_, owner_.failed()); }

  void send_message(ByteReader& in) {
    const ScriptMessage message = model_.next_message(in);
    const Tag& tag = message.tag;
    const std::vector<std::byte>& payload = message.payload;
    const size_t size = payload.size();
    const size_t max_payload = kRingBytes / 4 - kRecordHeaderBytes;
    size_t written = 0;
    bool first = true;
    while (first || written < size) {
      const size_t chunk = std::min(max_payload, size - written);
      RecordHeader header;
      header.kind = first ? RecordKind::message : RecordKind::more;
      header.group = tag.group;
      header.value = tag.value;
      header.signature = tag.signature;
      header.total = size;
      header.length = chunk;
      if (!write_record(header, std::span(payload).subspan(written, chunk))) {
        model_.mark_hostile();  // the channel stopped reading mid-message: what it got is not a message
        break;
      }
      written += chunk;
      first = false;
    }
  }

  void offer_pull(ByteReader& in) {
    const int index = in.u8() % kScriptTags;
    const bool wrong_signature = (in.u8() & 15) == 15;
    const size_t size = model_.message_size(in, index);
    const uint8_t slot_byte = in.u8();
    const bool withdrawn = (in.u8() & 15) == 15;
    const Tag tag = script_tag(index, wrong_signature);
    auto& source = pull_sources_.emplace_back(byte_pattern(size, static_cast<uint8_t>(slot_byte + 7)));
    const uint32_t slot = slot_byte >= 250 ? slot_byte : slot_byte % kPullSlots;
    const uint64_t generation = next_generation_++;
    if (slot < kPullSlots) peer_offers_[slot].store(withdrawn ? 0 : generation, std::memory_order_release);
    PullOffer offer{reinterpret_cast<uint64_t>(source.data()), slot, 0, generation};
    RecordHeader header;
    header.kind = RecordKind::pull;
    header.group = tag.group;
    header.value = tag.value;
    header.signature = tag.signature;
    header.total = size;
    // A channel that cannot pull, a slot beyond the table, or two offers in
    // one slot (the second replaces the first's generation) break the rules.
    if (!we_pull_ || slot >= kPullSlots || !slots_in_use_.insert(slot).second) model_.mark_hostile();
    if (withdrawn) model_.allow_failure("IoError");
    model_.add_message(index, source, tag.signature);
    if (!write_record(header, std::as_bytes(std::span(&offer, 1)))) model_.mark_hostile();
  }

  void write_custom_record(ByteReader& in) {
    model_.mark_hostile();
    RecordHeader header;
    const uint8_t mutate = in.u8();
    header.kind = static_cast<RecordKind>((mutate & 1) ? in.u32() : 1 + in.u8() % 5);
    const Tag tag = script_tag(in.u8() % kScriptTags, false);
    header.group = tag.group;
    header.value = (mutate & 2) ? in.u64() : tag.value;
    header.signature = tag.signature;
    header.total = (mutate & 4) ? in.u64() : in.u16();
    header.argument = in.u64();
    auto payload = in.bytes(in.u16() % 1024);
    const uint64_t length = (mutate & 8) ? in.u64() : payload.size();
    const bool wrong_sequence = (mutate & 16) != 0;
    // Written by hand: the claimed length need not be the payload's.
    header.length = payload.size();
    if (!write_record(header, payload, wrong_sequence ? in.u64() : sequence_)) return;
    if (length != payload.size()) {
      // Rewrite the length field the reader sees.
      std::memcpy(in_ring_ + last_record_offset_ + offsetof(RecordHeader, length), &length, sizeof(length));
    }
  }

  void move_head(ByteReader& in) {
    model_.mark_hostile();
    const uint64_t head = (in.u8() & 1) ? in.u64() : head_ + in.u16();
    head_ = head;
    in_control_->head.store(head, std::memory_order_release);
  }

  void progress() {
    channel_->progress();
  }

  void side_message(ByteReader& in) {
    std::vector<std::byte> message;
    switch (in.u8() % 3) {
      case 0:
        message = encode_goodbye();
        model_.allow_failure("IoError");  // receives still pending fail as "closed its context"
        goodbye_sent_ = true;
        break;
      case 1: {
        AbortNote note;
        note.error_class = in.u8() % 7;
        note.blamed_rank = (in.u8() & 1) ? ~uint64_t{0} : in.u8() % 4;
        note.text = in.short_text();
        message = encode_abort(note);
        model_.allow_failure(
            chorus_error_kind(adopt_abort(note.error_class, note.blamed_rank, note.text, 0, 1), "adopt_abort"));
        break;
      }
      case 2: {
        auto raw = in.bytes(in.u8());
        message.assign(raw.begin(), raw.end());
        model_.mark_hostile();
        break;
      }
    }
    if (send_side(side_.get(), message) != 0) return;
    channel_->on_side_readable();
  }

  void hang_up_side() {
    if (!side_.valid()) return;
    side_.reset();
    if (!goodbye_sent_) model_.allow_failure("IoError");
    channel_->on_side_readable();
  }

  void post_send(ByteReader& in) {
    const int index = in.u8() % kScriptTags;
    std::vector<std::byte> data = byte_pattern(in.u16() % (kMaxMessage + 1), static_cast<uint8_t>(index + 3));
    ScriptSend& send = model_.add_send(index, std::move(data), signal_);
    const bool failed_before = owner_.failed();
    channel_->post_send(send.request, send.tag, send.data);
    if (failed_before) FUZZ_CHECK(send.request.finished(), "a send posted after the failure is left pending");
    else pending_sends_.push_back(&send);
    drain_outgoing();
  }

  void pulled_note(ByteReader& in) {
    model_.mark_hostile();
    PulledNote note{};
    note.slot = in.u8() % 70;
    note.generation = in.u8();
    RecordHeader header;
    header.kind = RecordKind::pulled;
    write_record(header, std::span<const std::byte>(reinterpret_cast<const std::byte*>(&note), sizeof(note)));
  }

  // ------------------------------------------------------------ the peer's ring writer

  // Appends one record (and the padding before it, if it would cross the
  // end), making room by letting the channel consume. False when the channel
  // no longer reads.
  bool write_record(RecordHeader header, std::span<const std::byte> payload, std::optional<uint64_t> sequence = {}) {
    const size_t needed = padded(payload.size());
    if (needed > kRingBytes) return false;
    for (int attempt = 0;; ++attempt) {
      const uint64_t tail = in_control_->tail.load(std::memory_order_acquire);
      const size_t offset = head_ % kRingBytes;
      const size_t to_end = kRingBytes - offset;
      const size_t with_padding = needed <= to_end ? needed : to_end + needed;
      if (head_ >= tail && head_ - tail + with_padding <= kRingBytes) break;
      if (attempt > 8 || owner_.failed()) return false;
      channel_->progress();
      react_to_failure();
    }
    size_t offset = head_ % kRingBytes;
    if (kRingBytes - offset < needed) {
      RecordHeader padding;
      padding.kind = RecordKind::padding;
      padding.sequence = sequence_++;
      // A hostile move_head may leave the head unaligned, with less than a
      // header's room before the ring's end: never write past the ring.
      std::memcpy(in_ring_ + offset, &padding, std::min(sizeof(padding), kRingBytes - offset));
      head_ += kRingBytes - offset;
      offset = 0;
    }
    header.sequence = sequence ? *sequence : sequence_;
    header.length = payload.size();
    ++sequence_;
    std::memcpy(in_ring_ + offset, &header, sizeof(header));
    if (!payload.empty()) std::memcpy(in_ring_ + offset + kRecordHeaderBytes, payload.data(), payload.size());
    last_record_offset_ = offset;
    head_ += needed;
    in_control_->head.store(head_, std::memory_order_release);
    return true;
  }

  // ------------------------------------------------------------ the peer's ring reader

  // Reads what the channel wrote, checking it against ring.h's format (the
  // channel is no hostile peer: a broken record here is a bug).
  void drain_outgoing() {
    const uint64_t head = out_control_->head.load(std::memory_order_acquire);
    FUZZ_CHECK(head >= out_tail_ && head - out_tail_ <= kRingBytes, "the channel's ring head is beyond its ring");
    while (out_tail_ != head) {
      const size_t offset = out_tail_ % kRingBytes;
      RecordHeader header;
      std::memcpy(&header, out_ring_ + offset, sizeof(header));
      FUZZ_CHECK(header.sequence == out_sequence_, "the channel numbered its records out of order");
      ++out_sequence_;
      if (header.kind == RecordKind::padding) {
        out_tail_ += kRingBytes - offset;
        continue;
      }
      FUZZ_CHECK(header.length <= kRingBytes - offset - kRecordHeaderBytes &&
                     out_tail_ + padded(header.length) <= head,
                 "the channel wrote a record past the end of the ring or of what it published");
      const std::byte* payload = out_ring_ + offset + kRecordHeaderBytes;
      on_outgoing(header, std::span(payload, header.length));
      out_tail_ += padded(header.length);
    }
    out_control_->tail.store(out_tail_, std::memory_order_release);
  }

  void on_outgoing(const RecordHeader& header, std::span<const std::byte> payload) {
    switch (header.kind) {
      case RecordKind::message:
      case RecordKind::more: {
        if (header.kind == RecordKind::message) {
          FUZZ_CHECK(!assembling_, "a message record inside another message");
          FUZZ_CHECK(!pending_sends_.empty(), "a message nobody sent");
          assembling_ = pending_sends_.front();
          pending_sends_.pop_front();
          assembled_.clear();
        }
        FUZZ_CHECK(assembling_, "a continuation record outside any message");
        const Tag& tag = assembling_->tag;
        FUZZ_CHECK(header.group == tag.group && header.value == tag.value && header.signature == tag.signature &&
                       header.total == assembling_->data.size(),
                   "a message record does not carry its send's tag and length");
        assembled_.insert(assembled_.end(), payload.begin(), payload.end());
        FUZZ_CHECK(assembled_.size() <= assembling_->data.size(), "more bytes than the send has");
        if (assembled_.size() == assembling_->data.size()) {
          FUZZ_CHECK(assembled_ == assembling_->data, "the ring carried other bytes than the send's");
          assembling_ = nullptr;
        }
        return;
      }
      case RecordKind::pull: {
        FUZZ_CHECK(payload.size() == sizeof(PullOffer), "a pull offer of the wrong size");
        FUZZ_CHECK(!pending_sends_.empty() && !assembling_, "a pull offer nobody sent, or inside a message");
        ScriptSend* send = pending_sends_.front();
        pending_sends_.pop_front();
        PullOffer offer;
        std::memcpy(&offer, payload.data(), sizeof(offer));
        FUZZ_CHECK(header.total == send->data.size() && header.value == send->tag.value &&
                       offer.address == reinterpret_cast<uint64_t>(send->data.data()) && offer.slot < kPullSlots &&
                       our_offers_[offer.slot].load() == offer.generation,
                   "a pull offer that does not describe its send");
        // The peer copies it (here: reads it in place) and says so.
        RecordHeader note;
        note.kind = RecordKind::pulled;
        const PulledNote done{offer.slot, 0, offer.generation};
        write_record(note, std::span<const std::byte>(reinterpret_cast<const std::byte*>(&done), sizeof(done)));
        return;
      }
      case RecordKind::pulled: {
        FUZZ_CHECK(payload.size() == sizeof(PulledNote), "a pulled note of the wrong size");
        uint32_t slot = 0;
        uint64_t generation = 0;
        std::memcpy(&slot, payload.data(), 4);
        std::memcpy(&generation, payload.data() + 8, 8);
        FUZZ_CHECK(slot < kPullSlots, "a pulled note for a slot beyond the table");
        slots_in_use_.erase(slot);  // the channel is done with it: the peer may offer there again
        return;
      }
      default:
        fuzz_fail(cat("the channel wrote a record of kind ", static_cast<uint32_t>(header.kind)));
    }
  }

  // ------------------------------------------------------------ the checks

  void check_completion() {
    if (model_.hostile() || owner_.failed() || goodbye_sent_ || !side_.valid()) return;
    const std::set<std::string>& allowed = model_.allowed_failures();
    FUZZ_CHECK(allowed.empty() || allowed == std::set<std::string>{"IoError"}, "a failure was due but did not happen");
    if (!allowed.empty()) return;  // a withdrawn offer fails only if a receive takes it
    model_.check_sent_messages_received("ring");
    for (const auto& send : model_.sends())
      FUZZ_CHECK(send->request.state() == Request::State::done, "a send did not complete though the peer read it");
  }

  void react_to_failure() {
    if (!owner_.failed() || reacted_) return;
    reacted_ = true;
    const std::string kind = chorus_error_kind(owner_.failure(), "the channel's failure");
    model_.check_failure_allowed(kind, owner_.failure());
    const AbortReport report = report_abort(owner_.failure());
    const std::vector<std::byte> message = encode_abort({report.error_class, report.blamed_rank, report.text});
    channel_->fail_everything(owner_.failure(), message);
    model_.check_all_finished("after fail_everything");
    if (!side_.valid()) return;
    std::vector<std::byte> got;
    std::vector<Fd> fds;
    const ssize_t received = receive_side(side_.get(), got, fds, 0);
    if (received <= 0) return;  // the peer said goodbye: nobody to tell
    SideKind side_kind{};
    AbortNote note;
    FUZZ_CHECK(check_side_message(got, side_kind).empty() && side_kind == SideKind::abort &&
                   decode_abort(got, note).empty(),
               "fail_everything did not send one abort message");
    check_abort_class(kind, adopt_abort(note.error_class, note.blamed_rank, note.text, 1, 0), "the abort message");
  }

  void tear_down() {
    channel_->fail_everything(std::make_exception_ptr(Aborted("fuzz: tearing down")), {});
    model_.check_all_finished("after the final fail_everything");
  }

  const bool we_pull_;
  Owner owner_;
  CompletionSignal signal_;
  RingControl* in_control_ = nullptr;
  std::byte* in_ring_ = nullptr;
  RingControl* out_control_ = nullptr;
  const std::byte* out_ring_ = nullptr;
  std::atomic<uint64_t>* peer_offers_ = nullptr;
  std::atomic<uint64_t>* our_offers_ = nullptr;
  Fd side_;
  std::deque<std::vector<std::byte>> pull_sources_;  // before channel_: outlives its pulls
  MessageOrderModel model_{kMaxMessage};
  std::unique_ptr<Connection> channel_;

  uint64_t head_ = 0;
  uint64_t sequence_ = 0;
  size_t last_record_offset_ = 0;
  uint64_t out_tail_ = 0;
  uint64_t out_sequence_ = 0;
  uint64_t next_generation_ = 1;
  std::set<uint32_t> slots_in_use_;
  std::deque<ScriptSend*> pending_sends_;
  ScriptSend* assembling_ = nullptr;
  std::vector<std::byte> assembled_;

  bool goodbye_sent_ = false;
  bool reacted_ = false;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  const uint8_t setup = in.u8();
  Script script((setup & 1) == 0, (setup & 2) == 0);
  script.run(in);
  return 0;
}
