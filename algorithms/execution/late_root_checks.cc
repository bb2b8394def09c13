// Rooted calls checked without a message of their own (late_root_checks.h).
#include "algorithms/execution/late_root_checks.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <utility>

#include "algorithms/execution/communicator.h"
#include "algorithms/execution/root_check.h"
#include "base/error.h"
#include "base/log.h"

namespace chorus::algorithms {

namespace {

// Apart from every collective's tags (bit 63 clear) and every point-to-point
// message's (bit 63 with a 32-bit user tag: bit 62 clear).
constexpr uint64_t kLateCheckValue = (uint64_t{1} << 63) | (uint64_t{1} << 62) | kRootCheckSlot;
// No collective's: a kind byte past the last collective, with the root check's bit.
constexpr uint64_t kLateCheckSignature = uint64_t{0x4f} << 56;

transport::Tag late_tag(const Communicator& communicator) {
  transport::Tag tag;
  tag.value = kLateCheckValue;
  tag.signature = kLateCheckSignature;
  tag.group = communicator.group();
  // Sixteen bytes whose receiver may be in another call: never wait for its receive.
  tag.eager = true;
  return tag;
}

int right_of(const Communicator& communicator) { return (communicator.rank() + 1) % communicator.size(); }
int left_of(const Communicator& communicator) {
  return (communicator.rank() + communicator.size() - 1) % communicator.size();
}
// On demand (transport/mesh.h) a neighbour's pair exists once a call used
// it: every covered call on messages connects both (executor.cc), and a
// board's set-up its ring neighbours. Nothing came over a pair not there.
bool connected(const Communicator& communicator, int member) {
  return communicator.mesh().connected(communicator.mesh_rank(member));
}

void put_u32(std::byte* out, uint32_t value) {
  for (size_t i = 0; i < 4; ++i) out[i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
}
uint32_t get_u32(const std::byte* in) {
  uint32_t value = 0;
  for (size_t i = 0; i < 4; ++i) value |= static_cast<uint32_t>(in[i]) << (8 * i);
  return value;
}

// How far `a` is past `b` in the 32-bit numbering of calls.
int32_t ahead(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b); }

// A collective runs on one thread from start to end, helper calls included.
thread_local const LateRootChecks::Delegation* this_threads_delegation = nullptr;

}  // namespace

LateRootChecks::Delegated::Delegated(const Delegation& delegation) : outer_(this_threads_delegation) {
  this_threads_delegation = &delegation;
}

LateRootChecks::Delegated::~Delegated() { this_threads_delegation = outer_; }

const LateRootChecks::Delegation* LateRootChecks::delegated() { return this_threads_delegation; }

LateRootChecks::LateRootChecks() { receive_.attach(&signal_); }

// Sends and a claimed receive are finished before this goes: settle_sends
// waits for them as the Context ends, and a failed Mesh fails them.
LateRootChecks::~LateRootChecks() = default;

bool LateRootChecks::covers(const Communicator& communicator, const Call& call) {
  return communicator.late_root_checks() != nullptr && RootCheck::needed(call) &&
         call.collective != Collective::reduce && call.size <= kMaxChainedRanks;
}

bool LateRootChecks::active() const { return any_.load(std::memory_order_acquire); }

void LateRootChecks::record(const Communicator& communicator, const Call& call, uint32_t sequence) {
  std::lock_guard lock(mutex_);
  reap_sends();
  Entry& entry = history_[next_];
  next_ = (next_ + 1) % kHistory;
  entry = Entry{sequence, call.root, call.collective, call.variable(), true, false, false};
  newest_ = sequence;
  any_.store(true, std::memory_order_release);
  // The left neighbour's word on this call, if it came before this rank did;
  // and forgotten, what was about calls this rank has passed without them.
  std::optional<int> early;
  for (auto it = early_.begin(); it != early_.end();) {
    if (it->first == sequence) early = it->second;
    if (ahead(sequence, it->first) >= 0) {
      it = early_.erase(it);
    } else {
      ++it;
    }
  }
  if (early) judge(communicator, entry, *early);
  // Now and then, for a rank that never waits: what its left neighbour
  // told it must not pile up unclaimed, nor a root's frames it never took.
  if (++records_ % kPollEveryRecords == 0) {
    poll_locked(communicator);
    look_for_stray_frames(communicator);
  }
}

void LateRootChecks::look_for_stray_frames(const Communicator& communicator) {
  const int size = communicator.size();
  const int left = left_of(communicator);
  // The plans' roots send to the member on their right (a chain's next, a
  // binomial tree's first leaf): the left neighbour's frames show a
  // disagreement first. The others in turn, for frames that come from further.
  const auto step = static_cast<int>(stray_looks_++ % static_cast<uint64_t>(size - 1));
  // A rank that only sends reads no pair (its transport thread sleeps while
  // this one polls): land what arrived first.
  communicator.mesh().progress();
  const int other = (communicator.rank() + size - 1 - step) % size;
  look_at_unclaimed(communicator, left);
  if (other != left) look_at_unclaimed(communicator, other);
}

void LateRootChecks::look_at_unclaimed(const Communicator& communicator, int member) {
  if (!connected(communicator, member)) return;
  // A rooted call's frame, of a call this rank has finished: every frame a
  // call expects is taken before it ends, so nobody will take this one. (A
  // frame of the call now starting may be a helper phase's own, whose root
  // is another number: the host boards' rail names the root's host.) A
  // root check's, or a decorator's of its own, is left to the receive.
  // Such a frame stays the oldest from its sender: looking at the oldest
  // few is enough, and a sender far ahead may have thousands waiting.
  const auto never_taken = [this](const transport::Tag& tag) {
    return !(tag.value >> 63) && finished(tag) && signed_root(tag.signature);
  };
  const std::optional<transport::Tag> stray =
      communicator.pair(member).find_unclaimed(communicator.group(), kStrayFramesLooked, never_taken);
  if (!stray) return;
  const SignedRoot theirs = *signed_root(stray->signature);
  const Entry* entry = find_tagged(*stray);
  if (entry && theirs.collective == entry->collective && theirs.root != entry->root) {
    // The root check's words, as where the neighbour's word came.
    std::array<std::byte, 4> bytes{};
    put_u32(bytes.data(), static_cast<uint32_t>(theirs.root));
    try {
      RootCheck::verify_bytes(name_of(*entry), communicator.rank(), member, entry->root, bytes, entry->sequence);
    } catch (...) {
      fail(communicator, std::current_exception());
    }
  }
  const auto sequence = entry ? entry->sequence : static_cast<uint32_t>(stray->value >> 32);
  fail(communicator,
       std::make_exception_ptr(MismatchError(cat(
           "rank ", communicator.rank(), ": #", sequence, ": peer rank ", member, " sent ",
           describe_signature(stray->signature), " for call #", sequence,
           ", which this rank ",
           entry ? cat("ran as ", name_of(*entry), " naming root ", entry->root, " and ") : std::string(),
           "finished without taking it: the ranks disagree on that call (its root, which collective it is, "
           "or how it runs)"))));
}

void LateRootChecks::poll(const Communicator& communicator) {
  // A board's wait reads no pair: land what arrived first.
  communicator.mesh().progress();
  std::lock_guard lock(mutex_);
  poll_locked(communicator);
}

void LateRootChecks::poll_locked(const Communicator& communicator) {
  reap_sends();
  for (;;) {
    if (!receiving_) {
      if (!connected(communicator, left_of(communicator))) return;
      receiving_ = communicator.pair(left_of(communicator))
                       .post_recv_if_arrived(receive_, late_tag(communicator), incoming_, Memory::host());
      if (!receiving_) return;
    }
    const transport::Request::State state = receive_.state();
    if (state == transport::Request::State::failed) {
      receiving_ = false;
      fail(communicator, receive_.error());
    }
    if (state != transport::Request::State::done) return;
    receiving_ = false;
    const uint32_t sequence = get_u32(incoming_.data());
    const auto their_root = static_cast<int>(get_u32(incoming_.data() + 4));
    CHORUS_LOG(debug, communicator.rank(), "late root check: #", sequence, ": rank ", left_of(communicator),
               " names root ", their_root);
    if (Entry* entry = find(sequence)) {
      judge(communicator, *entry, their_root);
    } else if (!newest_ || ahead(sequence, *newest_) > 0) {
      // A call this rank has not started yet: judged as it does.
      early_.emplace_back(sequence, their_root);
      if (early_.size() > kHistory) early_.pop_front();
    }
    // Else older than the history: nothing left to compare it with.
  }
}

void LateRootChecks::tell(const Communicator& communicator, uint32_t sequence) {
  std::lock_guard lock(mutex_);
  Entry* entry = find(sequence);
  if (entry && !entry->told) tell_locked(communicator, *entry);
}

void LateRootChecks::settle_last(const Communicator& communicator, uint32_t sequence, Deadline deadline) {
  std::unique_lock lock(mutex_);
  Entry* entry = find(sequence);
  if (!entry) return;
  // What came already first, so that what it passes on goes before this
  // rank's word on its last call, after which the right neighbour may end.
  poll_locked(communicator);
  if (!entry->told) tell_locked(communicator, *entry);
  transport::Mesh& mesh = communicator.mesh();
  transport::WaitingScope waiting_scope(mesh);
  for (;;) {
    if (mesh.failed()) std::rethrow_exception(mesh.failure());
    const uint64_t arrivals = mesh.arrivals().count();
    const uint64_t completions = signal_.count();
    poll_locked(communicator);
    if (entry->confirmed) return;
    if (deadline.expired())
      fail(communicator,
           std::make_exception_ptr(TimeoutError(cat(
               "rank ", communicator.rank(), ": ", name_of(*entry), " #", entry->sequence,
               ": timed out as the context ends, waiting for the root that rank ", left_of(communicator),
               " named in that call (16 bytes; no later call of this context carried it)"))));
    // An arrival or the claimed receive's completion wakes us; a short
    // slice covers the one that lands between the look and the sleep.
    const Deadline slice(std::min(deadline.at(), Clock::now() + std::chrono::milliseconds(1)));
    if (receiving_) {
      signal_.wait_change(completions, slice);
    } else {
      mesh.arrivals().wait_change(arrivals, slice);
    }
  }
}

void LateRootChecks::settle_sends(const Communicator& communicator, Deadline deadline) {
  std::unique_lock lock(mutex_);
  for (;;) {
    reap_sends();
    if (sends_.empty() && !receiving_) return;
    if (communicator.mesh().failed()) return;  // the abort failed them
    if (receiving_) poll_locked(communicator);  // a claimed message completes on its own
    if (deadline.expired()) {
      // Their memory goes with this object: fail them first.
      communicator.mesh().abort(std::make_exception_ptr(TimeoutError(
          cat("rank ", communicator.rank(), ": the late root checks' messages were still in flight as the context ended"))));
      return;
    }
    const uint64_t completions = signal_.count();
    signal_.wait_change(completions, Deadline(std::min(deadline.at(), Clock::now() + std::chrono::milliseconds(1))));
  }
}

std::string LateRootChecks::name_of(const Entry& entry) {
  return cat(to_string(entry.collective), entry.variable ? "v" : "");
}

const LateRootChecks::Entry* LateRootChecks::find_tagged(const transport::Tag& tag) const {
  // Bit 63: a point-to-point message's, or the late checks' own words.
  if (tag.value >> 63) return nullptr;
  const auto sequence = static_cast<uint32_t>(tag.value >> 32);  // the executor's, wrapped at 2^31
  for (const Entry& entry : history_)
    if (entry.used && (entry.sequence & 0x7fffffffu) == sequence) return &entry;
  return nullptr;
}

bool LateRootChecks::finished(const transport::Tag& tag) const {
  if (!newest_) return false;
  // In the executor's 31-bit numbering: behind the call this rank is in.
  const uint32_t behind = ((*newest_ & 0x7fffffffu) - static_cast<uint32_t>(tag.value >> 32)) & 0x7fffffffu;
  return behind != 0 && behind < (uint32_t{1} << 30);
}

LateRootChecks::Entry* LateRootChecks::find(uint32_t sequence) {
  for (Entry& entry : history_)
    if (entry.used && entry.sequence == sequence) return &entry;
  return nullptr;
}

void LateRootChecks::judge(const Communicator& communicator, Entry& entry, int their_root) {
  if (their_root != entry.root) {
    std::array<std::byte, 4> theirs{};
    put_u32(theirs.data(), static_cast<uint32_t>(their_root));
    try {
      RootCheck::verify_bytes(name_of(entry), communicator.rank(), left_of(communicator), entry.root, theirs,
                              entry.sequence);
    } catch (...) {
      fail(communicator, std::current_exception());
    }
  }
  entry.confirmed = true;
  // Round the ring: the right neighbour may be waiting for a word on this
  // call that only this rank, which finished it, can pass on.
  if (!entry.told) tell_locked(communicator, entry);
}

void LateRootChecks::tell_locked(const Communicator& communicator, Entry& entry) {
  entry.told = true;
  if (!connected(communicator, right_of(communicator))) return;
  // A neighbour that ended its Context waits for no word (and a send to it
  // would fail the Mesh): it had heard this rank's word on its last call.
  if (communicator.pair(right_of(communicator)).peer_closed()) return;
  CHORUS_LOG(debug, communicator.rank(), "late root check: ", name_of(entry), " #", entry.sequence, ": telling rank ",
             right_of(communicator), " this rank names root ", entry.root);
  auto outgoing = std::make_unique<Outgoing>();
  outgoing->request.attach(&signal_);
  put_u32(outgoing->bytes.data(), entry.sequence);
  put_u32(outgoing->bytes.data() + 4, static_cast<uint32_t>(entry.root));
  communicator.pair(right_of(communicator))
      .post_send(outgoing->request, late_tag(communicator), outgoing->bytes, Memory::host());
  sends_.push_back(std::move(outgoing));
}

void LateRootChecks::reap_sends() {
  // A failed send needs no word here: the Mesh's failure fails the calls.
  while (!sends_.empty() && sends_.front()->request.finished()) sends_.pop_front();
}

void LateRootChecks::fail(const Communicator& communicator, std::exception_ptr error) {
  communicator.mesh().abort(error);
  std::rethrow_exception(error);
}

}  // namespace chorus::algorithms
