// The C API's asynchronous work: waiting (with or without a bound), testing, freeing.
#include <chrono>

#include "adapters/c_api/c_api.h"

namespace chorus::c_api {
namespace {

Work& work_of(chorus_work* handle, const char* function) {
  if (handle == nullptr) throw InvalidArgument(cat(function, " got a null work handle"));
  return handle->work;
}

}  // namespace
}  // namespace chorus::c_api

using namespace chorus;
using c_api::guarded;

extern "C" {

chorus_status chorus_work_wait(chorus_work* work, int64_t timeout_ms) {
  return guarded([&]() -> chorus_status {
    Work& w = c_api::work_of(work, "chorus_work_wait");
    // Past the longest timeout a collective may have, waiting that long is waiting for the end.
    if (timeout_ms < 0 || timeout_ms > c_api::longest_timeout_ms) {
      w.wait();
      return CHORUS_OK;
    }
    return w.wait_for(std::chrono::milliseconds(timeout_ms)) ? CHORUS_OK : CHORUS_IN_PROGRESS;
  });
}

chorus_status chorus_work_test(chorus_work* work, int* done) {
  return guarded([&] {
    Work& w = c_api::work_of(work, "chorus_work_test");
    int& finished = c_api::output(done, nullptr, "chorus_work_test", "done");
    finished = w.test() ? 1 : 0;
    if (!finished) return;
    if (std::exception_ptr error = w.exception()) std::rethrow_exception(error);
  });
}

chorus_status chorus_work_source(chorus_work* work, int* source) {
  return guarded([&] {
    Work& w = c_api::work_of(work, "chorus_work_source");
    c_api::output(source, nullptr, "chorus_work_source", "source") = w.source_rank();
  });
}

chorus_status chorus_work_free(chorus_work* work) {
  return guarded([&] {
    if (work == nullptr) return;
    // Waited for here, so that the caller may reuse the buffers once this
    // returns; its error, if any, finished the context, which reports it.
    try {
      if (!work->work.test()) work->work.wait();
    } catch (...) {
    }
    delete work;
  });
}

}  // extern "C"
