// Which chorus this is. The library's version at run time, and the headers'
// at compile time (chorus/features.h: CHORUS_VERSION_STRING and its parts),
// so a program can tell when it runs against another build than it was
// compiled for. Every tool answers --version with it.
#pragma once

namespace chorus {

// "0.1.0": the release of the libchorus (or tool) this code is linked into.
const char* version();

}  // namespace chorus
