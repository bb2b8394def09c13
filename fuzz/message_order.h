// What the harnesses that play the peer of one stream connection
// (tcp_frames, shm_channel) expect of it, whatever carries the bytes: per
// tag, the i-th receive posted meets the i-th message sent, byte for byte,
// and the connection fails only in the ways the peer asked for (a
// mismatched size or signature, an abort, a goodbye). The model learns of
// every receive and message before the connection can see it. Once the
// peer has broken the rules (hostile input) it promises nothing about
// which bytes land where; failures must still be chorus::Errors and leave
// no request pending.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.h"
#include "fuzz/fuzz_common.h"
#include "transport/transport.h"

namespace chorus::fuzz {

// The tags a script names by index: two values in each of two groups. A
// wrong signature is one no sound peer's message or receive carries.
inline constexpr int kScriptTags = 4;

inline transport::Tag script_tag(int index, bool wrong_signature) {
  transport::Tag tag;
  tag.group = index < 2 ? 0 : 0x5eed;
  tag.value = 1 + (index & 1);
  tag.signature = wrong_signature ? 0xbad : 100 + static_cast<uint64_t>(index);
  return tag;
}

// Bytes that differ along a message and from one seed to the next, so a
// byte landing in the wrong place shows.
inline std::vector<std::byte> byte_pattern(size_t size, uint8_t seed) {
  std::vector<std::byte> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>(seed + i * 31 + (i >> 8));
  return bytes;
}

struct ScriptReceive {
  transport::Request request;
  transport::Tag tag;
  int tag_index = 0;
  size_t number = 0;  // of its tag
  std::vector<std::byte> buffer;
  bool checked = false;
};

struct ScriptSend {
  transport::Request request;
  transport::Tag tag;
  std::vector<std::byte> data;
};

struct ScriptMessage {
  int tag_index = 0;
  transport::Tag tag;
  std::vector<std::byte> payload;
};

class MessageOrderModel {
 public:
  explicit MessageOrderModel(size_t max_message) : max_message_(max_message) {}

  // Posts a receive from the script on `connection` (anything with
  // post_recv(request, tag, buffer)); one posted after the connection
  // failed (`failed_before`) must finish at once.
  template <class Connection>
  void post_receive(ByteReader& in, transport::CompletionSignal& signal, Connection& connection,
                    bool failed_before) {
    ScriptReceive& receive = add_receive(in, signal);
    connection.post_recv(receive.request, receive.tag, receive.buffer);
    if (failed_before) FUZZ_CHECK(receive.request.finished(), "a receive posted after the failure is left pending");
  }

  // The peer's next message from the script, in one piece: its tag (now
  // and then with a wrong signature), its size and its bytes, recorded
  // before the connection can see any of it.
  ScriptMessage next_message(ByteReader& in) {
    ScriptMessage message;
    message.tag_index = in.u8() % kScriptTags;
    const bool wrong_signature = (in.u8() & 15) == 15;
    const size_t size = message_size(in, message.tag_index);
    message.tag = script_tag(message.tag_index, wrong_signature);
    message.payload = byte_pattern(size, in.u8());
    add_message(message.tag_index, message.payload, message.tag.signature);
    return message;
  }

  // The size of the next message of tag `index`: mostly that of the
  // receive it will meet, so most pairs match.
  size_t message_size(ByteReader& in, int index) const {
    size_t size = in.u16() % (max_message_ + 1);
    if ((size & 1) == 0)
      if (const ScriptReceive* receive = find_receive(index, sent_of(index))) size = receive->buffer.size();
    return size;
  }

  // A message the peer sends with tag `index`.
  void add_message(int index, std::vector<std::byte> payload, uint64_t signature) {
    sent_[index].push_back(std::move(payload));
    sent_signatures_[index].push_back(signature);
    note_pairing(index, sent_[index].size() - 1);
  }

  // A send the script posts, its request attached to `signal`.
  ScriptSend& add_send(int index, std::vector<std::byte> data, transport::CompletionSignal& signal) {
    auto& send = sends_.emplace_back(std::make_unique<ScriptSend>());
    send->tag = script_tag(index, false);
    send->data = std::move(data);
    send->request.attach(&signal);
    return *send;
  }

  // From here on the peer broke the rules.
  void mark_hostile() { hostile_ = true; }
  bool hostile() const { return hostile_; }
  // A failure the peer asked for, by error class (chorus_error_kind).
  void allow_failure(std::string kind) { allowed_failures_.insert(std::move(kind)); }
  const std::set<std::string>& allowed_failures() const { return allowed_failures_; }

  // Every receive completed since the last call got its message.
  void check_receives() {
    if (hostile_) return;
    for (const auto& receive : receives_) {
      if (receive->checked || receive->request.state() != transport::Request::State::done) continue;
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

  // At the end of a sound script: every receive whose message was sent
  // completed; `carrier` names what was sound ("stream", "ring").
  void check_sent_messages_received(std::string_view carrier) const {
    for (const auto& receive : receives_) {
      if (receive->number >= sent_of(receive->tag_index)) continue;
      FUZZ_CHECK(receive->request.state() == transport::Request::State::done,
                 cat("receive #", receive->number, " of tag ", receive->tag_index,
                     " did not complete though its message was sent and the ", carrier, " is sound"));
    }
  }

  // The connection failed with an error of class `kind`: one the peer
  // asked for, unless it broke the rules.
  void check_failure_allowed(const std::string& kind, const std::exception_ptr& failure) const {
    if (hostile_) return;
    FUZZ_CHECK(allowed_failures_.count(kind), cat("a sound peer's connection failed with ", kind, ": ",
                                                  error_text(failure)));
  }

  // No request is left pending `when`.
  void check_all_finished(std::string_view when) const {
    for (const auto& receive : receives_)
      FUZZ_CHECK(receive->request.finished(), cat("a receive is still pending ", when));
    for (const auto& send : sends_) FUZZ_CHECK(send->request.finished(), cat("a send is still pending ", when));
  }

  const std::deque<std::unique_ptr<ScriptSend>>& sends() const { return sends_; }

 private:
  // A receive from the script: its tag (now and then with a wrong
  // signature) and its size (mostly that of the message it will meet, so
  // most pairs match), its request attached to `signal`.
  ScriptReceive& add_receive(ByteReader& in, transport::CompletionSignal& signal) {
    const int index = in.u8() % kScriptTags;
    const bool wrong_signature = (in.u8() & 7) == 7;
    size_t size = in.u16() % (max_message_ + 1);
    auto& receive = receives_.emplace_back(std::make_unique<ScriptReceive>());
    receive->tag = script_tag(index, wrong_signature);
    receive->tag_index = index;
    receive->number = receives_of_[index]++;
    if (!wrong_signature && (size & 1) == 0 && receive->number < sent_[index].size())
      size = sent_[index][receive->number].size();
    receive->buffer.assign(size, std::byte{0xee});
    receive->request.attach(&signal);
    note_pairing(index, receive->number);
    return *receive;
  }

  // The i-th receive and the i-th message of a tag meet (both sides keep
  // their order per tag); a different size or signature is a mismatch.
  void note_pairing(int index, size_t number) {
    const auto& sent = sent_[index];
    if (number >= sent.size() || number >= receives_of_[index]) return;
    const ScriptReceive* receive = find_receive(index, number);
    if (!receive) return;
    if (receive->buffer.size() != sent[number].size() || receive->tag.signature != sent_signatures_[index][number])
      allowed_failures_.insert("MismatchError");
  }

  const ScriptReceive* find_receive(int index, size_t number) const {
    for (const auto& receive : receives_)
      if (receive->tag_index == index && receive->number == number) return receive.get();
    return nullptr;
  }

  size_t sent_of(int index) const {
    const auto found = sent_.find(index);
    return found == sent_.end() ? 0 : found->second.size();
  }

  const size_t max_message_;
  std::deque<std::unique_ptr<ScriptReceive>> receives_;
  std::deque<std::unique_ptr<ScriptSend>> sends_;
  std::map<int, std::vector<std::vector<std::byte>>> sent_;
  std::map<int, std::vector<uint64_t>> sent_signatures_;
  std::map<int, size_t> receives_of_;
  std::set<std::string> allowed_failures_;
  bool hostile_ = false;
};

// The abort the connection sent its peer, as the peer adopts it, has the
// class of the connection's failure `kind` (a plain Error travels as Aborted).
inline void check_abort_class(const std::string& kind, const std::exception_ptr& adopted, std::string_view what) {
  FUZZ_CHECK(chorus_error_kind(adopted, what) == (kind == "Error" ? "Aborted" : kind),
             cat(what, " does not carry the failure's class"));
}

}  // namespace chorus::fuzz
