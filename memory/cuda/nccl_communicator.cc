// NCCL calls through the module's table (nccl_communicator.h).
#include "memory/cuda/nccl_communicator.h"

#include "base/error.h"
#include "base/log.h"

namespace chorus::cuda {
namespace {

void check(CudaStatus status, const char* what) {
  if (status) throw IoError(cat(what, ": ", status));
}

class ModuleNcclCommunicator final : public NcclCommunicator {
 public:
  ModuleNcclCommunicator(const ModuleApi& api, void* communicator) : api_(api), communicator_(communicator) {}
  ~ModuleNcclCommunicator() override {
    if (CudaStatus status = api_.nccl_destroy(communicator_)) CHORUS_LOG(warn, -1, "destroying an NCCL communicator: ", status);
  }
  void allreduce(const void* input, void* output, size_t count, DataType type, ReduceOp op, void* stream) override {
    check(api_.nccl_allreduce(input, output, count, static_cast<int>(type), static_cast<int>(op), communicator_, stream),
          "NCCL allreduce");
  }
  void reduce(const void* input, void* output, size_t count, DataType type, ReduceOp op, int root,
              void* stream) override {
    check(api_.nccl_reduce(input, output, count, static_cast<int>(type), static_cast<int>(op), root, communicator_,
                           stream),
          "NCCL reduce");
  }
  void broadcast(void* data, size_t count, DataType type, int root, void* stream) override {
    check(api_.nccl_broadcast(data, count, static_cast<int>(type), root, communicator_, stream), "NCCL broadcast");
  }

 private:
  const ModuleApi& api_;
  void* communicator_;
};

}  // namespace

std::unique_ptr<NcclCommunicator> module_nccl_communicator(const ModuleApi& api, void* communicator) {
  return std::make_unique<ModuleNcclCommunicator>(api, communicator);
}

}  // namespace chorus::cuda
