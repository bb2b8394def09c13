// The link model: the alpha-beta numbers algorithm selection assumes of a
// link, and how a user replaces a transport's built-in estimate:
//
//   CHORUS_LINK_MODEL="alpha_us=25,gbps=2"     # 25 µs per message, 2 GB/s
//
// `alpha_us` is the per-message latency in microseconds, `gbps` the
// bandwidth in gigabytes (10^9 bytes) per second. Either may be left out
// and keeps the transport's value. Shared by every transport.
#pragma once

#include <optional>
#include <string_view>

namespace chorus {

// Latency and inverse bandwidth of one link, for algorithm selection.
struct LinkModel {
  double alpha_seconds = 50e-6;            // per message
  double beta_seconds_per_byte = 1e-9;     // 1 / bandwidth
};

// Applies "alpha_us=...,gbps=..." on top of `base`. Throws InvalidArgument
// for unknown keys, bad numbers or non-positive values.
LinkModel parse_link_model(std::string_view text, LinkModel base);

// `base` with CHORUS_LINK_MODEL applied when it is set; InvalidArgument
// (naming the variable) when it is malformed.
LinkModel link_model_from_environment(LinkModel base);

}  // namespace chorus
