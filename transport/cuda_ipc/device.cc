// The cuda_ipc Device and Pair: host memory straight through the inner
// transport; device memory by the pull protocol of cuda_ipc.h, driven by one
// worker thread per Device.
//
// A device-memory message, step by step:
//   sender    posts the descriptor (IPC handle, offset, length) with the
//             message's own tag, so the receiver's tag and signature checks
//             apply to it as to any message, and a receive for the ack;
//   receiver  gets the descriptor, checks it (length included: a mismatch
//             fails before a byte moves), maps the allocation (cached), copies
//             the bytes into its buffer on its stream and waits for the copy,
//             completes its receive, then sends the 8-byte ack;
//   sender    completes its send when the ack arrives: until then the
//             receiver may still be reading its buffer.
// An eager send (point-to-point: it must finish without the receiver) is
// copied into a device buffer of the transport's first, and completes at once.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <mutex>

#include "memory/cuda/runtime.h"
#include "base/error.h"
#include "base/log.h"
#include "transport/cuda_ipc/address.h"
#include "transport/decorated_device.h"
#include "transport/cuda_ipc/cuda_ipc.h"
#include "transport/cuda_ipc/descriptor.h"
#include "transport/cuda_ipc/import_cache.h"

namespace chorus::transport::cuda_ipc {
namespace {

// The ack travels in a group of its own, so it never matches a message of
// the Context's, and with a signature no call has.
constexpr uint64_t kAckGroupSalt = 0xC0DA1BC0FFEE5EEDull;
constexpr uint64_t kAckSignature = 0xFFFFFFFFFFFFFFFEull;

Tag ack_tag(const Tag& tag) { return Tag{tag.value, kAckSignature, tag.group ^ kAckGroupSalt}; }

// Whether to offer CUDA IPC: when this process already talks to the CUDA
// driver (offering costs nothing more, and a job that never touched CUDA
// does not load it on our account), or when the job named the transport.
bool cuda_usable(bool asked) {
  void* driver = ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!driver && !asked) return false;
  if (driver) ::dlclose(driver);
  try {
    return cuda::cuda_runtime().device_count() > 0;
  } catch (const Error&) {
    return false;
  }
}

class CudaIpcDevice;

// Where `data` lies: its allocation's IPC handle, base and id, and the
// offset into it (nothing but the length for an empty message).
IpcDescriptor describe(IpcMemory& memory, std::span<const std::byte> data, int device) {
  IpcDescriptor descriptor;
  if (!data.empty()) {
    const cuda::IpcExport region = memory.export_region(data.data(), device);
    descriptor.handle = region.handle;
    descriptor.base = reinterpret_cast<uint64_t>(region.base);
    descriptor.buffer_id = region.buffer_id;
    descriptor.allocation_bytes = region.allocation_bytes;
    descriptor.offset = static_cast<uint64_t>(data.data() - region.base);
  }
  descriptor.length = data.size();
  return descriptor;
}

using CudaIpcPair = KindPair<CudaIpcDevice>;

// One device-memory message in flight.
struct Transfer {
  Direction direction;
  CudaIpcPair* pair = nullptr;
  Request* user = nullptr;  // null once the user's request is settled
  Tag tag;
  std::span<std::byte> data;
  int device = 0;
  std::array<std::byte, kDescriptorBytes> descriptor{};
  uint64_t ack = 0;
  Request control;  // send: the descriptor out; receive: the descriptor in
  Request acknowledgement;  // send: the ack in; receive: the ack out
  bool copied = false;
  std::shared_ptr<std::byte> eager_copy;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  bool stall_reported = false;
};

const char* state_name(Request::State state) {
  switch (state) {
    case Request::State::idle: return "not posted";
    case Request::State::pending: return "pending";
    case Request::State::done: return "done";
    case Request::State::failed: return "failed";
  }
  return "?";
}

// How long a device message may be in flight before the worker says where
// it stands (once per message), beside the executor's own stall warning:
// that one names the message, this one the step of the protocol it is at.
constexpr auto kStallReport = std::chrono::seconds(10);

class CudaIpcDevice final : public TransferDevice<Transfer> {
 public:
  CudaIpcDevice(int rank, std::unique_ptr<Device> inner, std::shared_ptr<IpcMemory> memory, bool move_messages)
      : TransferDevice(std::move(inner)),
        rank_(rank),
        move_messages_(move_messages),
        memory_(std::move(memory)),
        imports_([this](const IpcDescriptor& descriptor) { return open_import(descriptor); },
                 [this](std::byte* local) { memory_->close(local); }) {
    start_worker();
  }

  ~CudaIpcDevice() override {
    stop_worker_and_close_inner();
    std::lock_guard lock(mutex_);
    fail_all(std::make_exception_ptr(Aborted(cat("rank ", rank_, ": the device was closed with this message in flight"))));
    imports_.clear();
  }

  std::string_view name() const override { return "cuda_ipc"; }
  std::vector<std::byte> address() const override {
    return wrap_address(static_cast<uint64_t>(::getpid()), inner().address());
  }
  void check_peer(int peer_rank, std::span<const std::byte> peer_address) const override {
    inner().check_peer(peer_rank, inner_of(peer_rank, peer_address));
  }
  std::unique_ptr<Pair> connect(int peer_rank, std::span<const std::byte> peer_address, Deadline deadline,
                                int stream) override {
    return std::make_unique<CudaIpcPair>(*this,
                                         inner().connect(peer_rank, inner_of(peer_rank, peer_address), deadline, stream));
  }
  KnockAnswer knock(int peer_rank, std::span<const std::byte> peer_address) const override {
    return inner().knock(peer_rank, inner_of(peer_rank, peer_address));
  }
  bool accepts(const Memory& memory) const override {
    return memory.on_host() || moves_itself(memory) || inner().accepts(memory);
  }
  bool moves_itself(const Memory& memory) const { return move_messages_ && memory.kind == MemoryKind::cuda; }
  std::shared_ptr<Registration> register_memory(std::span<const std::byte> data, Memory memory) override {
    return inner().register_memory(data, moves_itself(memory) ? Memory::host() : memory);
  }
  void start(CudaIpcPair& pair, Direction direction, Request& user, Tag tag, std::span<std::byte> data,
             int device);

  bool maps_peer_memory(const Memory& memory) const override { return memory.kind == MemoryKind::cuda; }
  std::vector<std::byte> export_memory(std::span<const std::byte> data, const Memory& memory) override;
  std::byte* map_peer_memory(int peer_rank, std::span<const std::byte> exported, const Memory& memory) override;

 private:
  std::span<const std::byte> inner_of(int peer_rank, std::span<const std::byte> address) const {
    const auto inner = inner_address(address);
    if (!inner)
      throw InvalidArgument(cat("rank ", rank_, ": rank ", peer_rank, " published no cuda_ipc address"));
    return *inner;
  }

  std::byte* open_import(const IpcDescriptor& descriptor) {
    return memory_->open(descriptor.handle, current_device_);
  }

  bool advance(Transfer& transfer) override;
  void fail_all(std::exception_ptr reason) override;
  void on_worker_round() override;

  const int rank_;
  const bool move_messages_;
  std::shared_ptr<IpcMemory> memory_;
  ImportCache imports_;     // under mutex_, like the transfers
  int current_device_ = 0;  // the device the worker maps onto (set per transfer)
};

void CudaIpcDevice::start(CudaIpcPair& pair, Direction direction, Request& user, Tag tag,
                          std::span<std::byte> data, int device) {
  user.mark_pending();
  auto transfer = std::make_unique<Transfer>();
  transfer->direction = direction;
  transfer->pair = &pair;
  transfer->user = &user;
  transfer->tag = tag;
  transfer->data = data;
  transfer->device = device;
  transfer->control.attach(&signal_);
  transfer->acknowledgement.attach(&signal_);
  try {
    if (direction == Direction::send) {
      std::span<std::byte> exported = data;
      if (tag.eager && !data.empty()) {
        transfer->eager_copy = memory_->allocate(data.size(), device);
        memory_->copy(transfer->eager_copy.get(), data.data(), data.size(), device);
        exported = {transfer->eager_copy.get(), data.size()};
      }
      transfer->descriptor = encode_descriptor(describe(*memory_, exported, device));
    }
  } catch (...) {
    user.fail(std::current_exception());
    return;
  }
  std::lock_guard lock(mutex_);
  if (std::exception_ptr failed = failure()) {
    user.fail(failed);
    return;
  }
  Pair& inner = pair.inner();
  Transfer& posted = *transfer;
  transfers_.push_back(std::move(transfer));
  if (direction == Direction::send) {
    inner.post_send(posted.control, tag, posted.descriptor, Memory::host());
    inner.post_recv(posted.acknowledgement, ack_tag(tag),
                    std::span<std::byte>(reinterpret_cast<std::byte*>(&posted.ack), sizeof(posted.ack)), Memory::host());
    if (posted.eager_copy) {
      posted.user->complete();
      posted.user = nullptr;
    }
  } else {
    inner.post_recv(posted.control, tag, posted.descriptor, Memory::host());
  }
}

// The same descriptor a device message carries, for a collective that maps
// its peers' buffers (Device::map_peer_memory) rather than messaging them.
std::vector<std::byte> CudaIpcDevice::export_memory(std::span<const std::byte> data, const Memory& memory) {
  if (!maps_peer_memory(memory) || data.empty())
    throw InvalidArgument(cat("rank ", rank_, ": cuda_ipc exports non-empty CUDA memory, not ", data.size(),
                              " bytes of ", to_string(memory), " memory"));
  const auto encoded = encode_descriptor(describe(*memory_, data, memory.device));
  static_assert(kDescriptorBytes <= kMaxExportedMemoryBytes);
  return {encoded.begin(), encoded.end()};
}

std::byte* CudaIpcDevice::map_peer_memory(int peer_rank, std::span<const std::byte> exported, const Memory& memory) {
  if (!maps_peer_memory(memory))
    throw InvalidArgument(cat("rank ", rank_, ": cuda_ipc maps CUDA memory, not ", to_string(memory), " memory"));
  if (exported.size() != kDescriptorBytes)
    throw IoError(cat("rank ", rank_, ": cuda_ipc: rank ", peer_rank, " exported ", exported.size(),
                      " bytes of device memory description, expected ", kDescriptorBytes));
  const IpcDescriptor descriptor = decode_descriptor(exported, rank_, peer_rank);
  // The worker maps too, and the cache is one: under its lock.
  std::lock_guard lock(mutex_);
  if (std::exception_ptr failed = failure()) std::rethrow_exception(failed);
  current_device_ = memory.device;
  return imports_.map(peer_rank, descriptor) + descriptor.offset;
}

void CudaIpcDevice::on_worker_round() {
  if (std::exception_ptr failed = failure()) fail_all(failed);
  advance_all();
  const auto now = std::chrono::steady_clock::now();
  for (const auto& transfer : transfers_) {
    if (transfer->stall_reported || now - transfer->started < kStallReport) continue;
    transfer->stall_reported = true;
    const bool send = transfer->direction == Direction::send;
    CHORUS_LOG(warn, rank_, "cuda_ipc: a device ", send ? "send to" : "receive from", " rank ",
               transfer->pair->peer_rank(), " of ", transfer->data.size(), " bytes (",
               describe_tag(transfer->tag.group, transfer->tag.value), ") has been in flight for ",
               std::chrono::duration_cast<std::chrono::seconds>(now - transfer->started).count(),
               " s: descriptor ", send ? "sent " : "received ", state_name(transfer->control.state()),
               send ? "" : (transfer->copied ? ", copied" : ", not copied"), ", ack ", send ? "received " : "sent ",
               state_name(transfer->acknowledgement.state()), ", the caller's request ",
               transfer->user ? "still open" : "settled");
  }
}

bool CudaIpcDevice::advance(Transfer& transfer) {
  // Each inner request's state is read once per round, and every decision
  // below is made on those reads. A caller polling the inner device
  // finishes its requests on its own thread, without this lock, so a
  // second read can differ from the first. A send that read its ack
  // pending, and then finished, was once dropped without being settled: its
  // caller waited forever for a message that had been acknowledged (the
  // "IPC message protocol stall" of docs/cuda.md, one call in about 20,000
  // of 2 MiB ring allreduces at 2 ranks).
  using State = Request::State;
  const State control = transfer.control.state();
  const State acknowledgement = transfer.acknowledgement.state();
  const auto finished = [](State state) { return state == State::done || state == State::failed; };
  for (Request* request : {&transfer.control, &transfer.acknowledgement}) {
    if ((request == &transfer.control ? control : acknowledgement) == State::failed) {
      settle(transfer, request->error());
      // The other request may still be posted; it ends with the inner device.
      return control != State::pending && acknowledgement != State::pending;
    }
  }
  if (transfer.direction == Direction::send) {
    if (acknowledgement == State::done) settle(transfer, nullptr);
    return finished(control) && finished(acknowledgement);
  }
  if (!transfer.copied) {
    if (control != State::done) return false;
    // Settled already (the device failed while the descriptor was on its
    // way): the buffer is the caller's again, so nothing is copied into it.
    if (!transfer.user) return true;
    const int peer = transfer.pair->peer_rank();
    try {
      const IpcDescriptor descriptor = decode_descriptor(transfer.descriptor, rank_, peer);
      if (descriptor.length != transfer.data.size())
        throw MismatchError(cat("rank ", rank_, ": cuda_ipc: peer rank ", peer, " sent ", descriptor.length,
                                " bytes of device memory for ", describe_tag(transfer.tag.group, transfer.tag.value),
                                ", the receive expects ", transfer.data.size()));
      if (descriptor.length > 0) {
        current_device_ = transfer.device;
        std::byte* mapped = imports_.map(peer, descriptor);
        memory_->copy(transfer.data.data(), mapped + descriptor.offset, descriptor.length, transfer.device);
      }
    } catch (...) {
      const std::exception_ptr error = std::current_exception();
      settle(transfer, error);
      // The sender waits for an ack that will not come: the job cannot go on.
      inner().abort_async(error);
      return true;
    }
    transfer.copied = true;
    // The ack goes out before the user's receive completes: once it has,
    // the caller may close the pair, and this thread must not touch it.
    transfer.pair->inner().post_send(
        transfer.acknowledgement, ack_tag(transfer.tag),
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(&transfer.ack), sizeof(transfer.ack)),
        Memory::host());
    settle(transfer, nullptr);
  }
  return transfer.acknowledgement.finished();
}

void CudaIpcDevice::fail_all(std::exception_ptr reason) {
  for (auto& transfer : transfers_) settle(*transfer, reason);
  // Their inner requests are failed or will be: drop those that are done.
  std::erase_if(transfers_, [](const std::unique_ptr<Transfer>& transfer) {
    return transfer->control.state() != Request::State::pending &&
           transfer->acknowledgement.state() != Request::State::pending;
  });
}

// What a rank that does not offer CUDA IPC creates: it publishes nothing,
// can_connect() says no to every peer, and the mesh drops it.
class NotOffered final : public Device {
 public:
  explicit NotOffered(int rank) : rank_(rank) {}
  std::string_view name() const override { return "cuda_ipc"; }
  int rank() const override { return rank_; }
  std::vector<std::byte> address() const override { return {}; }
  void check_peer(int peer_rank, std::span<const std::byte>) const override { refuse(peer_rank); }
  std::unique_ptr<Pair> connect(int peer_rank, std::span<const std::byte>, Deadline, int) override {
    refuse(peer_rank);
  }
  LinkModel link_model(int) const override { return {}; }
  void abort(std::exception_ptr) override {}
  void abort_async(std::exception_ptr) override {}
  std::exception_ptr failure() const override { return nullptr; }
  void watch_arrivals(std::shared_ptr<CompletionSignal>) override {}  // no pairs, no arrivals

 private:
  [[noreturn]] void refuse(int peer_rank) const {
    throw InvalidArgument(cat("rank ", rank_, ": cuda_ipc to rank ", peer_rank,
                              ": this process had not initialised CUDA (or has no device) when it connected, and "
                              "CHORUS_TRANSPORT did not name cuda_ipc"));
  }
  int rank_;
};

class CudaMemory final : public IpcMemory {
 public:
  cuda::IpcExport export_region(const void* pointer, int device) override {
    return cuda::cuda_runtime().ipc_export(pointer, device);
  }
  std::byte* open(const std::array<unsigned char, 64>& handle, int device) override {
    return cuda::cuda_runtime().ipc_open(handle, device);
  }
  void close(std::byte* mapped) override { cuda::cuda_runtime().ipc_close(mapped); }
  void copy(std::byte* to, const std::byte* from, size_t bytes, int device) override {
    cuda::cuda_runtime().copy(to, from, bytes, device);
  }
  std::shared_ptr<std::byte> allocate(size_t bytes, int device) override {
    return cuda::cuda_runtime().backend(device).allocate(bytes);
  }
};

}  // namespace

std::shared_ptr<IpcMemory> cuda_memory() { return std::make_shared<CudaMemory>(); }

std::unique_ptr<Device> wrap(int rank, std::unique_ptr<Device> inner, std::shared_ptr<IpcMemory> memory,
                             bool move_messages) {
  return std::make_unique<CudaIpcDevice>(rank, std::move(inner), std::move(memory), move_messages);
}

std::unique_ptr<Device> create_device(const CudaIpcDeviceOptions& options) {
  if (!cuda_usable(options.asked)) return std::make_unique<NotOffered>(options.rank);
  return wrap(options.rank, options.create_host_device(), cuda_memory(), options.move_messages);
}

bool can_connect(std::span<const std::byte> a, std::span<const std::byte> b,
                 bool (*host_can_connect)(std::span<const std::byte>, std::span<const std::byte>)) {
  const auto inner_a = inner_address(a);
  const auto inner_b = inner_address(b);
  // A process cannot open its own IPC handles: ranks that are threads of one
  // process (tests, some frameworks) use the host transport.
  return inner_a && inner_b && process_of(a) != process_of(b) && host_can_connect(*inner_a, *inner_b);
}

}  // namespace chorus::transport::cuda_ipc
