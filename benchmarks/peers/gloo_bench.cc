// Peer driver: the installed Gloo (Debian libgloo) over its TCP transport, or
// over its ibverbs transport with GLOO_BENCH_TRANSPORT=ibverbs (device
// GLOO_BENCH_IB_DEVICE, port 1, GID index GLOO_BENCH_IB_GID), timed and
// printed exactly like chorus-bench. Ranks come from chorus's env
// contract (CHORUS_RANK, CHORUS_SIZE, CHORUS_JOB_ID, CHORUS_SOCKET_IFNAME);
// rendezvous through Gloo's FileStore in GLOO_BENCH_STORE_DIR (a shared directory).
//   gloo-bench --op allreduce --algo ring|ring_chunked|halving_doubling|bcube|all
//   gloo-bench --op broadcast | allgather   (gloo::broadcast, gloo::allgather)
#include <gloo/allgather.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/ibverbs/device.h>
#include <gloo/transport/tcp/device.h>

#include <cstdio>
#include <memory>
#include <stdexcept>

#include "bench_table.h"

namespace {

using namespace chorus::peers;

std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

std::unique_ptr<gloo::Algorithm> make_allreduce(const std::string& algo,
                                                const std::shared_ptr<gloo::Context>& context, float* data,
                                                int count) {
  std::vector<float*> ptrs{data};
  if (algo == "ring") return std::make_unique<gloo::AllreduceRing<float>>(context, ptrs, count);
  if (algo == "ring_chunked") return std::make_unique<gloo::AllreduceRingChunked<float>>(context, ptrs, count);
  if (algo == "halving_doubling")
    return std::make_unique<gloo::AllreduceHalvingDoubling<float>>(context, ptrs, count);
  if (algo == "bcube") return std::make_unique<gloo::AllreduceBcube<float>>(context, ptrs, count);
  throw std::invalid_argument("unknown Gloo allreduce algorithm " + algo +
                              " (ring, ring_chunked, halving_doubling, bcube)");
}

int run(int argc, char** argv) {
  Settings settings = parse_settings(argc, argv);
  const int rank = std::stoi(env_or("CHORUS_RANK", "0"));
  const int size = std::stoi(env_or("CHORUS_SIZE", "1"));
  const std::string store_dir = env_or("GLOO_BENCH_STORE_DIR", "/tmp/gloo-bench-store");
  const std::string job = env_or("CHORUS_JOB_ID", "gloo-bench");

  std::shared_ptr<gloo::transport::Device> device;
  if (env_or("GLOO_BENCH_TRANSPORT", "tcp") == "ibverbs") {
    gloo::transport::ibverbs::attr attr;
    attr.name = env_or("GLOO_BENCH_IB_DEVICE", "");
    attr.port = 1;
    attr.index = std::stoi(env_or("GLOO_BENCH_IB_GID", "0"));
    device = gloo::transport::ibverbs::CreateDevice(attr);
  } else {
    gloo::transport::tcp::attr attr;
    attr.iface = env_or("CHORUS_SOCKET_IFNAME", "lo");
    device = gloo::transport::tcp::CreateDevice(attr);
  }
  gloo::rendezvous::FileStore file_store(store_dir);
  gloo::rendezvous::PrefixStore store(job, file_store);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->connectFullMesh(store, device);

  std::vector<double> scalar(1);
  gloo::AllreduceRing<double> max_reduce(context, {scalar.data()}, 1, gloo::ReductionFunction<double>::max);
  auto max_over_ranks = [&](double value) {
    scalar[0] = value;
    max_reduce.run();
    return scalar[0];
  };

  std::vector<std::string> algos{settings.op == "allreduce" ? settings.algo : settings.op};
  if (settings.op == "allreduce" && (settings.algo.empty() || settings.algo == "all"))
    algos = {"ring", "ring_chunked", "halving_doubling", "bcube"};
  long long total_wrong = 0;
  for (const std::string& algo : algos) {
    if (rank == 0) print_header(settings, "gloo-bench", size, algo);
    for (size_t bytes : sizes(settings)) {
      const size_t count = per_rank_count(settings.op, size, bytes);
      if (count == 0) continue;
      std::vector<float> input(count), output(settings.op == "allgather" ? count * size : count);
      auto fill = [&] {
        for (size_t i = 0; i < count; ++i) input[i] = input_value(rank, i);
      };
      fill();
      std::function<void()> once;
      std::unique_ptr<gloo::Algorithm> allreduce;
      if (settings.op == "allreduce") {
        allreduce = make_allreduce(algo, context, input.data(), int(count));
        once = [&] { allreduce->run(); };
      } else if (settings.op == "broadcast") {
        once = [&] {
          gloo::BroadcastOptions options(context);
          if (rank == 0) options.setInput(input.data(), count);
          options.setOutput(input.data(), count);
          options.setRoot(0);
          gloo::broadcast(options);
        };
      } else {
        once = [&] {
          gloo::AllgatherOptions options(context);
          options.setInput(input.data(), count);
          options.setOutput(output.data(), count * size);
          gloo::allgather(options);
        };
      }
      long long wrong = 0;
      if (settings.check) {
        once();
        wrong = count_wrong(settings, rank, size, settings.op == "allgather" ? output : input, count);
        scalar[0] = double(wrong);
        gloo::AllreduceRing<double> sum(context, {scalar.data()}, 1);
        sum.run();
        wrong = (long long)scalar[0];
        total_wrong += wrong;
      }
      const double seconds = time_collective(settings, once, max_over_ranks);
      if (rank == 0) print_row(settings, size, count, seconds, wrong);
    }
  }
  if (rank == 0 && settings.check)
    std::printf("# %s: %lld wrong elements in total\n", total_wrong ? "FAILED" : "OK", total_wrong);
  return total_wrong ? 3 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gloo-bench rank %s: %s\n", env_or("CHORUS_RANK", "?").c_str(), error.what());
    return 1;
  }
}
