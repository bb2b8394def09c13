// Binomial gather and scatter as Plans.
//
// Ranks are renumbered relative to the root (v = rank - root mod P). The
// parent of v is v minus its lowest set bit, its children are v + 2^j for
// 2^j below that bit, so v's subtree is the contiguous relative range
// [v, v + lowest bit). Blocks travel in relative order: a non-root rank with
// children keeps its subtree's blocks in scratch, in that order. Only at the
// root does relative order meet the output's rank order; a child's range
// that wraps past rank P-1 is the one case that goes through scratch there.
#include "algorithms/plans/gather_scatter/binomial_gather_scatter.h"

#include "algorithms/model/block_layout.h"

namespace chorus::algorithms {

namespace {

struct Tree {
  explicit Tree(const Call& call) : size(call.size), root(call.root) {
    relative = wrap_rank(static_cast<long long>(call.rank) - root, size);
    const std::vector<size_t> counts = block_counts(call);
    std::vector<size_t> relative_counts(static_cast<size_t>(size));
    for (int v = 0; v < size; ++v) relative_counts[v] = counts[absolute(v)];
    relative_offsets = prefix_byte_offsets(relative_counts, call.element_bytes());
    absolute_offsets = prefix_byte_offsets(counts, call.element_bytes());
    end = subtree_end(relative);
    own_bytes = relative_offsets[relative + 1] - relative_offsets[relative];
    // Children, largest subtree first: it has the longest way to go.
    const int limit = relative == 0 ? size : lowest_bit(relative);
    for (long long step = 1; step < limit; step *= 2)
      if (relative + step < size) children.insert(children.begin(), relative + static_cast<int>(step));
  }

  int absolute(int v) const { return wrap_rank(static_cast<long long>(v) + root, size); }
  int subtree_end(int v) const {
    return v == 0 ? size : static_cast<int>(std::min<long long>(size, static_cast<long long>(v) + lowest_bit(v)));
  }
  // Relative range [first, last) within this rank's scratch (which starts at `relative`).
  Region scratch_range(int first, int last) const {
    return block_range(BufferKind::scratch, relative_offsets, first, last, relative);
  }
  // Below the root: the parent's rank, and the blocks of this rank's subtree.
  int parent() const { return absolute(relative - lowest_bit(relative)); }
  Region subtree() const { return scratch_range(relative, end); }
  // Whether some rank below this one has a nonempty block, so its blocks pass
  // through this rank's scratch; else this rank moves its own block only.
  bool relays() const { return !children.empty() && subtree().length != own_bytes; }

  int size, root, relative, end;
  size_t own_bytes;
  std::vector<size_t> relative_offsets, absolute_offsets;
  std::vector<int> children;
};

// At the root: where a child's relative range [first, last) lives in the
// root's big buffer, as one or (wrapping past rank P-1) two regions.
struct RootPieces {
  Region first_piece, second_piece;  // second_piece empty unless the range wraps
  bool wraps() const { return second_piece.length > 0; }
};

RootPieces root_pieces(const Tree& tree, BufferKind buffer, int first, int last) {
  const int size = tree.size;
  const int start = tree.absolute(first);
  const int stop = start + (last - first);  // may exceed size
  if (stop <= size) return {block_range(buffer, tree.absolute_offsets, start, stop), Region{buffer, 0, 0}};
  return {block_range(buffer, tree.absolute_offsets, start, size),
          block_range(buffer, tree.absolute_offsets, 0, stop - size)};
}

bool binomial_gather_supports(const Call& call) {
  return call.collective == Collective::gather && call.root >= 0 && call.root < call.size;
}

bool binomial_scatter_supports(const Call& call) {
  return call.collective == Collective::scatter && call.root >= 0 && call.root < call.size;
}

Plan binomial_gather_plan(const Call& call, const PlanTuning&) {
  Plan plan;
  const Tree tree(call);
  const Region own_input{BufferKind::input, 0, tree.own_bytes};

  if (tree.relative != 0) {
    if (!tree.relays()) {
      if (tree.own_bytes > 0) plan.send(own_input, tree.parent(), 0);
      return plan;
    }
    plan.scratch_bytes = tree.subtree().length;
    StepId collected = no_step;  // chained: the send then waits for one id
    if (tree.own_bytes > 0) collected = plan.copy(own_input, tree.scratch_range(tree.relative, tree.relative + 1));
    for (int child : tree.children) {
      const Region range = tree.scratch_range(child, tree.subtree_end(child));
      if (range.length > 0) collected = plan.recv(tree.absolute(child), 0, range, {collected});
    }
    plan.send(tree.subtree(), tree.parent(), 0, {collected});
    return plan;
  }

  if (!call.in_place && tree.own_bytes > 0)
    plan.copy(own_input, block_range(BufferKind::output, tree.absolute_offsets, call.rank, call.rank + 1));
  for (int child : tree.children) {
    const RootPieces pieces = root_pieces(tree, BufferKind::output, child, tree.subtree_end(child));
    if (!pieces.wraps()) {
      if (pieces.first_piece.length > 0) plan.recv(tree.absolute(child), 0, pieces.first_piece);
      continue;
    }
    const size_t total = pieces.first_piece.length + pieces.second_piece.length;
    plan.scratch_bytes = total;  // at most one child's range wraps
    const StepId received = plan.recv(tree.absolute(child), 0, Region{BufferKind::scratch, 0, total});
    if (pieces.first_piece.length > 0)
      plan.copy(Region{BufferKind::scratch, 0, pieces.first_piece.length}, pieces.first_piece, {received});
    plan.copy(Region{BufferKind::scratch, pieces.first_piece.length, pieces.second_piece.length},
              pieces.second_piece, {received});
  }
  return plan;
}

Plan binomial_scatter_plan(const Call& call, const PlanTuning&) {
  Plan plan;
  const Tree tree(call);
  const Region own_output{BufferKind::output, 0, tree.own_bytes};

  if (tree.relative != 0) {
    if (!tree.relays()) {
      if (tree.own_bytes > 0) plan.recv(tree.parent(), 0, own_output);
      return plan;
    }
    plan.scratch_bytes = tree.subtree().length;
    const StepId received = plan.recv(tree.parent(), 0, tree.subtree());
    for (int child : tree.children) {
      const Region range = tree.scratch_range(child, tree.subtree_end(child));
      if (range.length > 0) plan.send(range, tree.absolute(child), 0, {received});
    }
    if (tree.own_bytes > 0) plan.copy(tree.scratch_range(tree.relative, tree.relative + 1), own_output, {received});
    return plan;
  }

  // The root reads its big buffer as `input`; in place that is the same
  // memory as the output, and the root's own block is already where it goes.
  for (int child : tree.children) {
    const RootPieces pieces = root_pieces(tree, BufferKind::input, child, tree.subtree_end(child));
    if (!pieces.wraps()) {
      if (pieces.first_piece.length > 0) plan.send(pieces.first_piece, tree.absolute(child), 0);
      continue;
    }
    const size_t total = pieces.first_piece.length + pieces.second_piece.length;
    plan.scratch_bytes = total;
    StepId packed = no_step;
    if (pieces.first_piece.length > 0)
      packed = plan.copy(pieces.first_piece, Region{BufferKind::scratch, 0, pieces.first_piece.length});
    packed = plan.copy(pieces.second_piece,
                       Region{BufferKind::scratch, pieces.first_piece.length, pieces.second_piece.length}, {packed});
    plan.send(Region{BufferKind::scratch, 0, total}, tree.absolute(child), 0, {packed});
  }
  if (!call.in_place && tree.own_bytes > 0)
    plan.copy(block_range(BufferKind::input, tree.absolute_offsets, call.rank, call.rank + 1), own_output);
  return plan;
}

}  // namespace

constexpr AlgorithmFunctions binomial_gather{binomial_gather_supports, relayed_blocks_cost, binomial_gather_plan};
constexpr AlgorithmFunctions binomial_scatter{binomial_scatter_supports, relayed_blocks_cost, binomial_scatter_plan};

}  // namespace chorus::algorithms
