// What every rank runs in the launch tests: join the job from whatever
// environment the test set up, allreduce, check the sum bit-exactly and say
// which launcher source was used. Exit 0 on success, 1 with the error's type
// and message otherwise. For a test that needs the job running,
// CHORUS_TEST_LINGER_MS says "rank N joined" once connected and keeps the job
// that long before a second checked allreduce.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "chorus/chorus.h"
#include "rendezvous/launch_env.h"

namespace {

int run() {
  const chorus::LaunchEnv launch = chorus::detect_launch_env(chorus::process_environment());
  auto context = chorus::connect_from_env();
  const int size = context->size();
  const char* linger = std::getenv("CHORUS_TEST_LINGER_MS");
  if (linger) {
    std::printf("rank %d joined\n", context->rank());
    std::fflush(stdout);
  }
  for (int call = 0; call < (linger ? 2 : 1); ++call) {
    if (call > 0) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(linger)));
    // Small integers: every partial sum is exact in float32, so == is the right check.
    constexpr size_t kCount = 4099;
    std::vector<float> data(kCount);
    for (size_t i = 0; i < kCount; ++i) data[i] = static_cast<float>((context->rank() + 1) * (i % 13 + 1));
    chorus::allreduce(*context, std::span(data), chorus::ReduceOp::sum);
    const float rank_sum = static_cast<float>(size * (size + 1) / 2);
    for (size_t i = 0; i < kCount; ++i) {
      float expected = rank_sum * static_cast<float>(i % 13 + 1);
      if (data[i] != expected) {
        std::printf("rank %d: allreduce WRONG at element %zu: %g, expected %g\n", context->rank(), i,
                    static_cast<double>(data[i]), static_cast<double>(expected));
        return 1;
      }
    }
  }
  std::printf("rank %d of %d via %s (job id '%s'): allreduce ok\n", context->rank(), size, launch.source.c_str(),
              launch.job_id.c_str());
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const chorus::InvalidArgument& error) {
    std::fprintf(stderr, "InvalidArgument: %s\n", error.what());
  } catch (const chorus::Error& error) {
    std::fprintf(stderr, "chorus::Error: %s\n", error.what());
  }
  return 1;
}
