// A record on the wire, little-endian, front to back:
//   u8 flags (1: abandon, 2: matched by name, 4: refused), u8 kind, u8 op,
//   u64 key number, u16 + bytes key name;
// then, unless abandoning:
//   u16 + bytes call name, u32 root, f32 prescale, f32 postscale,
//   u32 tensor count, per tensor (i32 type, u8 dimensions, i64 each),
//   u32 count of per-rank counts and i64 each,
//   for a refused call u16 + bytes of its message,
//   and for a call carrying its data u16 + the bytes (flag 8).
// Names and messages longer than 65,535 bytes are cut there.
#include "adapters/negotiation/description.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "base/little_endian.h"

namespace chorus::negotiation {
namespace {

constexpr uint8_t kAbandonFlag = 1;
constexpr uint8_t kByNameFlag = 2;
constexpr uint8_t kRefusedFlag = 4;
constexpr uint8_t kDataFlag = 8;
constexpr size_t kLongestText = std::numeric_limits<uint16_t>::max();
// More dimensions than any framework allows (TensorFlow: 254).
constexpr uint64_t kMostDimensions = 255;

void put(std::vector<std::byte>& out, uint64_t value, size_t bytes) {
  const size_t at = out.size();
  out.resize(at + bytes);
  store_le(out.data() + at, value, bytes);
}

void put_text(std::vector<std::byte>& out, const std::string& text) {
  const size_t length = std::min(text.size(), kLongestText);
  put(out, length, 2);
  const auto* begin = reinterpret_cast<const std::byte*>(text.data());
  out.insert(out.end(), begin, begin + length);
}

bool get_text(LittleEndianReader& in, std::string& text) {
  uint64_t length = 0;
  std::span<const std::byte> bytes;
  if (!in.number(length, 2) || !in.bytes(bytes, length)) return false;
  text.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return true;
}

bool gathers(Kind kind) {
  return kind == Kind::allgather || kind == Kind::alltoall || kind == Kind::grouped_allgather;
}

std::string ordinal(uint64_t number) {
  const uint64_t last_two = number % 100;
  const char* suffix = last_two >= 11 && last_two <= 13 ? "th"
                       : number % 10 == 1               ? "st"
                       : number % 10 == 2               ? "nd"
                       : number % 10 == 3               ? "rd"
                                                        : "th";
  return std::to_string(number) + suffix;
}

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t axis = 0; axis < dims.size(); ++axis) text += (axis ? ", " : "") + std::to_string(dims[axis]);
  return text + "]";
}

std::string float_text(float value) {
  std::string text = std::to_string(value);
  // std::to_string gives six decimals; trim the zeros.
  while (text.size() > 1 && text.back() == '0') text.pop_back();
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

// What `mine` (rank `a`) and `theirs` (rank `b`) disagree on, in words, or
// empty. Both describe one call, so only the first difference is named.
std::string compare(const Description& mine, int a, const Description& theirs, int b, const TypeNamer& type_name,
                    const OpNamer& op_name) {
  // (The words are made only where something differs: this runs for every call.)
  const auto label = [](int rank) { return "rank " + std::to_string(rank); };
  if (mine.kind != theirs.kind) {
    const std::string ra = label(a), rb = label(b);
    return ra + " calls " + to_string(mine.kind) + ", " + rb + " calls " + to_string(theirs.kind);
  }
  if (mine.name != theirs.name) {
    const std::string ra = label(a), rb = label(b);
    return ra + " calls it '" + mine.name + "' and " + rb + " '" + theirs.name +
           "'; ranks issue their collectives in one order, so the calls at one position must have one name";
  }
  if (mine.tensors.size() != theirs.tensors.size()) {
    const std::string ra = label(a), rb = label(b);
    return ra + " passes " + std::to_string(mine.tensors.size()) + " tensors, " + rb + " " +
           std::to_string(theirs.tensors.size());
  }
  const bool grouped = mine.tensors.size() != 1;
  for (size_t index = 0; index < mine.tensors.size(); ++index) {
    const TensorDescription& x = mine.tensors[index];
    const TensorDescription& y = theirs.tensors[index];
    const bool same_shape =
        gathers(mine.kind)
            ? x.dims.size() == y.dims.size() && (x.dims.empty() || std::equal(x.dims.begin() + 1, x.dims.end(),
                                                                                y.dims.begin() + 1))
            : x.dims == y.dims;
    if (x.type != y.type || !same_shape) {
      const std::string ra = label(a), rb = label(b);
      const std::string which = grouped ? " as tensor " + std::to_string(index) : "";
      std::string rule = x.type != y.type          ? "the ranks must pass one type"
                         : gathers(mine.kind) ? "ranks may differ in the first dimension only"
                                              : "the ranks must pass one shape";
      return ra + " passes a " + describe_tensor(x, type_name) + which + ", " + rb + " a " +
             describe_tensor(y, type_name) + "; " + rule;
    }
  }
  if (mine.op != theirs.op) {
    const std::string ra = label(a), rb = label(b);
    return ra + " reduces with " + op_name(mine.op) + ", " + rb + " with " + op_name(theirs.op);
  }
  if (mine.root != theirs.root) {
    const std::string ra = label(a), rb = label(b);
    return ra + " names root rank " + std::to_string(mine.root) + ", " + rb + " root rank " +
           std::to_string(theirs.root);
  }
  // Compared as bits: a NaN factor is a difference only where the other rank's is not the same NaN.
  if (std::bit_cast<uint32_t>(mine.prescale) != std::bit_cast<uint32_t>(theirs.prescale) ||
      std::bit_cast<uint32_t>(mine.postscale) != std::bit_cast<uint32_t>(theirs.postscale)) {
    const std::string ra = label(a), rb = label(b);
    return ra + " scales by (" + float_text(mine.prescale) + ", " + float_text(mine.postscale) + "), " + rb +
           " by (" + float_text(theirs.prescale) + ", " + float_text(theirs.postscale) + ") (prescale, postscale)";
  }
  return {};
}

}  // namespace

const char* to_string(Kind kind) {
  switch (kind) {
    case Kind::allreduce: return "allreduce";
    case Kind::allgather: return "allgather";
    case Kind::broadcast: return "broadcast";
    case Kind::reducescatter: return "reducescatter";
    case Kind::alltoall: return "alltoall";
    case Kind::grouped_allreduce: return "grouped_allreduce";
    case Kind::grouped_allgather: return "grouped_allgather";
    case Kind::grouped_reducescatter: return "grouped_reducescatter";
  }
  return "an unknown collective";
}

std::string describe_key(const Key& key) {
  if (key.matching == Matching::in_order) return "the " + ordinal(key.number + 1) + " call in issue order";
  return "the call named '" + key.name + "'" + (key.number ? " (its " + ordinal(key.number + 1) + " run)" : "");
}

std::string describe_tensor(const TensorDescription& tensor, const TypeNamer& type_name) {
  return type_name(tensor.type) + " tensor of shape " + shape_text(tensor.dims);
}

namespace {

void encode(const Key& key, const Description* description, Kind kind, std::vector<std::byte>& out) {
  uint8_t flags = 0;
  if (description == nullptr) flags |= kAbandonFlag;
  if (key.matching == Matching::by_name) flags |= kByNameFlag;
  if (description != nullptr && !description->refusal.empty()) flags |= kRefusedFlag;
  if (description != nullptr && description->carries_data) flags |= kDataFlag;
  put(out, flags, 1);
  put(out, static_cast<uint8_t>(description ? description->kind : kind), 1);
  put(out, description ? description->op : 0, 1);
  put(out, key.number, 8);
  put_text(out, key.name);
  if (description == nullptr) return;
  put_text(out, description->name);
  put(out, static_cast<uint32_t>(description->root), 4);
  put(out, std::bit_cast<uint32_t>(description->prescale), 4);
  put(out, std::bit_cast<uint32_t>(description->postscale), 4);
  put(out, description->tensors.size(), 4);
  for (const TensorDescription& tensor : description->tensors) {
    put(out, static_cast<uint32_t>(tensor.type), 4);
    put(out, std::min<uint64_t>(tensor.dims.size(), kMostDimensions), 1);
    for (size_t axis = 0; axis < tensor.dims.size() && axis < kMostDimensions; ++axis) {
      put(out, static_cast<uint64_t>(tensor.dims[axis]), 8);
    }
  }
  put(out, description->counts.size(), 4);
  for (int64_t count : description->counts) put(out, static_cast<uint64_t>(count), 8);
  if (flags & kRefusedFlag) put_text(out, description->refusal);
  if (flags & kDataFlag) {
    const size_t length = std::min(description->data.size(), kLongestCarriedData);
    put(out, length, 2);
    out.insert(out.end(), description->data.begin(), description->data.begin() + static_cast<ptrdiff_t>(length));
  }
}

}  // namespace

void encode_announcement(const Key& key, const Description& description, std::vector<std::byte>& out) {
  encode(key, &description, description.kind, out);
}

void encode_abandon(const Key& key, Kind kind, std::vector<std::byte>& out) { encode(key, nullptr, kind, out); }

void encode_record(const Record& record, std::vector<std::byte>& out) {
  encode(record.key, record.abandon ? nullptr : &record.description, record.description.kind, out);
}

std::optional<std::vector<Record>> decode_records(std::span<const std::byte> bytes) {
  std::vector<Record> records;
  LittleEndianReader in(bytes);
  while (in.left() > 0) {
    Record record;
    Description& description = record.description;
    uint64_t flags = 0, kind = 0, op = 0;
    if (!in.number(flags, 1) || !in.number(kind, 1) || !in.number(op, 1) || !in.number(record.key.number, 8) ||
        !get_text(in, record.key.name)) {
      return std::nullopt;
    }
    if (kind < 1 || kind > kLastKind || flags > (kAbandonFlag | kByNameFlag | kRefusedFlag | kDataFlag)) {
      return std::nullopt;
    }
    record.abandon = flags & kAbandonFlag;
    record.key.matching = flags & kByNameFlag ? Matching::by_name : Matching::in_order;
    description.matching = record.key.matching;
    description.kind = static_cast<Kind>(kind);
    description.op = static_cast<uint8_t>(op);
    if (!record.abandon) {
      uint64_t root = 0, prescale = 0, postscale = 0, count = 0;
      if (!get_text(in, description.name) || !in.number(root, 4) || !in.number(prescale, 4) ||
          !in.number(postscale, 4) || !in.number(count, 4)) {
        return std::nullopt;
      }
      description.root = static_cast<int32_t>(static_cast<uint32_t>(root));
      description.prescale = std::bit_cast<float>(static_cast<uint32_t>(prescale));
      description.postscale = std::bit_cast<float>(static_cast<uint32_t>(postscale));
      // Each tensor takes at least 5 bytes: a count past that is not believed.
      if (count > in.left() / 5) return std::nullopt;
      description.tensors.resize(count);
      for (TensorDescription& tensor : description.tensors) {
        uint64_t type = 0, dimensions = 0;
        if (!in.number(type, 4) || !in.number(dimensions, 1) || dimensions > in.left() / 8) return std::nullopt;
        tensor.type = static_cast<int32_t>(static_cast<uint32_t>(type));
        tensor.dims.resize(dimensions);
        for (int64_t& extent : tensor.dims) {
          uint64_t value = 0;
          if (!in.number(value, 8)) return std::nullopt;
          extent = static_cast<int64_t>(value);
        }
      }
      uint64_t counts = 0;
      if (!in.number(counts, 4) || counts > in.left() / 8) return std::nullopt;
      description.counts.resize(counts);
      for (int64_t& count : description.counts) {
        uint64_t value = 0;
        if (!in.number(value, 8)) return std::nullopt;
        count = static_cast<int64_t>(value);
      }
      if ((flags & kRefusedFlag) && !get_text(in, description.refusal)) return std::nullopt;
      if (flags & kDataFlag) {
        uint64_t length = 0;
        std::span<const std::byte> data;
        if (!in.number(length, 2) || length > kLongestCarriedData || !in.bytes(data, length)) return std::nullopt;
        description.carries_data = true;
        description.data.assign(data.begin(), data.end());
      }
    }
    records.push_back(std::move(record));
  }
  return records;
}

std::optional<std::string> disagreement(std::span<const Description* const> everyone, const TypeNamer& type_name,
                                        const OpNamer& op_name) {
  // Every rank compares every rank with rank 0, in rank order, so all of
  // them find the same first difference and raise the same message.
  for (size_t rank = 1; rank < everyone.size(); ++rank) {
    std::string found = compare(*everyone[0], 0, *everyone[rank], static_cast<int>(rank), type_name, op_name);
    if (!found.empty()) return found;
  }
  return std::nullopt;
}

}  // namespace chorus::negotiation
