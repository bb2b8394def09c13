#include "adapters/tensorflow/context_registry.h"

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "base/types.h"
#include "tensorflow/core/framework/types.h"

namespace chorus::tensorflow_ops {

namespace tf = ::tensorflow;

namespace {

negotiation::Negotiator::Options negotiation_options() {
  negotiation::Negotiator::Options options;
  options.type_name = [](int32_t type) { return tf::DataTypeString(static_cast<tf::DataType>(type)); };
  options.op_name = [](uint8_t op) {
    return op < reduce_op_count ? std::string(to_string(static_cast<ReduceOp>(op))) : "op #" + std::to_string(op);
  };
  return options;
}

}  // namespace

SharedContext::SharedContext(std::shared_ptr<Context> shared)
    : context(std::move(shared)), negotiator(context, negotiation_options()) {}

namespace {

struct Registry {
  std::mutex mutex;
  int64_t next_handle = 1;
  std::map<int64_t, std::shared_ptr<SharedContext>> contexts;
};

// Never destroyed: a kernel may still look a handle up while the process
// exits, after static destructors ran. chorus.tensorflow releases its
// handles itself (shutdown, and at exit).
Registry& registry() {
  static Registry* const instance = new Registry;
  return *instance;
}

}  // namespace

std::shared_ptr<SharedContext> find_context(int64_t handle) {
  Registry& all = registry();
  std::lock_guard lock(all.mutex);
  const auto found = all.contexts.find(handle);
  return found == all.contexts.end() ? nullptr : found->second;
}

}  // namespace chorus::tensorflow_ops

using chorus::tensorflow_ops::SharedContext;

int64_t chorus_tensorflow_adopt_context(const void* shared_context) {
  auto context = *static_cast<const std::shared_ptr<chorus::Context>*>(shared_context);
  auto shared = std::make_shared<SharedContext>(std::move(context));
  auto& all = chorus::tensorflow_ops::registry();
  std::lock_guard lock(all.mutex);
  const int64_t handle = all.next_handle++;
  all.contexts.emplace(handle, std::move(shared));
  return handle;
}

bool chorus_tensorflow_rebind_context(int64_t handle, const void* shared_context) {
  auto context = *static_cast<const std::shared_ptr<chorus::Context>*>(shared_context);
  auto shared = std::make_shared<SharedContext>(std::move(context));
  std::shared_ptr<SharedContext> replaced;
  {
    auto& all = chorus::tensorflow_ops::registry();
    std::lock_guard lock(all.mutex);
    const auto found = all.contexts.find(handle);
    if (found == all.contexts.end()) return false;
    replaced = std::exchange(found->second, std::move(shared));
  }
  // Outside the lock: the last reference stops the old Negotiator.
  return true;
}

void chorus_tensorflow_release_context(int64_t handle) {
  std::shared_ptr<SharedContext> released;
  {
    auto& all = chorus::tensorflow_ops::registry();
    std::lock_guard lock(all.mutex);
    const auto found = all.contexts.find(handle);
    if (found == all.contexts.end()) return;
    released = std::move(found->second);
    all.contexts.erase(found);
  }
  // Outside the lock: the last reference stops the Negotiator and joins its thread.
}
