// Pipeline segment size from the link model, for Plans whose later links sit
// idle until the first segments reach them (chain broadcast).
//
// Cutting n bytes into S segments for a pipeline with F fill stages (hops a
// segment crosses before the last link starts) costs
//     (F + S) (alpha + n beta / S) = F alpha + n beta + S alpha + F n beta / S,
// which is smallest at S = sqrt(F n beta / alpha), i.e. segments of
//     m = sqrt(n alpha / (F beta)).
// Small segments shorten the fill, large ones pay fewer alphas; the best size
// grows with the buffer and with the bytes a link moves in one alpha.
#pragma once

#include <cstddef>

#include "algorithms/model/cost_model.h"

namespace chorus::algorithms {

// Bounds of the choice. Below 16 KiB the frame header and the per-message
// work of the progress thread start to show even on a fast model; above
// 4 MiB a segment no longer shortens anything a real link notices (one
// segment is already milliseconds of wire time) and the window of posted
// requests (schedule.h) holds fewer of them.
inline constexpr size_t min_pipeline_segment_bytes = size_t{16} << 10;
inline constexpr size_t max_pipeline_segment_bytes = size_t{4} << 20;

// m above, rounded down to a power of two, clamped to the bounds, then to
// whole elements, and never so small that the pipeline needs 2^32 messages.
// Down, because the formula charges every segment a whole alpha while on a
// stream transport most of alpha is latency that overlaps the next segment's
// bytes: the real optimum sits below m (on a shaped 1 Gbit/s 4-host chain,
// 64-128 KiB segments beat 256 KiB at 4 MiB, where m is 114 KiB). A power of
// two keeps ranks whose models differ in the last digits cutting the buffer
// the same way, and the plan cache at a few shapes per collective.
// `fill_stages` <= 0 means no fill to shorten: the largest segment.
size_t pipeline_segment_bytes(size_t bytes, size_t element_bytes, int fill_stages, const CostModel& model);

}  // namespace chorus::algorithms
