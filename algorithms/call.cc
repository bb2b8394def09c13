// Names of collectives and the 64-bit call signature checked on every frame.
//
// Signature layout (high to low): 8 bits collective kind + 1 (so no real call
// has signature 0), 8 bits data type, 8 bits reduce op, 8 bits root (low
// bits), 32 bits count (low bits). Fields a collective ignores are zero, so
// ranks that differ only in something irrelevant (the root of an allreduce)
// still agree.
#include "algorithms/call.h"

#include "chorus/log.h"

namespace chorus::algorithms {

namespace {
constexpr int kind_shift = 56;
constexpr int type_shift = 48;
constexpr int op_shift = 40;
constexpr int root_shift = 32;
constexpr uint64_t byte_mask = 0xff;
constexpr uint64_t count_mask = 0xffffffffull;
constexpr uint64_t collective_count = static_cast<uint64_t>(Collective::recv) + 1;
}  // namespace

std::string_view to_string(Collective collective) {
  switch (collective) {
    case Collective::allreduce: return "allreduce";
    case Collective::broadcast: return "broadcast";
    case Collective::barrier: return "barrier";
    case Collective::reduce: return "reduce";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::allgather: return "allgather";
    case Collective::gather: return "gather";
    case Collective::scatter: return "scatter";
    case Collective::alltoall: return "alltoall";
    case Collective::send: return "send";
    case Collective::recv: return "recv";
  }
  return "unknown collective";
}

size_t Call::block_offset(int r) const {
  if (counts.empty()) return count * static_cast<size_t>(r);
  size_t offset = 0;
  for (int i = 0; i < r; ++i) offset += counts[static_cast<size_t>(i)];
  return offset;
}

size_t Call::total_count() const {
  if (counts.empty()) return count * static_cast<size_t>(size);
  size_t total = 0;
  for (size_t c : counts) total += c;
  return total;
}

uint64_t call_signature(const Call& call) {
  uint64_t signature = (static_cast<uint64_t>(call.collective) + 1) << kind_shift;
  if (call.collective == Collective::barrier) return signature;
  signature |= static_cast<uint64_t>(call.type) << type_shift;
  signature |= static_cast<uint64_t>(call.count) & count_mask;
  if (call.collective == Collective::allreduce) signature |= static_cast<uint64_t>(call.op) << op_shift;
  if (call.collective == Collective::broadcast)
    signature |= (static_cast<uint64_t>(static_cast<uint32_t>(call.root)) & byte_mask) << root_shift;
  return signature;
}

std::string describe_signature(uint64_t signature) {
  uint64_t kind = signature >> kind_shift;
  if (kind == 0 || kind > collective_count) return cat("unknown call (signature 0x", std::hex, signature, ")");
  auto collective = static_cast<Collective>(kind - 1);
  if (collective == Collective::barrier) return "barrier";
  uint64_t type_bits = (signature >> type_shift) & byte_mask;
  uint64_t count = signature & count_mask;
  std::string type_name = type_bits <= static_cast<uint64_t>(DataType::float64)
                              ? std::string(to_string(static_cast<DataType>(type_bits)))
                              : cat("type#", type_bits);
  std::string text = cat(to_string(collective), " of ", count, " ", type_name);
  if (collective == Collective::allreduce) {
    uint64_t op_bits = (signature >> op_shift) & byte_mask;
    text += op_bits <= static_cast<uint64_t>(ReduceOp::bxor)
                ? cat(" ", to_string(static_cast<ReduceOp>(op_bits)))
                : cat(" op#", op_bits);
  } else {
    text += cat(" from root ", (signature >> root_shift) & byte_mask);
  }
  return text;
}

}  // namespace chorus::algorithms
