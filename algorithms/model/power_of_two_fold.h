// How reduction algorithms built for a power-of-two number of ranks serve any
// rank count: with P ranks and P' the largest power of two <= P, the first
// 2 (P - P') ranks (counted from the root) pair up; the odd one of each pair
// hands its data to the even one and sits out the power-of-two phase, then
// gets its result back. That costs one extra message each way and no
// imbalance in the main phase.
//
// Ranks are counted relative to the root (v = rank - root mod P) so the root
// is always a survivor with new rank 0; the gather of a reduce ends there.
#pragma once

#include "algorithms/model/cost_model.h"

namespace chorus::algorithms {

class PowerOfTwoFold {
 public:
  PowerOfTwoFold(int rank, int size, int root = 0) : size_(size), root_(root) {
    power_ = 1;
    while (power_ * 2 <= size) power_ *= 2;
    extras_ = size - power_;
    relative_ = ((rank - root) % size + size) % size;
  }

  // Ranks in the power-of-two phase.
  int power() const { return power_; }
  int extras() const { return extras_; }
  // This rank sits out the power-of-two phase.
  bool folded_out() const { return relative_ < 2 * extras_ && relative_ % 2 == 1; }
  // This rank takes the data of a folded-out partner.
  bool takes_partner() const { return relative_ < 2 * extras_ && relative_ % 2 == 0; }
  // The other rank of this rank's pair (folded_out() or takes_partner() only).
  int partner() const { return absolute(folded_out() ? relative_ - 1 : relative_ + 1); }
  // Rank in the power-of-two phase (survivors only).
  int new_rank() const { return relative_ < 2 * extras_ ? relative_ / 2 : relative_ - extras_; }
  // The real rank of the survivor with new rank `new_rank`.
  int rank_of(int new_rank) const { return absolute(new_rank < extras_ ? 2 * new_rank : new_rank + extras_); }
  // The survivor that represents relative rank `relative` (itself or its partner).
  int new_rank_of_relative(int relative) const { return relative < 2 * extras_ ? relative / 2 : relative - extras_; }

 private:
  int absolute(int relative) const { return (relative + root_) % size_; }

  int size_, root_;
  int power_ = 1, extras_ = 0, relative_ = 0;
};

inline int log2_of_power(int power) {
  int bits = 0;
  while ((1 << bits) < power) ++bits;
  return bits;
}

// What folding costs an allreduce of `bytes`: a folded-out rank's buffer
// goes to its partner, is reduced there, and the result comes back.
inline double allreduce_fold_cost(const PowerOfTwoFold& fold, double bytes, const CostModel& model) {
  if (fold.extras() == 0) return 0.0;
  return 2 * (model.alpha_seconds + bytes * model.beta_seconds_per_byte) + bytes * model.gamma_seconds_per_byte;
}

}  // namespace chorus::algorithms
