// What the C API's sources share (internal, not installed): the handles
// behind the opaque C types, the one place exceptions become statuses, and
// the checks that turn C values into C++ ones.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/types.h"
#include "chorus/chorus_c.h"
#include "chorus/collective_options.h"
#include "chorus/collectives_grouped.h"
#include "chorus/context.h"
#include "chorus/work.h"

// The handles. A Work holds its Context too: the C++ Work refers to its
// Context, and a C caller freeing the context before its last work must not
// leave that work pointing at freed memory.
struct chorus_context {
  std::shared_ptr<chorus::Context> context;
};
struct chorus_work {
  // Declared first, so destroyed last: an unfinished point-to-point Work
  // still uses its Context while it is destroyed.
  std::shared_ptr<chorus::Context> context;
  chorus::Work work;
};

namespace chorus::c_api {

// Classifies the exception being handled, records its message and peer as
// this thread's last error, and returns its status. Never throws.
chorus_status record_current_exception() noexcept;

// Runs body, turning every exception into a status. body returns void or a
// chorus_status of its own (chorus_work_wait's CHORUS_IN_PROGRESS).
template <class Body>
chorus_status guarded(Body&& body) noexcept {
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<Body&>>) {
      body();
      return CHORUS_OK;
    } else {
      return body();
    }
  } catch (...) {
    return record_current_exception();
  }
}

// Deadlines are steady_clock::now() + timeout, which overflows long before
// INT64_MAX milliseconds: a timeout beyond this is refused, not wrapped.
constexpr int64_t longest_timeout_ms = int64_t{1000} * 60 * 60 * 24 * 365;

// The handle's Context; InvalidArgument naming `function` when it is null.
Context& context_of(const chorus_context* handle, const char* function);

// Where a value comes out; InvalidArgument when the caller passed null.
template <class T>
T& output(T* pointer, const Context* context, const char* function, const char* name) {
  if (pointer == nullptr)
    throw InvalidArgument(cat(context ? cat("rank ", context->rank(), ": ") : std::string(), function, " got a null ",
                              name, " pointer"));
  return *pointer;
}

// An options struct as the caller's header version laid it out. struct_size
// is what keeps old programs working with a newer library: a smaller struct
// (an older header, whose fields are a prefix of ours) leaves the newer
// fields at their defaults; a larger one (a newer header) is accepted when
// every field this library does not know is zero, since ignoring a field the
// caller set would silently change what the call does.
template <class Options>
Options versioned_options(const Options* given, const Options& defaults, size_t first_version_size,
                          const char* name) {
  if (given == nullptr) return defaults;
  const size_t size = given->struct_size;
  // No version will grow past a few hundred bytes: a size beyond this is
  // garbage (a struct never passed through _init), and reading that far
  // could fault.
  constexpr size_t largest_plausible_size = 4096;
  if (size < first_version_size || size > largest_plausible_size)
    throw InvalidArgument(cat(name, ".struct_size is ", size, ", not the size of any version of it (", sizeof(Options),
                              " here); set it with ", name, "_init"));
  Options options = defaults;
  std::memcpy(static_cast<void*>(&options), given, std::min(size, sizeof(Options)));
  const auto* bytes = reinterpret_cast<const unsigned char*>(given);
  for (size_t i = sizeof(Options); i < size; ++i)
    if (bytes[i] != 0)
      throw InvalidArgument(cat(name, " has fields this library (C API ",
                                CHORUS_VERSION_MAJOR_OF(chorus_version()), ".",
                                CHORUS_VERSION_MINOR_OF(chorus_version()), ", struct_size ", sizeof(Options),
                                ") does not know, set at byte ", i, " of ", size));
  return options;
}

// One C call on a Context that every rank makes together (a collective,
// point-to-point, split): it converts the C arguments and, when one is bad,
// aborts the Context before throwing, as the C++ API does for its own checks,
// so the other ranks stop waiting for this one at once.
class CollectiveCall {
 public:
  CollectiveCall(chorus_context* handle, const char* function, const char* collective,
                 const chorus_collective_options* options);

  Context& context() const { return *handle_->context; }
  const std::shared_ptr<Context>& shared_context() const { return handle_->context; }
  const CollectiveOptions& options() const { return options_; }
  DataType type(chorus_datatype value) const;
  ReduceOp op(chorus_reduce_op value) const;
  // One count per rank of the context.
  std::span<const size_t> counts(const size_t* counts, const char* name) const;
  // A grouped call's members from its C arrays (null arrays only for none).
  std::vector<GroupMember> members(const void* const* inputs, void* const* outputs, const size_t* counts,
                                   size_t members) const;
  chorus_work*& work_output(chorus_work** work) const;
  [[noreturn]] void reject(const std::string& what) const;

 private:
  chorus_context* handle_;
  const char* collective_;
  CollectiveOptions options_;
};

// Runs `issue` (which returns the C++ Work of an _async call) and hands the
// caller a chorus_work for it. The handle is allocated first: once the
// collective is issued, running out of memory must not lose its Work.
template <class Issue>
void issue_async(const CollectiveCall& call, chorus_work** work, Issue&& issue) {
  chorus_work*& out = call.work_output(work);
  out = nullptr;
  auto handle = std::make_unique<chorus_work>();
  handle->context = call.shared_context();
  handle->work = issue();
  out = handle.release();
}

}  // namespace chorus::c_api
