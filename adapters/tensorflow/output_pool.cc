#include "adapters/tensorflow/output_pool.h"

#include <sys/mman.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <new>

#include "tensorflow/core/framework/allocation_description.pb.h"

namespace chorus::tensorflow_ops {
namespace {

namespace tf = ::tensorflow;

// TensorFlow's CPU kernels (Eigen) expect 64-byte alignment.
constexpr size_t kAlignment = 64;
// Blocks this large are laid on huge pages: shared memory's single copy
// (process_vm_readv) pins the pages it moves one by one, and a 16 MiB
// allreduce out of place took 5.5 ms on 4 KiB pages against 3.3 ms on
// 2 MiB ones (numpy advises huge pages for its large arrays; TensorFlow's
// allocator does not).
constexpr size_t kHugePage = size_t{2} << 20;

void* allocate_block(size_t bytes) {
  const bool huge = bytes >= kHugePage;
  const size_t alignment = huge ? kHugePage : kAlignment;
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* block = std::aligned_alloc(alignment, rounded);
  if (!block) throw std::bad_alloc();
  // Advice only: where the kernel has no transparent huge pages, 4 KiB ones serve.
  if (huge) ::madvise(block, rounded, MADV_HUGEPAGE);
  return block;
}

class BlockPool {
 public:
  void* take(size_t bytes) {
    {
      std::lock_guard lock(mutex_);
      if (auto found = free_.find(bytes); found != free_.end()) {
        void* block = found->second;
        free_.erase(found);
        kept_bytes_ -= bytes;
        return block;
      }
    }
    return allocate_block(bytes);
  }

  void give_back(void* block, size_t bytes) {
    {
      std::lock_guard lock(mutex_);
      if (kept_bytes_ + bytes <= kPoolKeepsBytes) {
        free_.emplace(bytes, block);
        kept_bytes_ += bytes;
        return;
      }
    }
    std::free(block);
  }

 private:
  std::mutex mutex_;
  std::multimap<size_t, void*> free_;  // by exact size: a step asks for the sizes it asked before
  size_t kept_bytes_ = 0;
};

// Never destroyed: a tensor may give its block back while the process
// exits, after static destructors ran.
BlockPool& pool() {
  static BlockPool* const instance = new BlockPool;
  return *instance;
}

class PooledBuffer final : public tf::TensorBuffer {
 public:
  explicit PooledBuffer(size_t bytes) : tf::TensorBuffer(pool().take(bytes)), bytes_(bytes) {}
  ~PooledBuffer() override { pool().give_back(data(), bytes_); }

  size_t size() const override { return bytes_; }
  tf::TensorBuffer* root_buffer() override { return this; }
  void FillAllocationDescription(tf::AllocationDescription* description) const override {
    description->set_requested_bytes(static_cast<int64_t>(bytes_));
    description->set_allocator_name("chorus output pool");
  }

 private:
  size_t bytes_;
};

}  // namespace

absl::Status allocate_pooled_output(tf::OpKernelContext* context, int index, const tf::TensorShape& shape,
                                    tf::Tensor** output) {
  const tf::DataType type = context->expected_output_dtype(index);
  const size_t bytes = static_cast<size_t>(shape.num_elements()) * static_cast<size_t>(tf::DataTypeSize(type));
  if (bytes < kPooledMinBytes) return context->allocate_output(index, shape, output);
  try {
    tf::Tensor tensor(type, shape, tf::core::RefCountPtr<tf::TensorBuffer>(new PooledBuffer(bytes)));
    context->set_output(index, tensor);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError("chorus: cannot allocate an output of " + std::to_string(bytes) + " bytes");
  }
  *output = context->mutable_output(index);
  return absl::OkStatus();
}

absl::Status forward_or_allocate_pooled(tf::OpKernelContext* context, int input, int output,
                                        const tf::TensorShape& shape, tf::Tensor** result) {
  if (context->forward_input_to_output_with_shape(input, output, shape, result)) return absl::OkStatus();
  return allocate_pooled_output(context, output, shape, result);
}

}  // namespace chorus::tensorflow_ops
