// The C API's registered buffers (chorus_c.h): a handle around
// chorus::RegisteredBuffer.
#include "adapters/c_api/c_api.h"
#include "chorus/registered_buffer.h"

struct chorus_registered_buffer {
  chorus::RegisteredBuffer buffer;
};

using namespace chorus;
using namespace chorus::c_api;

extern "C" {

chorus_status chorus_register_buffer(const void* data, size_t bytes, chorus_registered_buffer** registration) {
  return guarded([&] {
    auto& out = output(registration, nullptr, "chorus_register_buffer", "registration");
    out = new chorus_registered_buffer{register_buffer(data, bytes)};
  });
}

chorus_status chorus_registered_buffer_free(chorus_registered_buffer* registration) {
  return guarded([&] { delete registration; });
}

}  // extern "C"
