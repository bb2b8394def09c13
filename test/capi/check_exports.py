#!/usr/bin/env python3
"""Holds libchorus.so to what api/exports.map promises: it exports exactly
the functions chorus_c.h declares, and otherwise only C++ symbols of
namespace chorus (with their RTTI, vtables and thunks); no std:: template
code, no symbol of a library linked into it, nothing in namespace gloo. And it does not link OpenSSL, whose libraries
cost every process a millisecond at exec: that is the TLS module's job
(base/tls.h), which exports its two entry points and nothing else.

usage: check_exports.py LIBRARY CHORUS_C_HEADER TLS_MODULE
"""
import re
import subprocess
import sys

# Demangled names a C++ symbol of ours may have.
OURS = re.compile(
    r"^(chorus::"
    r"|(typeinfo|typeinfo name|vtable|VTT|guard variable) for chorus::"
    r"|(non-virtual|virtual) thunk to chorus::"
    r"|construction vtable for .*-in-chorus::)"
)

# Symbols of the C++ API that must stay exported: a program that catches
# chorus::IoError needs its typeinfo, one that connects needs connect_from_env.
REQUIRED_CXX = [
    "typeinfo for chorus::IoError",
    "typeinfo for chorus::Error",
    "chorus::connect_from_env(",
    "chorus::allreduce(chorus::Context&",
    "chorus::Work::wait()",
]


def exported(library):
    listing = subprocess.run(["nm", "-D", "--defined-only", "-P", library], check=True, capture_output=True,
                             text=True).stdout
    mangled = [line.split()[0] for line in listing.splitlines() if line.strip()]
    demangled = subprocess.run(["c++filt"], input="\n".join(mangled) + "\n", check=True, capture_output=True,
                               text=True).stdout.splitlines()
    return list(zip(mangled, demangled))


def needed(library):
    dynamic = subprocess.run(["readelf", "-d", library], check=True, capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)


TLS_MODULE_ENTRIES = {"chorus_tls_load_context", "chorus_tls_module_version"}


def declared_functions(header):
    text = open(header, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"^\s*#.*$", "", text, flags=re.M)
    # Declarations end in ");" -- the static inline helpers have bodies and are no symbols.
    return set(re.findall(r"\b(chorus_[a-z0-9_]+)\s*\([^;{}]*\)\s*;", text))


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    library, header, tls_module = sys.argv[1], sys.argv[2], sys.argv[3]
    symbols = exported(library)
    declared = declared_functions(header)
    c_symbols = {name for name, _ in symbols if not name.startswith("_Z")}
    cxx = [demangled for name, demangled in symbols if name.startswith("_Z")]
    problems = []
    for name in sorted(c_symbols - declared):
        problems.append(f"exported but not declared in chorus_c.h (or not ours at all): {name}")
    for name in sorted(declared - c_symbols):
        problems.append(f"declared in chorus_c.h but not exported: {name}")
    for demangled in sorted(cxx):
        if not OURS.match(demangled):
            problems.append(f"a C++ symbol outside namespace chorus is exported: {demangled}")
        if "gloo::" in demangled:
            problems.append(f"a symbol in namespace gloo is exported (PyTorch loads the real Gloo): {demangled}")
    for prefix in REQUIRED_CXX:
        if not any(demangled.startswith(prefix) for demangled in cxx):
            problems.append(f"the C++ API lost a symbol: nothing exported starts with '{prefix}'")
    linked = needed(library)
    for name in linked:
        if name.startswith(("libssl", "libcrypto")):
            problems.append(f"{library} links {name}: OpenSSL belongs to the TLS module alone")
    if not any(name.startswith("libc.so") for name in linked):
        problems.append(f"readelf found no libc among {library}'s NEEDED {linked}: is the parser still right?")
    module_symbols = {name for name, _ in exported(tls_module)}
    if module_symbols != TLS_MODULE_ENTRIES:
        problems.append(f"{tls_module} exports {sorted(module_symbols)}, not exactly {sorted(TLS_MODULE_ENTRIES)}")
    if not any(name.startswith("libssl") for name in needed(tls_module)):
        problems.append(f"{tls_module} does not link libssl")
    if len(declared) < 50:
        problems.append(f"found only {len(declared)} declarations in {header}: is the parser still right?")
    for problem in problems:
        print(problem)
    print(f"{library}: {len(c_symbols)} C API functions ({len(declared)} declared), {len(cxx)} C++ symbols of "
          f"namespace chorus; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
