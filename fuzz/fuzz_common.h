// What every harness in fuzz/ shares: reading structured values off the
// front of the fuzzer's input, failing loudly when a check does not hold,
// and telling our errors (chorus::Error and its subclasses, the correct
// answer to bad bytes) from everything else (a bug).
//
// A harness that finds a broken promise calls fuzz_fail(), which prints what
// and aborts: libFuzzer then saves the input as a crash, like any sanitizer
// report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <span>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace chorus::fuzz {

[[noreturn]] inline void fuzz_fail(std::string_view what) {
  std::fprintf(stderr, "\n==fuzz check failed: %.*s\n", static_cast<int>(what.size()), what.data());
  std::fflush(stderr);
  std::abort();
}

#define FUZZ_CHECK(condition, what)                                                     \
  do {                                                                                  \
    if (!(condition)) ::chorus::fuzz::fuzz_fail(std::string(#condition " -- ") + (what)); \
  } while (0)

// Reads the input front to back; past its end every read yields zeros, so a
// harness never has to check lengths (the corpus generator writes the same
// layout with ByteWriter).
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return offset_ >= size_; }
  size_t left() const { return empty() ? 0 : size_ - offset_; }

  uint64_t number(size_t bytes) {
    uint64_t value = 0;
    for (size_t i = 0; i < bytes; ++i) {
      uint64_t byte = offset_ < size_ ? data_[offset_] : 0;
      ++offset_;
      value |= byte << (8 * i);
    }
    return value;
  }
  uint8_t u8() { return static_cast<uint8_t>(number(1)); }
  uint16_t u16() { return static_cast<uint16_t>(number(2)); }
  uint32_t u32() { return static_cast<uint32_t>(number(4)); }
  uint64_t u64() { return number(8); }
  bool flag() { return (u8() & 1) != 0; }

  // Up to `count` bytes (fewer at the end of the input).
  std::span<const std::byte> bytes(size_t count) {
    if (empty()) return {};
    size_t n = std::min(count, size_ - offset_);
    auto part = std::span<const std::byte>(reinterpret_cast<const std::byte*>(data_ + offset_), n);
    offset_ += n;
    return part;
  }
  std::string text(size_t count) {
    auto part = bytes(count);
    return std::string(reinterpret_cast<const char*>(part.data()), part.size());
  }
  // A string whose length is the next byte.
  std::string short_text() { return text(u8()); }
  std::span<const std::byte> rest() { return bytes(left()); }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
};

// The matching writer, for the corpus generator and for harnesses that build
// well-formed input of their own.
class ByteWriter {
 public:
  ByteWriter& number(uint64_t value, size_t bytes) {
    for (size_t i = 0; i < bytes; ++i) out_.push_back(static_cast<uint8_t>(value >> (8 * i)));
    return *this;
  }
  ByteWriter& u8(uint64_t value) { return number(value, 1); }
  ByteWriter& u16(uint64_t value) { return number(value, 2); }
  ByteWriter& u32(uint64_t value) { return number(value, 4); }
  ByteWriter& u64(uint64_t value) { return number(value, 8); }
  ByteWriter& bytes(std::span<const std::byte> data) {
    for (std::byte b : data) out_.push_back(static_cast<uint8_t>(b));
    return *this;
  }
  ByteWriter& text(std::string_view data) {
    out_.insert(out_.end(), data.begin(), data.end());
    return *this;
  }
  ByteWriter& short_text(std::string_view data) {
    u8(data.size());
    return text(data.substr(0, 255));
  }
  const std::vector<uint8_t>& data() const { return out_; }

 private:
  std::vector<uint8_t> out_;
};

// Rethrows `error` and returns its dynamic type's name; fails the run when
// it is not one of ours.
inline std::string chorus_error_kind(const std::exception_ptr& error, std::string_view context) {
  try {
    std::rethrow_exception(error);
  } catch (const IoError&) {
    return "IoError";
  } catch (const TimeoutError&) {
    return "TimeoutError";
  } catch (const InvalidArgument&) {
    return "InvalidArgument";
  } catch (const MismatchError&) {
    return "MismatchError";
  } catch (const Aborted&) {
    return "Aborted";
  } catch (const Error&) {
    return "Error";
  } catch (const std::exception& e) {
    fuzz_fail(std::string(context) + ": not a chorus::Error but " + typeid(e).name() + ": " + e.what());
  } catch (...) {
    fuzz_fail(std::string(context) + ": an exception that is not even a std::exception");
  }
}

inline std::string error_text(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "";
  }
}

// Runs `body`; an exception of ours is the correct answer to bad input and
// is returned as its kind, anything else fails the run. Empty: no exception.
template <class Body>
std::string run_expecting_chorus_errors(std::string_view context, Body&& body) {
  try {
    body();
    return "";
  } catch (...) {
    return chorus_error_kind(std::current_exception(), context);
  }
}

// Quiet logs: a corrupt stream logs a warning per input otherwise. Call it
// before anything logs (LLVMFuzzerInitialize): the level is read once.
inline void quiet_logs() { ::setenv("CHORUS_LOG", "error", 1); }

// For harnesses that play one input as a script of steps against a fresh
// Script (its constructor sets up, run() plays, its destructor tears down).
template <class Script>
int run_script(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  Script script;
  script.run(in);
  return 0;
}

}  // namespace chorus::fuzz
