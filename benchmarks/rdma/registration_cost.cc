// What pinning a buffer for one message costs on this RDMA device: the time
// of ibv_reg_mr + ibv_dereg_mr, which the ibverbs transport pays per large
// message from memory nobody registered where the device has no on-demand
// paging (docs/ibverbs.md, "Registration"). benchmarks/rdma/in_vm.sh runs it
// beside perftest; benchmarks/README.md records what it printed.
//   chorus-registration-cost [DEVICE]     (default: the first device)
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  int count = 0;
  ibv_device** devices = ibv_get_device_list(&count);
  if (!devices || count == 0) {
    std::fprintf(stderr, "chorus-registration-cost: no RDMA device\n");
    return 1;
  }
  ibv_device* chosen = devices[0];
  if (argc > 1) {
    chosen = nullptr;
    for (int i = 0; i < count; ++i)
      if (std::string(ibv_get_device_name(devices[i])) == argv[1]) chosen = devices[i];
    if (!chosen) {
      std::fprintf(stderr, "chorus-registration-cost: no RDMA device named %s\n", argv[1]);
      return 1;
    }
  }
  ibv_context* context = ibv_open_device(chosen);
  ibv_pd* domain = context ? ibv_alloc_pd(context) : nullptr;
  if (!domain) {
    std::fprintf(stderr, "chorus-registration-cost: cannot open %s\n", ibv_get_device_name(chosen));
    return 1;
  }
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  std::printf("# %s: ibv_reg_mr + ibv_dereg_mr of a touched buffer, 20 times per size\n", ibv_get_device_name(chosen));
  std::printf("%12s %12s %12s %12s\n", "bytes", "best_us", "median_us", "GB/s_best");
  for (size_t bytes : {size_t{64} << 10, size_t{1} << 20, size_t{8} << 20}) {
    std::vector<std::byte> buffer(bytes, std::byte{1});
    std::vector<double> micros;
    for (int i = 0; i < 20; ++i) {
      const auto started = std::chrono::steady_clock::now();
      ibv_mr* region = ibv_reg_mr(domain, buffer.data(), bytes, access);
      if (!region) {
        std::fprintf(stderr, "chorus-registration-cost: ibv_reg_mr of %zu bytes failed: %s (ulimit -l?)\n", bytes,
                     std::strerror(errno));
        return 1;
      }
      ibv_dereg_mr(region);
      micros.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count());
    }
    std::sort(micros.begin(), micros.end());
    std::printf("%12zu %12.1f %12.1f %12.3f\n", bytes, micros.front(), micros[micros.size() / 2],
                static_cast<double>(bytes) / micros.front() / 1e3);
  }
  ibv_dealloc_pd(domain);
  ibv_close_device(context);
  ibv_free_device_list(devices);
  return 0;
}
