#include "benchmarks/bench_connect.h"

#include <cstdlib>

namespace chorus::bench {

bool launched_by_a_launcher() { return std::getenv("CHORUS_RANK") != nullptr; }

std::shared_ptr<Context> connect_for_benchmark(const ConnectOptions& options) { return connect_from_env(options); }

}  // namespace chorus::bench
