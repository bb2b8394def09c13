// Loading the optional modules with dlopen.
#include "base/module_loader.h"

#include <dlfcn.h>

#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "base/config.h"
#include "base/log.h"

namespace chorus {
namespace {

// The directory of the shared object (or program) that holds this code.
std::string directory_of_this_code() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&directory_of_this_code), &info) == 0 || !info.dli_fname) return {};
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

}  // namespace

void* load_module_entry(const ModuleSymbols& symbols, std::string& failure) {
  std::vector<std::string> candidates;
  if (std::optional<std::string> named = module_path_from_environment(symbols.path_variable)) {
    candidates.push_back(std::move(*named));
  } else {
    if (std::string here = directory_of_this_code(); !here.empty()) candidates.push_back(here + "/" + symbols.file);
    candidates.push_back(std::string(CHORUS_INSTALLED_LIBDIR) + "/" + symbols.file);
  }
  std::string tried;
  for (const std::string& path : candidates) {
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      tried += cat(tried.empty() ? "" : "; ", why ? why : path);
      continue;
    }
    using VersionFunction = const char* (*)();
    const auto version = reinterpret_cast<VersionFunction>(::dlsym(handle, symbols.version_symbol));
    void* entry = ::dlsym(handle, symbols.entry_symbol);
    if (!version || !entry) {
      tried += cat(tried.empty() ? "" : "; ", path, ": not a chorus ", symbols.kind, " module");
      continue;
    }
    if (std::strcmp(version(), CHORUS_VERSION) != 0) {
      tried += cat(tried.empty() ? "" : "; ", path, ": built from chorus ", version(), ", this library is ",
                   CHORUS_VERSION);
      continue;
    }
    return entry;
  }
  failure = cat(symbols.file, " cannot be loaded (set ", symbols.path_variable, " to its path): ", tried);
  return nullptr;
}

}  // namespace chorus
