// Builds against the *installed* chorus (pkg-config chorus) and runs a
// two-rank allreduce, ranks as threads, to prove headers and library install
// completely.
#include <chorus/chorus.h>

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

int main() {
  auto store = std::make_shared<chorus::HashStore>();
  std::atomic<int> failures{0};
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      chorus::StoreBootstrap bootstrap(store, rank, 2, std::chrono::seconds(20));
      chorus::ConnectOptions options;
      options.hostname = "127.0.0.1";
      auto context = chorus::connect(bootstrap, options);
      std::vector<float> data(1000, static_cast<float>(rank + 1));
      chorus::allreduce(*context, std::span<float>(data), chorus::ReduceOp::sum);
      for (float value : data) failures += value != 3.0f;
    });
  }
  for (auto& rank : ranks) rank.join();
  std::printf("consumer: %s\n", failures == 0 ? "ok" : "WRONG RESULTS");
  return failures == 0 ? 0 : 1;
}
