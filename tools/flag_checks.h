// What every tool checks before it runs anything (issue 45): numbers that
// are finite and in range, byte sizes that parse without wrapping or
// overflowing, sizes this host's memory can hold, and the CHORUS_* settings
// a rank would refuse at connect. Each check's message names the flag (CLI11
// puts the option's name before a validator's message), so a bad value is
// refused at once with the flag to fix, never run into a hang, an endless
// loop or a bare std::bad_alloc.
//
// Header and source use only base/ (no libchorus), so tools that link the
// base library alone (chorus-store, chorus-project) can use them too.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace chorus::tools {

// "4096", "64K", "1M", "3g", "1T", "8KiB", "2mb" (powers of 1024; the suffix
// in any case, with an optional B or iB): the bytes it means. nullopt with
// `why` set for anything else: a sign, a fraction, hex, an empty string, or
// a value past SIZE_MAX.
std::optional<size_t> parse_byte_size(std::string_view text, std::string& why);

// A CLI11 transform for a size_t option: the text as parse_byte_size reads
// it, refused below `min`; the option then reads the plain number. Replaces
// CLI::AsSizeValue, which reads "-5" as 2^64-5 and clamps an overflowing
// number to SIZE_MAX without a word.
CLI::Validator ByteSize(size_t min);

// A CLI11 check for a floating-point option: a decimal number in [min, max].
// CLI::Range lets NaN through (every comparison with NaN is false).
CLI::Validator FiniteRange(double min, double max);

// A CLI11 check for an unsigned option: decimal digits only. CLI11 reads
// "-1" into an unsigned as its largest value, and "010" as octal.
CLI::Validator DecimalDigits();

// This host's physical memory in bytes (0 where the system does not say).
size_t physical_memory_bytes();

// The ranks of this job on this host as the launcher says (CHORUS_LOCAL_SIZE,
// torchrun's LOCAL_WORLD_SIZE, Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE), else 1.
int local_ranks_from_environment();

// `a * b`, or SIZE_MAX where that overflows: a size that large is refused anyway.
size_t saturating_multiply(size_t a, size_t b);

// Empty when `ranks_on_host` ranks holding `bytes_per_rank` each fit in
// this host's physical memory; else why not, e.g. "--max-bytes 1 TiB needs
// 2 TiB per rank, this host has 23.4 GiB". `what` names the flag and value.
// ranks_on_host 0: a tool that is no rank, needing `bytes_per_rank` alone.
std::string memory_shortfall(const std::string& what, size_t bytes_per_rank, int ranks_on_host);

// Bytes as "1.5 GiB", "512 MiB", "16 KiB" or "8 bytes" for these messages.
std::string describe_bytes(size_t bytes);

// Empty when every CHORUS_* setting the library reads is well formed; else
// the message a rank's connect would throw (CHORUS_LOG='loud' is not a log
// level ...). Tools call it first, so a bad setting stops the tool, not
// each rank it would start.
std::string environment_problem();

// The same for CHORUS_LOG alone: what tools that never connect (and so use
// no other setting) check.
std::string log_setting_problem();

}  // namespace chorus::tools
