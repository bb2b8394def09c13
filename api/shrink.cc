// shrink: the survivors agree on who they are through the store, then connect.
//
// Keys, under the job's store, for generation g (the one being formed):
//   shrink/g/count        add: each survivor draws its check-in number i
//   shrink/g/joined/i     its rank in the failed job, then the ranks it saw die
//   shrink/g/decide       add: the first survivor to close the membership
//   shrink/g/members      the decision: old ranks, in order
//   shrink/g/job/...      the new job's rendezvous
// One decider writes the members; everyone else waits for them. A survivor
// whose check-in the decider did not see is not a member.
#include "chorus/shrink.h"

#include <algorithm>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "api/context_state.h"
#include "base/error.h"
#include "base/log.h"
#include "rendezvous/prefix_store.h"
#include "rendezvous/store_common.h"

namespace chorus {
namespace {

std::vector<std::byte> encode_ranks(const std::vector<int>& ranks) {
  std::string text;
  for (int rank : ranks) text += cat(text.empty() ? "" : ",", rank);
  return std::vector<std::byte>(reinterpret_cast<const std::byte*>(text.data()),
                                reinterpret_cast<const std::byte*>(text.data()) + text.size());
}

// Ranks below `size`, or InvalidArgument: the store may hold anything.
std::vector<int> decode_ranks(const std::vector<std::byte>& bytes, int size, const std::string& key) {
  std::vector<int> ranks;
  std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    int rank = -1;
    try {
      size_t used = 0;
      rank = std::stoi(item, &used);
      if (used != item.size()) rank = -1;
    } catch (const std::exception&) {
    }
    if (rank < 0 || rank >= size)
      throw InvalidArgument(cat("shrink: store key '", key, "' holds '", text, "', not ranks below ", size));
    ranks.push_back(rank);
    start = comma + 1;
  }
  return ranks;
}

class Agreement {
 public:
  Agreement(std::shared_ptr<Store> store, uint32_t generation, int rank, int size, std::chrono::milliseconds timeout)
      : store_(std::move(store)), prefix_(cat("shrink/", generation, "/")), rank_(rank), size_(size),
        timeout_(timeout) {}

  void check_in(const std::vector<int>& suspects) {
    const int64_t number = store_->add(prefix_ + "count", 1) - 1;
    std::vector<int> record{rank_};
    record.insert(record.end(), suspects.begin(), suspects.end());
    store_->set(cat(prefix_, "joined/", number), encode_ranks(record));
  }

  // The members, once someone decided; closes the membership itself when
  // everyone is accounted for or `window_end` passed.
  std::vector<int> members(Clock::time_point window_end) {
    while (true) {
      if (auto decided = decision()) return *decided;
      if (everyone_accounted_for() || Clock::now() >= window_end) {
        if (store_->add(prefix_ + "decide", 1) == 1) {
          std::vector<int> joined = joined_ranks();
          store_->set(prefix_ + "members", encode_ranks(joined));
          CHORUS_LOG(info, rank_, "shrink: closed the membership with ", joined.size(), " of ", size_, " ranks");
          return joined;
        }
        // Another survivor decides; its answer comes within the timeout.
        return decode_ranks(store_->get(prefix_ + "members", timeout_), size_, prefix_ + "members");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  const std::string& prefix() const { return prefix_; }

 private:
  std::optional<std::vector<int>> decision() {
    try {
      return decode_ranks(store_->get(prefix_ + "members", std::chrono::milliseconds(0)), size_, prefix_ + "members");
    } catch (const TimeoutError&) {
      return std::nullopt;
    }
  }

  std::vector<std::vector<int>> records() {
    const int64_t count = store_->add(prefix_ + "count", 0);
    std::vector<std::string> keys;
    for (int64_t i = 0; i < count; ++i) keys.push_back(cat(prefix_, "joined/", i));
    std::vector<std::vector<int>> out;
    // A survivor writes its record right after drawing its number.
    for (const auto& value : store_->get_many(keys, timeout_))
      out.push_back(decode_ranks(value, size_, prefix_ + "joined/..."));
    return out;
  }

  std::vector<int> joined_ranks() {
    std::set<int> joined;
    for (const auto& record : records())
      if (!record.empty()) joined.insert(record.front());
    return {joined.begin(), joined.end()};
  }

  bool everyone_accounted_for() {
    std::set<int> known;
    for (const auto& record : records()) known.insert(record.begin(), record.end());
    return static_cast<int>(known.size()) == size_;
  }

  std::shared_ptr<Store> store_;
  std::string prefix_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

std::shared_ptr<Context> shrink(const Context& context, const ShrinkOptions& options) {
  detail::ContextState& state = detail::state_of(context);
  const int rank = context.rank();
  if (!state.origin)
    throw InvalidArgument(cat("rank ", rank, ": shrink takes the Context connect() made, not one made by split "
                              "(shrink that one, then split the result again)"));
  const detail::ContextState::Origin origin = *state.origin;
  if (!origin.store)
    throw InvalidArgument(cat("rank ", rank, ": shrink needs the job's store to meet at, and this Context was "
                              "connected over MPI; connect through a store (CHORUS_STORE) to survive rank failures"));
  const std::chrono::milliseconds window = options.join_window.count() > 0 ? options.join_window : state.timeout;
  const uint32_t generation = origin.generation + 1;
  const std::vector<int> suspects = state.communicator.mesh().suspects();
  std::string seen;
  for (int peer : suspects) seen += cat(seen.empty() ? "" : ", ", peer);
  CHORUS_LOG(info, rank, "shrink: checking in for generation ", generation, " of the job (this rank saw ",
             seen.empty() ? "no rank" : "rank(s) " + seen, " die or freeze)");

  Agreement agreement(origin.store, generation, rank, context.size(), state.timeout);
  agreement.check_in(suspects);
  const std::vector<int> members = agreement.members(Clock::now() + window);
  const auto mine = std::find(members.begin(), members.end(), rank);
  std::string listed;
  for (int member : members) listed += cat(listed.empty() ? "" : ", ", member);
  if (mine == members.end())
    throw Aborted(cat("rank ", rank, ": the survivors of the job (ranks ", listed, ") carried on without this rank: "
                      "it checked in after they closed the membership (was it stopped?). Exit, or start anew"));
  const int new_rank = static_cast<int>(mine - members.begin());
  const int new_size = static_cast<int>(members.size());
  CHORUS_LOG(info, rank, "shrink: carrying on as rank ", new_rank, " of ", new_size, " (old ranks ", listed, ")");

  auto job_store = std::make_shared<PrefixStore>(agreement.prefix() + "job", origin.store);
  StoreBootstrap bootstrap(job_store, new_rank, new_size, state.timeout);
  std::shared_ptr<Context> survivors = detail::connect_with(bootstrap, origin.options, origin.config, generation);
  // The survivors connect with the job's connect timeout (origin.options),
  // and keep the collective timeout this Context had, set_timeout included:
  // a job that shortened it to notice stopped ranks fast keeps noticing fast.
  survivors->set_timeout(state.timeout);
  detail::ContextState& next = detail::state_of(*survivors);
  next.origin->store = origin.store;  // the job's store, not this generation's prefix of it
  next.kept_alive = state.kept_alive;  // rank 0's embedded store server, if this rank hosts it
  return survivors;
}

}  // namespace chorus
