// When a Context connects a pair of ranks: all at connect (a full mesh:
// every unreachable rank shows at once, and the first collective pays no
// connecting), or each pair when a collective or message first needs it
// (thousands of ranks whose algorithms each use a few peers per rank must
// not hold a socket to every rank). docs/connections.md.
#pragma once

#include <optional>
#include <string_view>

namespace chorus {

// automatic: the full mesh up to kFullMeshMaxRanks ranks, on demand above.
enum class Connections { automatic, full_mesh, on_demand };
inline constexpr int kFullMeshMaxRanks = 64;

// As CHORUS_CONNECTIONS spells it: "auto", "full", "on-demand".
const char* to_string(Connections connections);
// The reverse; nullopt for any other text.
std::optional<Connections> connections_from_string(std::string_view text);

}  // namespace chorus
