// Finds and loads one of libchorus's optional modules (the TLS module,
// libchorus_tls.so; the CUDA module, libchorus_cuda.so): code that links a
// third-party runtime the core must not depend on. Looked for beside the
// library holding this code (libchorus.so, installed or in the build tree),
// else in the installed library directory; an environment variable names
// the file instead (tests whose programs link the layers statically set it;
// read through base/config.h, like every variable).
// Internal (not installed).
#pragma once

#include <string>

namespace chorus {

struct ModuleSymbols {
  const char* kind;            // "TLS": in "... not a chorus TLS module"
  const char* file;            // "libchorus_tls.so"
  const char* path_variable;   // "CHORUS_TLS_MODULE"
  const char* version_symbol;  // returns the chorus version it was built from
  const char* entry_symbol;
};

// The module's entry point, or null with `failure` saying what was tried and
// why each failed. A module from another chorus version is refused. Loaded
// RTLD_LOCAL, so its runtime's symbols stay its own, and never unloaded.
void* load_module_entry(const ModuleSymbols& symbols, std::string& failure);

}  // namespace chorus
