// The link model: the alpha-beta numbers algorithm selection assumes of a
// link. Transports report one per peer (Device::link_model); a user replaces
// them with CHORUS_LINK_MODEL or ConnectOptions::link_model:
//
//   "alpha_us=25,gbps=2"                          every link
//   "local:alpha_us=1,gbps=8;remote:gbps=0.125"   links within a host / between hosts
//
// `alpha_us` is the per-message latency in microseconds, `gbps` the
// bandwidth in gigabytes (10^9 bytes) per second. Either may be left out
// and keeps the transport's value.
#pragma once

#include <string_view>

namespace chorus {

// Latency and inverse bandwidth of one link, for algorithm selection.
struct LinkModel {
  double alpha_seconds = 50e-6;            // per message
  double beta_seconds_per_byte = 1e-9;     // 1 / bandwidth
};

// The two levels of the topology a link can be on.
enum class LinkLevel { local, remote };

// Applies "alpha_us=...,gbps=..." on top of `base`. Throws InvalidArgument
// for unknown keys, bad numbers or values outside 1e-12 to 1e12.
LinkModel parse_link_model(std::string_view text, LinkModel base);

// Applies the parts of an override text (syntax above) that concern `level`
// on top of `base`. Throws InvalidArgument for a malformed text.
LinkModel apply_link_model_override(std::string_view text, LinkLevel level, LinkModel base);

}  // namespace chorus
