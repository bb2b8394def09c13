// The Store base class's batch read for stores that cannot batch.
#include "rendezvous/store.h"

#include "rendezvous/store_common.h"

namespace chorus {

std::vector<std::vector<std::byte>> Store::get_many(const std::vector<std::string>& keys,
                                                    std::chrono::milliseconds timeout) {
  // wait() first, so a timeout names every missing key against the caller's
  // timeout; the gets then find their keys at once.
  Deadline deadline = store_detail::deadline_after(timeout);
  wait(keys, timeout);
  std::vector<std::vector<std::byte>> values;
  values.reserve(keys.size());
  for (const auto& key : keys) values.push_back(get(key, deadline.remaining()));
  return values;
}

}  // namespace chorus
