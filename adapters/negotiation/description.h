// What one rank says about one collective it wants to run, before any of
// its data moves: the call's kind, its name, the tensors' types and shapes,
// the op, root and scale factors. The Negotiator (negotiator.h) exchanges
// these among the ranks, matches them into calls, and compares them; this
// file holds the description, its wire form, and the comparison that turns
// disagreeing descriptions into one message every rank raises alike.
//
// Framework-free: a tensor's type is the framework's own code (TensorFlow's
// DataType enum), named in messages by a function the adapter hands in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace chorus::negotiation {

enum class Kind : uint8_t {
  allreduce = 1,
  allgather,
  broadcast,
  reducescatter,
  alltoall,
  grouped_allreduce,
  grouped_allgather,
  grouped_reducescatter,
};
inline constexpr uint8_t kLastKind = static_cast<uint8_t>(Kind::grouped_reducescatter);

// "allreduce", "grouped_allgather", ...
const char* to_string(Kind kind);

struct TensorDescription {
  int32_t type = 0;  // the framework's type code
  std::vector<int64_t> dims;
  bool operator==(const TensorDescription&) const = default;
};

// How a call is matched with the other ranks' calls. In issue order (eager
// execution and tf.function, where every rank's program issues its
// collectives in the same order): the n-th ordered call of every rank is
// one collective, and their names must agree. By name (TensorFlow 1 graphs,
// whose independent ops run in any order): the n-th call named N on every
// rank is one collective, whenever each rank gets to it.
enum class Matching : uint8_t { in_order = 0, by_name = 1 };

struct Description {
  Kind kind = Kind::allreduce;
  Matching matching = Matching::in_order;
  std::string name;
  uint8_t op = 0;      // the adapter's code of the reduction op (0 where none)
  int32_t root = -1;   // broadcast's root rank (-1 where none)
  float prescale = 1.0f;
  float postscale = 1.0f;
  std::vector<TensorDescription> tensors;
  // Per-rank counts that may differ between ranks and are not compared:
  // alltoall's splits (the rows this rank sends each rank).
  std::vector<int64_t> counts;
  // A small call's input travels with its description (up to
  // kLongestCarriedData bytes): where every rank's does, the call's result
  // is computed from everyone's data where it completes, with no collective
  // of its own (one round trip for a small eager op, not two). Not compared.
  bool carries_data = false;
  std::vector<std::byte> data;
  // Not empty: this rank refuses the call with this message (a bad argument
  // found on this rank alone). The call is still announced, so that every
  // rank fails it together and the ranks stay matched.
  std::string refusal;
};

// The most input a description carries (Description::data): with a name
// and a shape, a record still fits one rank's block of a cycle.
inline constexpr size_t kLongestCarriedData = 512;

// Which call of which rank a description is: ordered calls by their
// sequence number, named ones by name and occurrence.
struct Key {
  Matching matching = Matching::in_order;
  std::string name;   // empty for ordered calls (their name is checked, not matched)
  uint64_t number = 0;
  auto operator<=>(const Key&) const = default;
};

// "the 3rd call in issue order" / "call 'grad_0' (its 2nd run)".
std::string describe_key(const Key& key);

// One announcement: a description and its key; or, with `abandon` set, the
// rank giving up on a call that some ranks never announced (its key only).
struct Record {
  Key key;
  bool abandon = false;
  Description description;
};

// Appends the record of a call (`description` under `key`) to `out`
// (little-endian, see description.cc).
void encode_announcement(const Key& key, const Description& description, std::vector<std::byte>& out);
// Appends the record of giving up on the call `key` (of kind `kind`).
void encode_abandon(const Key& key, Kind kind, std::vector<std::byte>& out);
void encode_record(const Record& record, std::vector<std::byte>& out);
// Every record of `bytes`; nullopt where they do not parse (a peer speaking
// another protocol, or bytes that are not a negotiation block).
std::optional<std::vector<Record>> decode_records(std::span<const std::byte> bytes);

// Names a framework type code in messages ("float32").
using TypeNamer = std::function<std::string(int32_t type)>;
// How each reduction op code is named ("sum").
using OpNamer = std::function<std::string(uint8_t op)>;

// Where every rank's description of one call (rank order) disagrees: a
// message naming the two ranks and what differs, the same text on every
// rank; nullopt when they agree. Ranks may differ in the first dimension
// for allgather and alltoall (and their grouped forms).
std::optional<std::string> disagreement(std::span<const Description* const> everyone, const TypeNamer& type_name,
                                        const OpNamer& op_name);

// A tensor's description in words: "float32 tensor of shape [17, 17]".
std::string describe_tensor(const TensorDescription& tensor, const TypeNamer& type_name);

}  // namespace chorus::negotiation
