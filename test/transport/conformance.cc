// Helpers of the transport conformance suite (conformance.h).
#include "test/transport/conformance.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>
#include <utility>

#include "base/config.h"
#include "base/log.h"
#include "transport/file_descriptor.h"
#if CHORUS_HAVE_CUDA
#include "test/cuda/host_ipc_memory.h"
#endif

namespace chorus::transport::testing {

std::vector<std::string> transports_under_test() {
  std::vector<std::string> names;
  const char* chosen = std::getenv("CHORUS_TEST_TRANSPORT");
  if (chosen && *chosen) {
    if (!find_transport(chosen))
      throw std::runtime_error(cat("CHORUS_TEST_TRANSPORT=", chosen, " is not a transport of this build (",
                                   transport_names(), ")"));
    names.emplace_back(chosen);
    return names;
  }
  for (const TransportEntry& entry : all_transports()) names.emplace_back(entry.name);
  return names;
}

DeviceOptions default_options() {
  DeviceOptions options;
  options.config = Config::from_environment();
  // Loopback, or where an RDMA device is (inside rxe-run: CHORUS_TEST_ADDRESS=10.77.0.1).
  const char* address = std::getenv("CHORUS_TEST_ADDRESS");
  options.hostname = address && *address ? address : "127.0.0.1";
  return options;
}

std::unique_ptr<Device> create_device(const std::string& transport, const DeviceOptions& options) {
#if CHORUS_HAVE_CUDA
  // cuda_ipc without a GPU (CHORUS_TEST_CUDA_IPC_HOST_MEMORY): shm devices
  // wrapped with host memory playing the device's (test/cuda/
  // host_ipc_memory.h), so the whole suite runs through the wrapper.
  if (transport == "cuda_ipc" && std::getenv("CHORUS_TEST_CUDA_IPC_HOST_MEMORY")) {
    static const auto memory = std::make_shared<HostIpcMemory>();
    return cuda_ipc::wrap(options.rank, create_device("shm", options), memory);
  }
#endif
  const TransportEntry* entry = find_transport(transport);
  if (!entry) throw std::runtime_error(cat("no transport named ", transport, " in this build"));
  return entry->create(options);
}

std::vector<std::unique_ptr<Device>> make_devices(const std::string& transport, int size, DeviceOptions options) {
  std::vector<std::unique_ptr<Device>> devices;
  for (int rank = 0; rank < size; ++rank) {
    options.rank = rank;
    options.size = size;
    devices.push_back(create_device(transport, options));
  }
  return devices;
}

TestMesh::~TestMesh() {
  for (int rank = 0; rank < size(); ++rank) destroy(rank);
}

void TestMesh::destroy(int rank) {
  const auto index = static_cast<size_t>(rank);
  if (index < sleepers.size()) sleepers[index].reset();
  if (index < pairs.size()) pairs[index].clear();
  if (index < devices.size()) devices[index].reset();
}

void connect_mesh(TestMesh& mesh, int streams, std::chrono::milliseconds timeout) {
  const int size = mesh.size();
  std::vector<std::vector<std::byte>> addresses;
  for (auto& device : mesh.devices) addresses.push_back(device->address());
  mesh.pairs.clear();
  mesh.pairs.resize(static_cast<size_t>(size));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  const auto deadline = Deadline::after(timeout);
  for (int rank = 0; rank < size; ++rank) {
    auto& mine = mesh.pairs[static_cast<size_t>(rank)];
    mine.resize(static_cast<size_t>(streams));
    for (auto& by_peer : mine) by_peer.resize(static_cast<size_t>(size));
    threads.emplace_back([&, rank] {
      try {
        for (int peer = 0; peer < size; ++peer)
          for (int stream = 0; stream < streams && peer != rank; ++stream)
            mine[static_cast<size_t>(stream)][static_cast<size_t>(peer)] =
                mesh.device(rank).connect(peer, addresses[static_cast<size_t>(peer)], deadline, stream);
      } catch (...) {
        errors[static_cast<size_t>(rank)] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
}

TestMesh make_mesh(const std::string& transport, int size, Waiting waiting, DeviceOptions options, int streams) {
  TestMesh mesh;
  mesh.devices = make_devices(transport, size, std::move(options));
  connect_mesh(mesh, streams);
  if (waiting == Waiting::asleep)
    for (auto& device : mesh.devices) mesh.sleepers.push_back(std::make_unique<WaitingScope<Device>>(*device));
  return mesh;
}

// ---------------------------------------------------------------- buffers and patterns

namespace {

constexpr size_t kMapFrom = size_t{2} << 20;

}  // namespace

Buffer::Buffer(size_t bytes) : size_(bytes) {
  if (bytes >= kMapFrom) {
    void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::bad_alloc();
    ::madvise(mapped, bytes, MADV_HUGEPAGE);  // a hint; without it, small pages
    data_ = static_cast<std::byte*>(mapped);
    mapped_bytes_ = bytes;
  } else {
    data_ = new std::byte[std::max<size_t>(bytes, 1)];
  }
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    this->~Buffer();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
  }
  return *this;
}

Buffer::~Buffer() {
  if (!data_) return;
  if (mapped_bytes_ != 0) ::munmap(data_, mapped_bytes_);
  else delete[] data_;
  data_ = nullptr;
}


namespace {

uint64_t pattern_word(uint64_t seed, uint64_t index) {
  uint64_t x = (index + 1) * 0x9E3779B97F4A7C15ull ^ (seed + 1) * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

}  // namespace

void fill_pattern(std::span<std::byte> data, uint64_t seed) {
  const size_t words = data.size() / 8;
  std::byte* out = data.data();
  for (size_t i = 0; i < words; ++i) {
    const uint64_t word = pattern_word(seed, i);
    std::memcpy(out + i * 8, &word, 8);
  }
  if (const size_t tail = data.size() % 8) {
    const uint64_t word = pattern_word(seed, words);
    std::memcpy(out + words * 8, &word, tail);
  }
}

Buffer pattern(uint64_t seed, size_t bytes) {
  Buffer data(bytes);
  fill_pattern(data.bytes(), seed);
  return data;
}

size_t first_mismatch(std::span<const std::byte> data, uint64_t seed) {
  const size_t words = data.size() / 8;
  auto first_in_word = [&](size_t word, size_t bytes) {
    const uint64_t expected = pattern_word(seed, word);
    for (size_t j = 0; j < bytes; ++j)
      if (data[word * 8 + j] != reinterpret_cast<const std::byte*>(&expected)[j]) return word * 8 + j;
    return data.size();
  };
  for (size_t i = 0; i < words; ++i) {
    uint64_t word;
    std::memcpy(&word, data.data() + i * 8, 8);
    if (word != pattern_word(seed, i)) return first_in_word(i, 8);
  }
  return first_in_word(words, data.size() % 8);
}

Buffer repeating_pattern(uint64_t seed, size_t bytes) {
  const size_t period = kRepeatPeriodBytes;
  if (bytes <= period) return pattern(seed, bytes);
  const int fd = ::memfd_create("chorus-test-pattern", MFD_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "memfd_create");
  auto fail = [&](const char* what) {
    const int error = errno;
    ::close(fd);
    throw std::system_error(error, std::generic_category(), what);
  };
  if (::ftruncate(fd, static_cast<off_t>(period)) != 0) fail("ftruncate");
  void* first = ::mmap(nullptr, period, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (first == MAP_FAILED) fail("mmap");
  fill_pattern({static_cast<std::byte*>(first), period}, seed);
  ::munmap(first, period);
  const size_t copies = (bytes + period - 1) / period;
  void* region = ::mmap(nullptr, copies * period, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (region == MAP_FAILED) fail("mmap");
  Buffer buffer;
  buffer.data_ = static_cast<std::byte*>(region);
  buffer.size_ = bytes;
  buffer.mapped_bytes_ = copies * period;
  for (size_t copy = 0; copy < copies; ++copy) {
    if (::mmap(buffer.data_ + copy * period, period, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
        MAP_FAILED)
      fail("mmap");
  }
  ::close(fd);
  return buffer;
}

size_t first_mismatch_repeating(std::span<const std::byte> data, uint64_t seed) {
  const size_t period = kRepeatPeriodBytes;
  for (size_t start = 0; start < data.size(); start += period) {
    const std::span<const std::byte> stretch = data.subspan(start, std::min(period, data.size() - start));
    const size_t wrong = first_mismatch(stretch, seed);
    if (wrong != stretch.size()) return start + wrong;
  }
  return data.size();
}

ReceiveBuffer::ReceiveBuffer(size_t bytes, std::byte fill) : bytes_(bytes), fill_(fill), storage_(bytes + kGuardBytes) {
  std::memset(storage_.data(), static_cast<int>(fill), storage_.size());
}

bool ReceiveBuffer::guard_intact() const {
  for (size_t i = 0; i < kGuardBytes; ++i)
    if (storage_.data()[bytes_ + i] != fill_) return false;
  return true;
}

bool ReceiveBuffer::untouched() const {
  for (size_t i = 0; i < bytes_; ++i)
    if (storage_.data()[i] != fill_) return false;
  return guard_intact();
}

bool ReceiveBuffer::holds(uint64_t seed) const {
  return first_mismatch({storage_.data(), bytes_}, seed) == bytes_ && guard_intact();
}

// ---------------------------------------------------------------- waiting

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

void wait_ok(Request& request, std::chrono::milliseconds timeout) {
  request.wait(Deadline::after(timeout), "test: timed out waiting for a request");
}

std::exception_ptr failure_within(Device& device, std::chrono::milliseconds timeout) {
  const auto give_up = Clock::now() + timeout;
  while (!device.failure() && Clock::now() < give_up) std::this_thread::sleep_for(1ms);
  return device.failure();
}

bool poll_until_finished(Device& device, Request& request, std::chrono::milliseconds timeout) {
  const auto give_up = Clock::now() + timeout;
  while (!request.finished()) {
    device.progress();
    if (Clock::now() > give_up) return false;
  }
  return true;
}

// ---------------------------------------------------------------- abort

size_t abort_message_bytes() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  constexpr size_t kDefault = size_t{32} << 20;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  constexpr size_t kDefault = size_t{32} << 20;
#else
  constexpr size_t kDefault = size_t{256} << 20;
#endif
#else
  constexpr size_t kDefault = size_t{256} << 20;
#endif
  const char* configured = std::getenv("CHORUS_TEST_ABORT_BYTES");
  return configured && *configured ? std::stoull(configured) : kDefault;
}

std::chrono::milliseconds abort_nap(int attempt) {
  constexpr std::chrono::milliseconds naps[kAbortAttempts] = {5ms, 2ms, 1ms, 0ms, 0ms};
  return naps[std::clamp(attempt, 0, kAbortAttempts - 1)];
}

void check_no_byte_lands_after_abort(const std::string& transport,
                                     const std::function<void(TestMesh&, const std::atomic<bool>& stop)>& companion) {
  const size_t size = abort_message_bytes();
  Buffer outgoing(size), incoming_buffer(size);
  std::memset(outgoing.data(), 0xab, size);
  const std::span<std::byte> incoming = incoming_buffer.bytes();
  auto landed = [&] { return static_cast<size_t>(std::count(incoming.begin(), incoming.end(), std::byte{0xab})); };
  // An attempt the transfer outran proves nothing: it is repeated with a
  // shorter nap (abort_nap) rather than counted.
  for (int attempt = 0; attempt < kAbortAttempts; ++attempt) {
    std::fill(incoming.begin(), incoming.end(), std::byte{0});
    // The requests outlive the mesh: an attempt the transfer outran ends
    // without waiting on the send, which the sender's thread may still be
    // completing until the mesh's threads are gone (ThreadSanitizer caught it).
    Requests requests;
    TestMesh mesh = make_mesh(transport, 2);
    Request& recv = requests.add();
    Request& send = requests.add();
    mesh.pair(1, 0).post_recv(recv, {1, 1}, incoming);
    // Posted from a thread of its own: a transport may write the message
    // in post_send itself while the reader keeps up (tcp with TLS on an idle
    // machine wrote all 256 MiB there), and the abort must be able to land then.
    std::thread sender([&] { mesh.pair(0, 1).post_send(send, {1, 1}, outgoing); });
    std::atomic<bool> stop{false};
    std::thread helper;
    if (companion) helper = std::thread([&] { companion(mesh, stop); });
    std::this_thread::sleep_for(abort_nap(attempt));
    mesh.device(1).abort(std::make_exception_ptr(Aborted("rank 1: mid-transfer abort")));
    const bool finished_first = recv.state() == Request::State::done;
    const bool failed = recv.state() == Request::State::failed;
    const size_t landed_at_abort = landed();
    std::this_thread::sleep_for(100ms);
    stop.store(true);
    sender.join();
    if (helper.joinable()) helper.join();
    if (finished_first) continue;
    REQUIRE(failed);
    REQUIRE(landed() == landed_at_abort);
    // The sender learns of the abort, but its send may have finished first:
    // completion says the transport took the bytes, and tcp holds megabytes
    // in socket buffers (under ASan the last of 32 MiB was in them before
    // rank 1 aborted). What must hold: no hang, and rank 0's device failed.
    const auto failure = failure_within(mesh.device(0), 5s);
    REQUIRE(failure);
    CHECK_THROWS_WITH(std::rethrow_exception(failure), Catch::Matchers::Contains("peer rank 1"));
    try {
      send.wait(Deadline::after(5s), "test: the sender hung after its receiver aborted");
    } catch (const TimeoutError&) {
      throw;
    } catch (const Error&) {
      // failed with the abort: what a send still in flight does
    }
    return;
  }
  FAIL("the " + std::to_string(size >> 20) + " MiB transfer finished before the abort in every attempt");
}

// ---------------------------------------------------------------- a peer in another process

namespace {

bool write_exact(int fd, const void* data, size_t bytes) {
  const auto* cursor = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, cursor, bytes);
    if (n <= 0) return false;
    cursor += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool read_exact(int fd, void* out, size_t bytes) {
  auto* cursor = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t n = ::read(fd, cursor, bytes);
    if (n <= 0) return false;
    cursor += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool send_address(int fd, const std::vector<std::byte>& address) {
  const uint64_t bytes = address.size();
  return write_exact(fd, &bytes, sizeof(bytes)) && write_exact(fd, address.data(), address.size());
}

bool receive_address(int fd, std::vector<std::byte>& address) {
  uint64_t bytes = 0;
  if (!read_exact(fd, &bytes, sizeof(bytes)) || bytes > (1u << 20)) return false;
  address.resize(bytes);
  return read_exact(fd, address.data(), address.size());
}

DeviceOptions rank_options(int rank) {
  DeviceOptions options = default_options();
  options.rank = rank;
  options.size = 2;
  return options;
}

}  // namespace

ForkedPeer::ForkedPeer(const std::string& transport, Body body) {
  const TransportEntry* entry = find_transport(transport);
  REQUIRE(entry);
  int to_child[2], to_parent[2];
  REQUIRE(::pipe(to_child) == 0);
  REQUIRE(::pipe(to_parent) == 0);
  pid_ = ::fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    ::close(to_child[1]);
    ::close(to_parent[0]);
    int code = 10;
    try {
      auto device = create_device(transport, rank_options(1));
      std::vector<std::byte> theirs;
      if (!send_address(to_parent[1], device->address())) ::_exit(11);
      if (!receive_address(to_child[0], theirs)) ::_exit(12);
      auto pair = device->connect(0, theirs, Deadline::after(20s));
      code = body(*device, *pair, to_child[0]);
      pair.reset();
      device.reset();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "forked rank 1: %s\n", error.what());
      code = 13;
    } catch (...) {
      code = 14;
    }
    ::_exit(code);
  }
  ::close(to_child[0]);
  ::close(to_parent[1]);
  to_child_ = to_child[1];
  const Fd from_child(to_parent[0]);
  try {
    device_ = create_device(transport, rank_options(0));
    std::vector<std::byte> theirs;
    REQUIRE(receive_address(from_child.get(), theirs));
    REQUIRE(send_address(to_child_, device_->address()));
    pair_ = device_->connect(1, theirs, Deadline::after(20s));
  } catch (...) {
    kill_child();  // the destructor of a half-built object does not run
    throw;
  }
}

ForkedPeer::~ForkedPeer() { kill_child(); }

void ForkedPeer::kill_child() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    ::kill(pid_, SIGCONT);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
  }
  if (to_child_ >= 0) ::close(to_child_);
  to_child_ = -1;
}

void ForkedPeer::signal_child() {
  const char go = 1;
  REQUIRE(::write(to_child_, &go, 1) == 1);
}

int ForkedPeer::reap() {
  int status = 0;
  REQUIRE(::waitpid(pid_, &status, 0) == pid_);
  reaped_ = true;
  return status;
}

// One Mesh per device, with a route to every peer and no Pair yet.
std::vector<std::unique_ptr<Mesh>> routed_meshes(std::vector<std::unique_ptr<Device>> devices) {
  const int size = static_cast<int>(devices.size());
  std::vector<std::vector<std::byte>> addresses;
  for (const auto& device : devices) addresses.push_back(device->address());
  std::vector<std::unique_ptr<Mesh>> meshes;
  for (int rank = 0; rank < size; ++rank) {
    std::vector<std::unique_ptr<Device>> own;
    own.push_back(std::move(devices[static_cast<size_t>(rank)]));
    Device* device = own.front().get();
    meshes.push_back(std::make_unique<Mesh>(rank, size, std::move(own)));
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      device->check_peer(peer, addresses[static_cast<size_t>(peer)]);
      meshes.back()->set_route(peer, device, addresses[static_cast<size_t>(peer)]);
    }
  }
  return meshes;
}

}  // namespace chorus::transport::testing
