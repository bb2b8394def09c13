// The C API's status codes and per-thread last error, and its version: the
// one place C++ exceptions become C statuses.
#include <new>
#include <string>

#include "adapters/c_api/c_api.h"

namespace chorus::c_api {
namespace {

// Per thread, so that two threads failing at once (one waiting for a work,
// one issuing on another context) each read their own message.
struct LastError {
  std::string message;
  // Set instead of message when copying the message itself ran out of memory.
  const char* fallback = nullptr;
  int peer = -1;
};
thread_local LastError last_error;

chorus_status record(chorus_status status, const char* message, int peer) noexcept {
  last_error.peer = peer;
  try {
    last_error.message = message;
    last_error.fallback = nullptr;
  } catch (...) {
    last_error.fallback = status == CHORUS_OUT_OF_MEMORY
                              ? "out of memory"
                              : "an error whose message could not be kept (out of memory)";
  }
  return status;
}

}  // namespace

chorus_status record_current_exception() noexcept {
  // Most specific classes first: PeerLostError is an IoError, every chorus
  // error is a chorus::Error.
  try {
    throw;
  } catch (const PeerLostError& error) {
    return record(CHORUS_PEER_LOST, error.what(), error.peer_rank());
  } catch (const IoError& error) {
    return record(CHORUS_IO_ERROR, error.what(), error.peer_rank());
  } catch (const TimeoutError& error) {
    return record(CHORUS_TIMEOUT, error.what(), -1);
  } catch (const InvalidArgument& error) {
    return record(CHORUS_INVALID_ARGUMENT, error.what(), -1);
  } catch (const MismatchError& error) {
    return record(CHORUS_MISMATCH, error.what(), -1);
  } catch (const Aborted& error) {
    return record(CHORUS_ABORTED, error.what(), -1);
  } catch (const Error& error) {
    return record(CHORUS_ERROR, error.what(), -1);
  } catch (const std::bad_alloc&) {
    return record(CHORUS_OUT_OF_MEMORY, "out of memory", -1);
  } catch (const std::exception& error) {
    return record(CHORUS_INTERNAL_ERROR, error.what(), -1);
  } catch (...) {
    return record(CHORUS_INTERNAL_ERROR, "an exception of unknown type", -1);
  }
}

Context& context_of(const chorus_context* handle, const char* function) {
  if (handle == nullptr || handle->context == nullptr)
    throw InvalidArgument(cat(function, " got a null context handle"));
  return *handle->context;
}

}  // namespace chorus::c_api

extern "C" {

uint32_t chorus_version(void) { return CHORUS_C_API_VERSION; }

const char* chorus_last_error(void) {
  const auto& error = chorus::c_api::last_error;
  return error.fallback != nullptr ? error.fallback : error.message.c_str();
}

int chorus_last_error_peer(void) { return chorus::c_api::last_error.peer; }

const char* chorus_status_name(chorus_status status) {
  switch (status) {
    case CHORUS_OK: return "CHORUS_OK";
    case CHORUS_INVALID_ARGUMENT: return "CHORUS_INVALID_ARGUMENT";
    case CHORUS_IO_ERROR: return "CHORUS_IO_ERROR";
    case CHORUS_PEER_LOST: return "CHORUS_PEER_LOST";
    case CHORUS_TIMEOUT: return "CHORUS_TIMEOUT";
    case CHORUS_MISMATCH: return "CHORUS_MISMATCH";
    case CHORUS_ABORTED: return "CHORUS_ABORTED";
    case CHORUS_OUT_OF_MEMORY: return "CHORUS_OUT_OF_MEMORY";
    case CHORUS_ERROR: return "CHORUS_ERROR";
    case CHORUS_INTERNAL_ERROR: return "CHORUS_INTERNAL_ERROR";
    case CHORUS_IN_PROGRESS: return "CHORUS_IN_PROGRESS";
    default: return "CHORUS_UNKNOWN_STATUS";
  }
}

}  // extern "C"
