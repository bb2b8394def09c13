// The libchorus half of memory/cuda/runtime.h: loads libchorus_cuda.so and
// builds the runtime, the per-device memory backends and stream ordering on
// its calls (memory/cuda/module_api.h). Everything here throws chorus errors;
// the module only reports strings.
#include "memory/cuda/runtime.h"

#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "memory/cuda/deferred_frees.h"
#include "memory/cuda/event_fences.h"
#include "memory/cuda/module_api.h"
#include "memory/cuda/nccl_communicator.h"
#include "memory/cuda/stream_flags.h"
#include "base/error.h"
#include "base/log.h"
#include "base/module_loader.h"

namespace chorus::cuda {
namespace {

[[noreturn]] void throw_cuda(const std::string& what, CudaStatus status) {
  throw IoError(cat(what, ": ", status));
}

void check(CudaStatus status, const std::string& what) {
  if (status) throw_cuda(what, status);
}

// What one thread keeps per device: its stream (every copy and kernel of
// the collectives it runs), its scratch and its staging buffer.
struct ThreadDevice {
  void* stream = nullptr;
  std::byte* scratch = nullptr;
  size_t scratch_bytes = 0;
  // A padded upload's pinned bounce and device landing (kPaddedUploadBytes each).
  std::byte* upload_bounce = nullptr;
  std::byte* upload_landing = nullptr;
  bool queueing = false;  // between begin_queueing and finish_queued: no wait per operation
  std::optional<EventFences> fences;  // on `stream`, made with the first fence
};

class ModuleRuntime;

// Several processes sharing a GPU by time slices: on the H200 (2026-11-30,
// benchmarks/cuda/copy_latency.cu) a copy to the device under 32 KiB waited
// for the process's turn (274 us per other process), one of 32 KiB did not.
// With CHORUS_CUDA_PADDED_UPLOAD=1 a small upload goes as 32 KiB to device
// scratch, then from there to the buffer on the device. Off by default:
// whether that device-to-device copy waits for the turn too is unmeasured
// (the probe's h2d_padded and d2d_sync rows will say).
constexpr size_t kPaddedUploadBytes = size_t{32} << 10;

bool padded_uploads() {
  static const bool wanted = [] {
    const char* value = std::getenv("CHORUS_CUDA_PADDED_UPLOAD");
    return value && std::strcmp(value, "1") == 0;
  }();
  return wanted;
}

class DeviceBackend final : public MemoryBackend {
 public:
  DeviceBackend(ModuleRuntime& runtime, int device) : runtime_(runtime), device_(device) {}
  Memory memory() const override { return Memory::cuda(device_); }
  std::byte* thread_scratch(size_t bytes) override;
  std::shared_ptr<std::byte> allocate(size_t bytes) override;
  void copy(std::byte* to, const std::byte* from, size_t bytes) override;
  void reduce(DataType type, ReduceOp op, std::byte* accumulator, const std::byte* operand, size_t count) override;
  void average(DataType type, std::byte* data, size_t count, size_t ranks) override;
  void begin_queueing() override;
  void finish_queued() override;
  bool orders_by_fences() const override;
  uint64_t record_fence() override;
  bool fence_passed(uint64_t fence) override;

 private:
  // Waits for the thread's stream unless it is queueing.
  void finish_unless_queueing(ThreadDevice& entry, const char* what);

  ModuleRuntime& runtime_;
  const int device_;
};

class ModuleRuntime final : public Runtime {
 public:
  explicit ModuleRuntime(const ModuleApi& api)
      : api_(api),
        frees_([this](void* pointer, DeferredFrees::Kind kind) { free_now(pointer, kind); }),
        flags_([this](size_t count) { return allocate_flags(count); },
               [this](uint32_t* block) { api_.host_free(block); }) {
    int count = 0;
    if (CudaStatus status = api_.device_count(&count)) {
      no_device_reason_ = status;
      count = 0;
    } else if (count == 0) {
      no_device_reason_ = "the CUDA driver reports no device";
    }
    devices_ = count;
    for (int device = 0; device < count; ++device) backends_.push_back(std::make_unique<DeviceBackend>(*this, device));
    spare_streams_.resize(static_cast<size_t>(count));
  }

  int device_count() override { return devices_; }
  std::string no_device_reason() override { return no_device_reason_; }

  PointerInfo describe(const void* pointer) override {
    if (devices_ == 0) return {};
    int kind = 0, device = -1;
    check(api_.describe_pointer(pointer, &kind, &device), "asking CUDA what a buffer is");
    PointerInfo info;
    info.kind = kind == 1 ? PointerKind::device : kind == 2 ? PointerKind::managed : PointerKind::host;
    info.device = info.kind == PointerKind::host ? -1 : device;
    return info;
  }

  MemoryBackend& backend(int device) override {
    check_device(device);
    return *backends_[static_cast<size_t>(device)];
  }

  std::byte* staging_buffer(size_t bytes) override {
    thread_local Pinned staging;
    if (bytes > staging.bytes) {
      staging.reset(*this, nullptr, 0);
      void* pointer = nullptr;
      check(api_.host_allocate(bytes, &pointer), "allocating pinned host memory for a staged collective");
      staging.reset(*this, static_cast<std::byte*>(pointer), bytes);
    }
    return staging.data;
  }

  std::byte* allocate_pinned(size_t bytes) override {
    void* pointer = nullptr;
    check(api_.host_allocate(bytes, &pointer), "allocating pinned host memory");
    return static_cast<std::byte*>(pointer);
  }
  void free_pinned(std::byte* data) override { frees_.free(data, DeferredFrees::Kind::pinned); }

  void copy_to_host(std::byte* host, const std::byte* device_memory, size_t bytes, int device) override {
    copy_and_wait(host, device_memory, bytes, device, "copying from cuda:");
  }
  void copy_to_device(std::byte* device_memory, const std::byte* host, size_t bytes, int device) override {
    if (bytes > 0 && bytes < kPaddedUploadBytes && padded_uploads())
      return padded_upload(device_memory, host, bytes, device);
    copy_and_wait(device_memory, host, bytes, device, "copying to cuda:");
  }
  void copy(std::byte* to, const std::byte* from, size_t bytes, int device) override {
    copy_and_wait(to, from, bytes, device, "copying on cuda:");
  }

  IpcExport ipc_export(const void* pointer, int device) override {
    check_device(device);
    IpcExport exported;
    void* base = nullptr;
    check(api_.ipc_export(device, pointer, &base, &exported.allocation_bytes, &exported.buffer_id,
                          exported.handle.data()),
          cat("exporting a buffer of cuda:", device, " for CUDA IPC"));
    exported.base = static_cast<const std::byte*>(base);
    return exported;
  }

  std::byte* ipc_open(const std::array<unsigned char, 64>& handle, int device) override {
    check_device(device);
    void* pointer = nullptr;
    check(api_.ipc_open(handle.data(), device, &pointer), cat("opening a peer's device buffer on cuda:", device));
    return static_cast<std::byte*>(pointer);
  }

  std::string pci_bus_id(int device) override {
    check_device(device);
    char id[32] = {};
    check(api_.pci_bus_id(device, id), cat("asking the PCI bus id of cuda:", device));
    return std::string(id, strnlen(id, sizeof(id)));
  }

  uint64_t time_sliced_device() override {
    int device = 0, mps = 0;
    if (devices_ == 0 || api_.current_device(&device) || api_.mps_enabled(device, &mps) || mps) return 0;
    char bus[32] = {};
    if (api_.pci_bus_id(device, bus)) return 0;
    // FNV-1a of the bus id (one GPU's name in every process, whatever its
    // ordinal there), kept to 52 bits: the job view carries it as a double.
    uint64_t hash = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof(bus) && bus[i]; ++i)
      hash = (hash ^ static_cast<unsigned char>(bus[i])) * 0x100000001b3ull;
    return (hash & ((uint64_t{1} << 52) - 1)) | 1;
  }

  void synchronize(void* stream, int device) override {
    check(api_.set_device(device), cat("selecting cuda:", device));
    wait(device, stream, "waiting for a stream");
  }

  NcclUniqueId nccl_unique_id() override {
    NcclUniqueId id{};
    check(api_.nccl_unique_id(id.data()), "making an NCCL unique id");
    return id;
  }

  std::unique_ptr<NcclCommunicator> nccl_communicator(int ranks, const NcclUniqueId& id, int rank,
                                                      int device) override;

  void ipc_close(std::byte* pointer) override {
    if (CudaStatus status = api_.ipc_close(pointer))
      CHORUS_LOG(warn, -1, "closing a peer's device buffer: ", status);
  }

  std::unique_ptr<StreamOrder> order_on_stream(void* stream, int device, bool async) override;

  // For the backends and stream orders.
  const ModuleApi& api() const { return api_; }
  StreamFlags& flags() { return flags_; }
  // Every free of device or pinned memory goes here (deferred_frees.h).
  DeferredFrees& frees() { return frees_; }

  void check_device(int device) const {
    if (devices_ == 0)
      throw InvalidArgument(cat("CUDA memory (cuda:", device, ") but this process has no CUDA device: ",
                                no_device_reason_));
    if (device < 0 || device >= devices_)
      throw InvalidArgument(cat("CUDA device ", device, " does not exist (this process sees ", devices_,
                                devices_ == 1 ? " device)" : " devices)"));
  }

  // The calling thread's state for `device`, its stream made on first use.
  ThreadDevice& thread_device(int device) {
    check_device(device);
    ThreadDevice& entry = thread_entry(device);
    if (!entry.stream) entry.stream = take_stream(device);
    else check(api_.set_device(device), cat("selecting cuda:", device));
    return entry;
  }
  // The same state without making `device` current: for calls that need no
  // current device, asked in loops where a cudaSetDevice per call would
  // cost (event queries; the programming guide's "Stream and Event
  // Behavior": they succeed whatever device is current, as c10's
  // CUDAEvent::query relies on too).
  ThreadDevice& thread_device_unselected(int device) { return thread_entry(device); }

  // Streams. Creating one while a caller's stream waits on a flag can wait
  // for that flag. On the H200 (2026-12-04), in test_cuda_device after the
  // earlier cases had run in the process (each thread then kept its stream
  // for good), a fresh worker's first stream, made during an async call,
  // blocked in cuStreamCreate, so the flag it was to set never was; another
  // worker's cudaHostAlloc waited on the driver's lock behind it. Alone, the
  // case passed. So a thread that ends hands its stream on to the next, and
  // each collective brings a stream for its worker, taken (or made) by the
  // issuing thread before it queues anything on the caller's stream.
  void* reserve_stream(int device) {
    check_device(device);
    return take_stream(device);
  }
  // On the thread that runs the collective: `reserved` becomes its stream
  // for `device` if it has none, else goes back to the spares.
  void adopt_stream(int device, void*& reserved) {
    if (!reserved) return;
    ThreadDevice& entry = thread_entry(device);
    if (!entry.stream) entry.stream = reserved;
    else return_stream(device, reserved);
    reserved = nullptr;
  }
  void return_stream(int device, void* stream) {
    std::lock_guard lock(streams_mutex_);
    spare_streams_[static_cast<size_t>(device)].push_back(stream);
  }

  void wait(int device, void* stream, const char* what) {
    check(api_.stream_synchronize(stream), cat(what, " on cuda:", device));
  }

 private:
  struct Pinned {
    ModuleRuntime* runtime = nullptr;
    std::byte* data = nullptr;
    size_t bytes = 0;
    void reset(ModuleRuntime& owner, std::byte* pointer, size_t size) {
      if (data) runtime->frees().free(data, DeferredFrees::Kind::pinned);
      runtime = &owner;
      data = pointer;
      bytes = size;
    }
    ~Pinned() {
      if (data) runtime->frees().free(data, DeferredFrees::Kind::pinned);
    }
  };

  // Freed when the thread ends (errors ignored: at process exit the CUDA
  // runtime may already be gone).
  struct ThreadState {
    ModuleRuntime* runtime = nullptr;
    std::vector<ThreadDevice> devices;
    ~ThreadState() {
      for (size_t device = 0; device < devices.size(); ++device) {
        ThreadDevice& entry = devices[device];
        // Idle: every operation on it was waited for.
        if (entry.stream) runtime->return_stream(static_cast<int>(device), entry.stream);
        runtime->frees().free(entry.scratch, DeferredFrees::Kind::device);
        runtime->frees().free(entry.upload_landing, DeferredFrees::Kind::device);
        runtime->frees().free(entry.upload_bounce, DeferredFrees::Kind::pinned);
        if (entry.fences) entry.fences->release();
      }
    }
  };

  ThreadDevice& thread_entry(int device) {
    thread_local ThreadState state;
    if (state.devices.size() <= static_cast<size_t>(device)) state.devices.resize(static_cast<size_t>(device) + 1);
    state.runtime = this;
    return state.devices[static_cast<size_t>(device)];
  }

  void* take_stream(int device) {
    {
      std::lock_guard lock(streams_mutex_);
      std::vector<void*>& spares = spare_streams_[static_cast<size_t>(device)];
      if (!spares.empty()) {
        void* stream = spares.back();
        spares.pop_back();
        check(api_.set_device(device), cat("selecting cuda:", device));
        return stream;
      }
    }
    void* stream = nullptr;
    check(api_.stream_create(device, &stream), cat("creating a stream on cuda:", device));
    return stream;
  }

  void free_now(void* pointer, DeferredFrees::Kind kind) {
    const bool pinned = kind == DeferredFrees::Kind::pinned;
    if (CudaStatus status = pinned ? api_.host_free(pointer) : api_.device_free(pointer))
      CHORUS_LOG(warn, -1, pinned ? "freeing pinned host memory: " : "freeing device memory: ", status);
  }

  uint32_t* allocate_flags(size_t count) {
    void* pointer = nullptr;
    check(api_.host_allocate(count * sizeof(uint32_t), &pointer), "allocating pinned stream flags");
    std::memset(pointer, 0, count * sizeof(uint32_t));
    return static_cast<uint32_t*>(pointer);
  }

  void padded_upload(std::byte* device_memory, const std::byte* host, size_t bytes, int device) {
    ThreadDevice& entry = thread_device(device);
    if (!entry.upload_bounce) {
      void* bounce = nullptr;
      void* landing = nullptr;
      check(api_.host_allocate(kPaddedUploadBytes, &bounce), "allocating a pinned bounce buffer");
      entry.upload_bounce = static_cast<std::byte*>(bounce);
      check(api_.device_allocate(device, kPaddedUploadBytes, &landing), "allocating device scratch for uploads");
      entry.upload_landing = static_cast<std::byte*>(landing);
    }
    std::memcpy(entry.upload_bounce, host, bytes);
    check(api_.copy_async(entry.upload_landing, entry.upload_bounce, kPaddedUploadBytes, entry.stream),
          cat("copying to cuda:", device));
    check(api_.copy_async(device_memory, entry.upload_landing, bytes, entry.stream), cat("copying on cuda:", device));
    wait(device, entry.stream, "copying to cuda:");
  }

  void copy_and_wait(std::byte* to, const std::byte* from, size_t bytes, int device, const char* what) {
    if (bytes == 0) return;
    ThreadDevice& entry = thread_device(device);
    check(api_.copy_async(to, from, bytes, entry.stream), cat(what, device));
    wait(device, entry.stream, what);
  }

  const ModuleApi& api_;
  DeferredFrees frees_;
  int devices_ = 0;
  std::string no_device_reason_;
  std::vector<std::unique_ptr<DeviceBackend>> backends_;
  StreamFlags flags_;
  std::mutex streams_mutex_;
  std::vector<std::vector<void*>> spare_streams_;  // per device: streams of threads that ended, or reserved unused
};

// Issue-time event on the caller's stream (inputs), and for async calls a
// flag the caller's stream waits on (results).
class ModuleStreamOrder final : public StreamOrder {
 public:
  ModuleStreamOrder(ModuleRuntime& runtime, void* stream, int device, bool async)
      : runtime_(runtime), device_(device) {
    const ModuleApi& api = runtime.api();
    runtime.check_device(device);
    reserved_stream_ = runtime.reserve_stream(device);  // before anything waits (ModuleRuntime::reserve_stream)
    check(api.event_create(device, &event_), cat("creating an event on cuda:", device));
    check(api.event_record(event_, stream), cat("recording an event on the caller's stream of cuda:", device));
    if (async) {
      // Until finished(), no free may run (deferred_frees.h).
      runtime.frees().begin_wait([&] {
        ticket_ = runtime.flags().take();
        if (CudaStatus status = api.stream_wait_flag(stream, ticket_.flag, ticket_.value)) {
          runtime.flags().release(ticket_);
          throw_cuda(cat("ordering the caller's stream of cuda:", device, " after an async collective"), status);
        }
      });
      holding_ticket_ = true;
    }
  }

  ~ModuleStreamOrder() override {
    finished();
    if (event_) runtime_.api().event_destroy(event_);
    if (reserved_stream_) runtime_.return_stream(device_, reserved_stream_);
  }

  // Polled rather than cudaEventSynchronize'd, so a stream that never gets
  // there (waiting on something that waits for this call) is a TimeoutError
  // that says so, not a hang. For 10 ms the thread yields between looks, as
  // cudaEventSynchronize does by default with more contexts than cores (a
  // kernel just queued ends within that); then it sleeps 1 ms between them.
  void inputs_ready(const Deadline& deadline) override {
    runtime_.adopt_stream(device_, reserved_stream_);
    const auto started = Clock::now();
    for (;;) {
      int done = 0;
      check(runtime_.api().event_query(event_, &done), cat("waiting for the caller's stream of cuda:", device_));
      if (done) return;
      if (deadline.expired())
        throw TimeoutError(cat("the work queued on the caller's stream of cuda:", device_,
                               " before this call had not ended after ", deadline.timeout().count(),
                               " ms; the call reads its buffers only after it (is that stream waiting for "
                               "something that waits for this call?)"));
      if (Clock::now() - started < std::chrono::milliseconds(10)) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  void finished() override {
    if (!holding_ticket_) return;
    holding_ticket_ = false;
    runtime_.flags().release(ticket_);
    runtime_.frees().end_wait();
  }

 private:
  ModuleRuntime& runtime_;
  const int device_;
  void* event_ = nullptr;
  void* reserved_stream_ = nullptr;  // the worker's stream, if it has none yet
  StreamFlags::Ticket ticket_;
  bool holding_ticket_ = false;
};

std::unique_ptr<NcclCommunicator> ModuleRuntime::nccl_communicator(int ranks, const NcclUniqueId& id, int rank,
                                                                   int device) {
  check_device(device);
  void* communicator = nullptr;
  check(api_.nccl_init(ranks, id.data(), rank, device, &communicator),
        cat("making an NCCL communicator of ", ranks, " ranks on cuda:", device));
  return module_nccl_communicator(api_, communicator);
}

std::unique_ptr<StreamOrder> ModuleRuntime::order_on_stream(void* stream, int device, bool async) {
  return std::make_unique<ModuleStreamOrder>(*this, stream, device, async);
}

std::byte* DeviceBackend::thread_scratch(size_t bytes) {
  ThreadDevice& entry = runtime_.thread_device(device_);
  if (bytes > entry.scratch_bytes) {
    if (entry.scratch) {
      runtime_.wait(device_, entry.stream, "finishing work before freeing scratch");
      runtime_.frees().free(entry.scratch, DeferredFrees::Kind::device);
      entry.scratch = nullptr;
      entry.scratch_bytes = 0;
    }
    void* pointer = nullptr;
    check(runtime_.api().device_allocate(device_, bytes, &pointer), "allocating collective scratch");
    entry.scratch = static_cast<std::byte*>(pointer);
    entry.scratch_bytes = bytes;
  }
  return entry.scratch;
}

std::shared_ptr<std::byte> DeviceBackend::allocate(size_t bytes) {
  void* pointer = nullptr;
  check(runtime_.api().device_allocate(device_, bytes, &pointer), "allocating a collective buffer");
  ModuleRuntime* runtime = &runtime_;
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(pointer), [runtime](std::byte* data) {
    runtime->frees().free(data, DeferredFrees::Kind::device);
  });
}

void DeviceBackend::copy(std::byte* to, const std::byte* from, size_t bytes) {
  if (bytes == 0 || to == from) return;
  ThreadDevice& entry = runtime_.thread_device(device_);
  const ModuleApi& api = runtime_.api();
  // cudaMemcpy leaves overlapping ranges undefined; memmove's promise goes
  // through a second buffer.
  const bool overlap = to < from + bytes && from < to + bytes;
  if (overlap) {
    std::shared_ptr<std::byte> between = allocate(bytes);
    check(api.copy_async(between.get(), from, bytes, entry.stream), cat("copying on cuda:", device_));
    check(api.copy_async(to, between.get(), bytes, entry.stream), cat("copying on cuda:", device_));
    // `between` is freed on return: its copies end first.
    runtime_.wait(device_, entry.stream, "copying");
    return;
  }
  check(api.copy_async(to, from, bytes, entry.stream), cat("copying on cuda:", device_));
  finish_unless_queueing(entry, "copying");
}

void DeviceBackend::reduce(DataType type, ReduceOp op, std::byte* accumulator, const std::byte* operand,
                           size_t count) {
  assert(is_valid_reduction(type, op));
  ThreadDevice& entry = runtime_.thread_device(device_);
  check(runtime_.api().reduce_async(static_cast<int>(type), static_cast<int>(op), accumulator, operand, count,
                                    entry.stream),
        cat(to_string(op), " of ", to_string(type), " on cuda:", device_));
  finish_unless_queueing(entry, "reducing");
}

void DeviceBackend::average(DataType type, std::byte* data, size_t count, size_t ranks) {
  ThreadDevice& entry = runtime_.thread_device(device_);
  check(runtime_.api().average_async(static_cast<int>(type), data, count, ranks, entry.stream),
        cat("averaging ", to_string(type), " on cuda:", device_));
  finish_unless_queueing(entry, "averaging");
}

void DeviceBackend::begin_queueing() { runtime_.thread_device(device_).queueing = true; }

void DeviceBackend::finish_queued() {
  runtime_.thread_device_unselected(device_).queueing = false;  // also when selecting the device or the wait throws
  ThreadDevice& entry = runtime_.thread_device(device_);
  runtime_.wait(device_, entry.stream, "finishing queued copies and kernels");
  if (entry.fences) entry.fences->all_passed();  // the stream is idle
}

// The executor's stream-ordered path (algorithms/execution/executor.cc)
// runs only where CHORUS_CUDA_STREAM_ORDERED=1 asks for it, until a GPU
// has measured it against a wait per step (scripts/gpu-test.sh's
// `stream_order` rows); docs/cuda.md says what it changes.
bool DeviceBackend::orders_by_fences() const {
  static const bool wanted = [] {
    const char* value = std::getenv("CHORUS_CUDA_STREAM_ORDERED");
    return value && std::strcmp(value, "1") == 0;
  }();
  return wanted;
}

uint64_t DeviceBackend::record_fence() {
  ThreadDevice& entry = runtime_.thread_device(device_);
  if (!entry.fences) entry.fences.emplace(runtime_.api());
  return entry.fences->record(entry.stream, device_);
}

bool DeviceBackend::fence_passed(uint64_t fence) {
  // Only fences this thread recorded (through thread_device) are asked about.
  ThreadDevice& entry = runtime_.thread_device_unselected(device_);
  return !entry.fences || entry.fences->passed(fence, device_);
}

void DeviceBackend::finish_unless_queueing(ThreadDevice& entry, const char* what) {
  if (!entry.queueing) runtime_.wait(device_, entry.stream, what);
}

Runtime& load_runtime() {
#if CHORUS_HAVE_CUDA
  std::string why;
  const ModuleSymbols symbols{"CUDA", kCudaModuleFile, "CHORUS_CUDA_MODULE", kCudaModuleVersion, kCudaModuleEntry};
  using Entry = const ModuleApi* (*)();
  const auto entry = reinterpret_cast<Entry>(load_module_entry(symbols, why));
  if (!entry) throw InvalidArgument(cat("CUDA memory needs chorus's CUDA module, but ", why));
  const ModuleApi* api = entry();
  if (!api || api->table_version != kModuleApiVersion)
    throw InvalidArgument(cat(kCudaModuleFile, " offers call table version ", api ? api->table_version : 0,
                              ", this library needs ", kModuleApiVersion));
  // Lives as long as the process: thread-local stream state refers to it.
  static ModuleRuntime runtime(*api);
  CHORUS_LOG(debug, -1, "CUDA module loaded: ", runtime.device_count(), " device(s)",
             runtime.device_count() == 0 ? cat(" (", runtime.no_device_reason(), ")") : std::string());
  return runtime;
#else
  throw InvalidArgument("CUDA memory, but this build of chorus has no CUDA support (it was built without the CUDA "
                        "toolkit; see the README's 'GPU memory' section)");
#endif
}

}  // namespace

Runtime& cuda_runtime() {
  // Loaded once; a failure is remembered and repeated, not retried per call.
  static std::once_flag once;
  static Runtime* runtime = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    try {
      runtime = &load_runtime();
    } catch (const Error& error) {
      failure = error.what();
    }
  });
  if (!runtime) throw InvalidArgument(failure);
  return *runtime;
}

}  // namespace chorus::cuda
