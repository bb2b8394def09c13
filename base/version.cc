// CHORUS_VERSION comes from the build (meson.build's project version).
#include "base/version.h"

namespace chorus {

const char* version() { return CHORUS_VERSION; }

}  // namespace chorus
