// Helpers for tests that run against any transport of the registry: N
// devices of one transport in one process connected as a full mesh from
// threads, byte patterns that make every misplaced byte visible, waiting,
// and a peer in a fork()ed process.
//
// The conformance suite (test/transport/test_*.cc) runs every test case once
// per transport under test: CHORUS_TEST_TRANSPORT names one (Meson runs one
// test per transport that way); unset, every transport of the registry, so
// a transport added to transport/registry.cc is covered without a line here.
// Catch2 is not thread-safe: threads count failures and the test thread checks.
#pragma once

#include <catch2/catch.hpp>

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/deadline.h"
#include "base/error.h"
#include "base/log.h"
#include "transport/mesh.h"
#include "transport/registry.h"
#include "transport/transport.h"

namespace chorus::transport::testing {

using namespace std::chrono_literals;

// The names CHORUS_TEST_TRANSPORT picks, else every transport of the
// registry. Throws for a name this build does not have.
std::vector<std::string> transports_under_test();

// Runs the enclosing TEST_CASE once per transport under test, with
// `variable` naming it; every failure report says which one.
#define FOR_EACH_TRANSPORT(variable)                                                                      \
  const std::string variable =                                                                            \
      GENERATE(Catch::Generators::from_range(::chorus::transport::testing::transports_under_test()));      \
  INFO("transport: " << variable)

// What make_devices hands the registry: loopback for network transports,
// the environment's configuration (so CHORUS_SHM_SINGLE_COPY=0 reaches shm).
DeviceOptions default_options();

// The registry's device for `transport` (for cuda_ipc with
// CHORUS_TEST_CUDA_IPC_HOST_MEMORY set: one over host memory, conformance.cc).
std::unique_ptr<Device> create_device(const std::string& transport, const DeviceOptions& options);
std::vector<std::unique_ptr<Device>> make_devices(const std::string& transport, int size,
                                                  DeviceOptions options = default_options());

// How the devices of a mesh get their bytes moved while the test waits.
enum class Waiting {
  // Every device is held in a WaitingScope for the mesh's life, as when
  // every rank sleeps in a wait: the transports' own threads do the work.
  asleep,
  // Nobody waits: the test polls (Device::progress) or opens scopes itself.
  by_test,
};

// N devices of one transport and the Pairs between them.
class TestMesh {
 public:
  TestMesh() = default;
  TestMesh(TestMesh&&) = default;
  TestMesh& operator=(TestMesh&&) = delete;
  ~TestMesh();

  std::vector<std::unique_ptr<Device>> devices;
  std::vector<std::vector<std::vector<std::unique_ptr<Pair>>>> pairs;  // [rank][stream][peer]
  std::vector<std::unique_ptr<WaitingScope<Device>>> sleepers;        // [rank], with Waiting::asleep

  int size() const { return static_cast<int>(devices.size()); }
  Device& device(int rank) { return *devices[static_cast<size_t>(rank)]; }
  Pair& pair(int rank, int peer, int stream = 0) {
    return *pairs[static_cast<size_t>(rank)][static_cast<size_t>(stream)][static_cast<size_t>(peer)];
  }
  // Destroys one rank's pairs and device, as its Context would.
  void destroy(int rank);
};

// Every rank connects every stream to every peer from its own thread, as
// real ranks do (peer outer, stream inner, like chorus::connect).
void connect_mesh(TestMesh& mesh, int streams = 1, std::chrono::milliseconds timeout = 20s);

TestMesh make_mesh(const std::string& transport, int size, Waiting waiting = Waiting::asleep,
                   DeviceOptions options = default_options(), int streams = 1);

// Uninitialised bytes for messages. Large ones are mapped with huge pages
// where the kernel allows: touching gigabytes for the first time in 4 KiB
// pages costs seconds per GiB on a virtual machine.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes);
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  ~Buffer();

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<std::byte> bytes() { return {data_, size_}; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  // What post_send takes.
  operator std::span<const std::byte>() const { return bytes(); }

 private:
  friend Buffer repeating_pattern(uint64_t seed, size_t bytes);
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_bytes_ = 0;  // 0: from new[]
};

// A byte pattern that differs per message (seed) and per position, so a
// shifted, truncated or swapped payload never passes for the right one.
// Built from 64-bit words, so that filling and checking gigabytes is fast.
void fill_pattern(std::span<std::byte> data, uint64_t seed);
Buffer pattern(uint64_t seed, size_t bytes);
// Index of the first byte that is not the pattern's, or data.size().
size_t first_mismatch(std::span<const std::byte> data, uint64_t seed);

// The messages of gigabytes: the pattern's first kRepeatPeriodBytes again
// and again, the same pages of one memfd mapped over and over, so a
// sender's buffer costs no gigabytes of pages zeroed and filled (the kernel
// zeroes this machine's fresh memory at about 0.5 GB/s: half of a 4 GiB
// message's 18 s). The period is a prime number of pages (4099), so no
// shift by a power of two, nor by a transport's chunk, lands the data on
// itself; check the received copy with first_mismatch_repeating.
inline constexpr size_t kRepeatPeriodBytes = size_t{4099} * 4096;
Buffer repeating_pattern(uint64_t seed, size_t bytes);
size_t first_mismatch_repeating(std::span<const std::byte> data, uint64_t seed);

// A receive buffer followed by guard bytes: a transport that writes past the
// message's end shows. Filled with `fill` (also the guard).
class ReceiveBuffer {
 public:
  explicit ReceiveBuffer(size_t bytes, std::byte fill = std::byte{0x5a});
  std::span<std::byte> data() { return {storage_.data(), bytes_}; }
  size_t size() const { return bytes_; }
  // Whether the message is the pattern of `seed` and the guard untouched.
  bool holds(uint64_t seed) const;
  bool guard_intact() const;
  // Whether no byte of the message or the guard was written.
  bool untouched() const;

 private:
  static constexpr size_t kGuardBytes = 64;
  size_t bytes_;
  std::byte fill_;
  Buffer storage_;
};

// Requests attached to one signal; the signal outlives them.
class Requests {
 public:
  Request& add() {
    Request& request = requests_.emplace_back();
    request.attach(&signal_);
    return request;
  }
  std::deque<Request>& all() { return requests_; }

 private:
  CompletionSignal signal_;
  std::deque<Request> requests_;
};

double seconds_since(Clock::time_point start);

void wait_ok(Request& request, std::chrono::milliseconds timeout = 30s);

// Waits for a request that must fail with E; returns the error's text.
template <class E>
std::string wait_error(Request& request, std::chrono::milliseconds timeout = 10s) {
  try {
    request.wait(Deadline::after(timeout), "test: timed out waiting for a failure");
  } catch (const E& error) {
    return error.what();
  }
  FAIL("the request completed but was expected to fail");
  return "";
}

// Waits until the device has failed, at most `timeout`; returns its failure.
std::exception_ptr failure_within(Device& device, std::chrono::milliseconds timeout);

// Calls device.progress() on this thread until the request finishes, as a
// polling waiter (the executor) does. False on timeout.
bool poll_until_finished(Device& device, Request& request, std::chrono::milliseconds timeout = 30s);

// The message the abort tests abort mid-transfer: 256 MiB, and 32 MiB in a
// sanitizer build. There every byte the test fills and counts is
// instrumented (at 256 MiB that was most of the transport suite's time
// under ThreadSanitizer, about 35 s of each transport's 90) and the
// transfer itself is several times slower, so the smaller message is still
// in flight when the abort lands; an attempt it outruns is repeated anyway.
// CHORUS_TEST_ABORT_BYTES sets it where everything is slower still (the
// Soft-RoCE VM, test/ibverbs/in_vm.sh).
size_t abort_message_bytes();

// How long the abort tests let that transfer run before aborting it, by
// attempt: 5 ms, then less. On a loaded machine (sanitizer builds, other
// tests on both cores) the nap can outlast the whole transfer, which proves
// nothing; the last attempts abort right after posting, which cannot be
// outrun.
std::chrono::milliseconds abort_nap(int attempt);
constexpr int kAbortAttempts = 5;

// Aborts rank 1 while abort_message_bytes() from rank 0 are arriving, then checks that not a
// byte lands after abort() returned and that the sender fails too.
// `companion`, if given, runs on its own thread for the whole attempt (e.g. a
// caller polling rank 1's device) until `stop` is set.
void check_no_byte_lands_after_abort(const std::string& transport,
                                     const std::function<void(TestMesh&, const std::atomic<bool>& stop)>& companion = {});

// Rank 1 of a two-rank job in a fork()ed child (tests using it are tagged
// [fork]: a process that used RDMA cannot use it in a child it forks, since
// librdmacm keeps the parent's device contexts, so the ibverbs run starts
// each of them in a process of its own), connected to rank 0 in this
// process. The child runs `body` with its device and pair and exits with
// what it returns (it must not use Catch2). The destructor kills and reaps a
// child that is still there, stopped or not, so nothing is left behind.
class ForkedPeer {
 public:
  using Body = std::function<int(Device& device, Pair& pair, int from_parent_fd)>;
  ForkedPeer(const std::string& transport, Body body);
  ~ForkedPeer();
  ForkedPeer(const ForkedPeer&) = delete;
  ForkedPeer& operator=(const ForkedPeer&) = delete;

  pid_t pid() const { return pid_; }
  Device& device() { return *device_; }
  Pair& pair() { return *pair_; }
  // Writes one byte the child's body may read from `from_parent_fd`.
  void signal_child();
  // waitpid; returns the raw status.
  int reap();

 private:
  void kill_child();

  pid_t pid_ = -1;
  bool reaped_ = false;
  int to_child_ = -1;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Pair> pair_;
};

// One Mesh per device, with a route to every peer and no Pair yet (each
// connects on demand, Mesh::connect).
std::vector<std::unique_ptr<Mesh>> routed_meshes(std::vector<std::unique_ptr<Device>> devices);

}  // namespace chorus::transport::testing
