// One-sided windows (window.h): native RDMA where the pair has it, otherwise
// a service thread per Window that answers put/get requests with messages.
//
// Emulated protocol, per (origin, target), on tags of the window's own group
// (a hash of the Context's group and the window's number, so nothing of a
// collective or a send/recv ever matches them):
//   origin -> target  request header (32 bytes: op, offset, bytes, sequence)
//   origin -> target  put data                       (put only)
//   target -> origin  acknowledgement (8 bytes)      (put: the bytes are in place)
//   target -> origin  get data                       (get only)
// The target's service handles one origin's requests in order, so the
// acknowledgements and replies come back in the order of the requests.
#include "chorus/window.h"

#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <exception>
#include <thread>
#include <vector>

#include "api/collective_checks.h"
#include "api/context_state.h"
#include "base/error.h"
#include "base/little_endian.h"
#include "base/log.h"
#include "chorus/collectives.h"
#include "chorus/collectives_gather.h"
#include "transport/transport.h"

namespace chorus {
namespace detail {
namespace {

enum MessageTag : uint64_t { request_tag = 1, put_data_tag = 2, ack_tag = 3, get_data_tag = 4 };
enum Op : uint64_t { put_op = 1, get_op = 2, close_op = 3 };
constexpr size_t kHeaderBytes = 32;
constexpr uint64_t kSignature = 0x57494e444f570000ull;  // "WINDOW", the same on both sides
// Descriptor each rank publishes: bytes, address, key + 1 (0: no one-sided access).
constexpr size_t kDescriptorBytes = 24;

transport::Tag tag_of(uint64_t group, MessageTag value, bool eager = false) {
  return {value, kSignature | value, group, eager};
}

}  // namespace

struct WindowState {
  Context& context;
  const algorithms::Communicator& communicator;
  std::byte* data;
  size_t bytes;
  uint64_t group = 0;
  std::chrono::milliseconds timeout;
  std::vector<size_t> sizes;                         // by rank
  std::vector<transport::RemoteMemory> remotes;      // by rank, where native
  std::vector<bool> native;                          // by rank: this rank's operations on it are RDMA
  std::vector<bool> served;                          // by rank: its operations here come as messages
  std::vector<std::shared_ptr<transport::Registration>> registrations;

  // Origin side: operations started and not flushed, by target rank.
  struct Operation {
    std::array<std::byte, kHeaderBytes> header{};
    uint64_t ack = 0;
    transport::Request header_send, data_send, reply;
  };
  transport::CompletionSignal signal;  // before `outstanding`: it must outlive their requests
  std::vector<std::deque<std::unique_ptr<Operation>>> outstanding;
  uint64_t sequence = 0;

  // Target side: the service thread for emulated origins.
  std::thread service;
  std::atomic<bool> stop{false};

  WindowState(Context& owner, std::byte* buffer, size_t size)
      : context(owner), communicator(communicator_of(owner)), data(buffer), bytes(size) {}

  void check(const char* what, int rank, size_t offset, size_t count) const {
    if (rank < 0 || rank >= context.size())
      throw InvalidArgument(cat("rank ", context.rank(), ": window ", what, " to rank ", rank,
                                ", which is not in a context of size ", context.size()));
    const size_t size = sizes[static_cast<size_t>(rank)];
    if (offset > size || count > size - offset)
      throw InvalidArgument(cat("rank ", context.rank(), ": window ", what, " of ", count, " bytes at offset ", offset,
                                " does not fit rank ", rank, "'s window of ", size, " bytes"));
  }

  Operation& start(int rank) {
    auto& queue = outstanding[static_cast<size_t>(rank)];
    queue.push_back(std::make_unique<Operation>());
    Operation& operation = *queue.back();
    for (auto* request : {&operation.header_send, &operation.data_send, &operation.reply}) request->attach(&signal);
    return operation;
  }

  void send_header(int rank, Operation& operation, Op op, size_t offset, size_t count) {
    store_le(operation.header.data(), op, 8);
    store_le(operation.header.data() + 8, offset, 8);
    store_le(operation.header.data() + 16, count, 8);
    store_le(operation.header.data() + 24, ++sequence, 8);
    communicator.pair(rank).post_send(operation.header_send, tag_of(group, request_tag, true), operation.header);
  }

  void flush(int rank) {
    auto& queue = outstanding[static_cast<size_t>(rank)];
    const Deadline deadline = Deadline::after(timeout);
    try {
      transport::WaitingScope waiting(communicator.mesh());
      for (auto& operation : queue)
        for (auto* request : {&operation->header_send, &operation->data_send, &operation->reply})
          if (request->state() != transport::Request::State::idle)
            request->wait(deadline, cat("rank ", context.rank(), ": window flush timed out after ", timeout.count(),
                                        " ms waiting for rank ", rank));
    } catch (...) {
      abort_for(context, std::current_exception());
      throw;
    }
    queue.clear();
  }

  void serve();
};

void WindowState::serve() {
  // One state machine per emulated origin.
  struct Origin {
    int rank = -1;
    enum class Stage { header, put_data, ack, get_data, closed } stage = Stage::header;
    std::array<std::byte, kHeaderBytes> header{};
    uint64_t ack = 0;
    transport::Request request;
  };
  transport::CompletionSignal service_signal;
  std::deque<Origin> origins;
  // However this returns or throws, no transport thread may still hold one
  // of the origins' requests once they are gone. A failed request means the
  // Context is failing, and its engines fail the others one by one: the
  // Mesh's abort waits for them all (and starts the abort where an early
  // exit found none).
  struct Settle {
    WindowState& state;
    std::deque<Origin>& origins;
    ~Settle() {
      std::exception_ptr reason;
      bool pending = false;
      for (const Origin& origin : origins) {
        if (origin.request.state() == transport::Request::State::failed && !reason) reason = origin.request.error();
        pending = pending || origin.request.state() == transport::Request::State::pending;
      }
      if (!pending) return;
      if (!reason)
        reason = std::make_exception_ptr(Aborted(cat("rank ", state.context.rank(), ": window service stopped")));
      try {
        state.communicator.mesh().abort(reason);
      } catch (...) {
        // Nothing more to do from a destructor; the abort itself does not throw.
      }
    }
  } settle{*this, origins};
  auto post_header = [&](Origin& origin) {
    origin.stage = Origin::Stage::header;
    communicator.pair(origin.rank).post_recv(origin.request, tag_of(group, request_tag), origin.header);
  };
  for (int rank = 0; rank < context.size(); ++rank) {
    if (!served[static_cast<size_t>(rank)]) continue;
    Origin& origin = origins.emplace_back();
    origin.rank = rank;
    origin.request.attach(&service_signal);
    post_header(origin);
  }
  // The transports' own threads move the messages while this one sleeps.
  transport::WaitingScope waiting(communicator.mesh());
  uint64_t seen = service_signal.count();
  while (true) {
    bool open = false;
    for (Origin& origin : origins) {
      if (origin.stage == Origin::Stage::closed) continue;
      if (origin.request.state() == transport::Request::State::failed) return;  // the Context failed
      if (origin.request.state() != transport::Request::State::done) {
        open = true;
        continue;
      }
      transport::Pair& pair = communicator.pair(origin.rank);
      switch (origin.stage) {
        case Origin::Stage::header: {
          const uint64_t op = load_le(origin.header.data(), 8);
          const uint64_t offset = load_le(origin.header.data() + 8, 8);
          const uint64_t count = load_le(origin.header.data() + 16, 8);
          origin.ack = load_le(origin.header.data() + 24, 8);
          if (op == close_op) {
            origin.stage = Origin::Stage::closed;
            continue;
          }
          if ((op != put_op && op != get_op) || offset > bytes || count > bytes - offset) {
            abort_for(context, std::make_exception_ptr(InvalidArgument(
                                   cat("rank ", context.rank(), ": rank ", origin.rank, " asked for ", count,
                                       " bytes at offset ", offset, " of this rank's window of ", bytes,
                                       " bytes (operation ", op, ")"))));
            return;
          }
          const std::span<std::byte> window(data + offset, count);
          if (op == put_op) {
            origin.stage = Origin::Stage::put_data;
            pair.post_recv(origin.request, tag_of(group, put_data_tag), window);
          } else {
            origin.stage = Origin::Stage::get_data;
            pair.post_send(origin.request, tag_of(group, get_data_tag), window);
          }
          break;
        }
        case Origin::Stage::put_data:
          origin.stage = Origin::Stage::ack;
          pair.post_send(origin.request, tag_of(group, ack_tag, true),
                         std::span<const std::byte>(reinterpret_cast<const std::byte*>(&origin.ack), sizeof(origin.ack)));
          break;
        case Origin::Stage::ack:
        case Origin::Stage::get_data:
          post_header(origin);
          break;
        case Origin::Stage::closed:
          break;
      }
      open = true;
    }
    if (!open) return;
    seen = service_signal.wait_change(seen, Deadline::after(std::chrono::milliseconds(100)));
  }
}

}  // namespace detail

Window::Window(Context& context, void* data, size_t bytes)
    : state_(std::make_unique<detail::WindowState>(context, static_cast<std::byte*>(data), bytes)) {
  detail::WindowState& state = *state_;
  const int size = context.size();
  state.timeout = detail::state_of(context).timeout;
  if (!data && bytes > 0) throw InvalidArgument(cat("rank ", context.rank(), ": window of ", bytes, " bytes at null"));
  state.group = detail::state_of(context).next_window_group();

  // Registered with the device that reaches peers one-sidedly. A failure
  // here (the locked-memory limit) aborts the Context, so the other ranks
  // hear why instead of waiting in the allgather below.
  std::optional<transport::RemoteMemory> remote;
  const transport::Mesh& mesh = state.communicator.mesh();
  // A window reaches every member, so on demand (transport/mesh.h) every
  // rank connects to all of them here, as every rank creates the window.
  state.communicator.mesh().connect(state.communicator.members(), Deadline::after(state.timeout));
  try {
    for (int rank = 0; rank < size; ++rank) {
      if (rank == context.rank()) continue;
      const int peer = state.communicator.mesh_rank(rank);
      if (!state.communicator.pair(rank).one_sided() || remote || bytes == 0) continue;
      auto registration = mesh.device_of(peer).register_memory(
          std::span<const std::byte>(state.data, std::max<size_t>(bytes, 1)), Memory::host());
      if (auto described = registration->remote()) {
        remote = transport::RemoteMemory{reinterpret_cast<uintptr_t>(state.data), described->key};
        state.registrations.push_back(std::move(registration));
      }
    }
  } catch (...) {
    detail::abort_for(context, std::current_exception());
    throw;
  }
  std::array<std::byte, detail::kDescriptorBytes> mine{};
  store_le(mine.data(), bytes, 8);
  store_le(mine.data() + 8, remote ? remote->address : 0, 8);
  store_le(mine.data() + 16, remote ? remote->key + 1 : 0, 8);
  std::vector<std::byte> everyone(detail::kDescriptorBytes * static_cast<size_t>(size));
  allgather(context, mine.data(), everyone.data(), detail::kDescriptorBytes, DataType::uint8);
  state.sizes.resize(static_cast<size_t>(size));
  state.remotes.resize(static_cast<size_t>(size));
  state.native.resize(static_cast<size_t>(size));
  state.served.resize(static_cast<size_t>(size));
  state.outstanding.resize(static_cast<size_t>(size));
  for (int rank = 0; rank < size; ++rank) {
    const std::byte* descriptor = everyone.data() + detail::kDescriptorBytes * static_cast<size_t>(rank);
    state.sizes[static_cast<size_t>(rank)] = load_le(descriptor, 8);
    const uint64_t key = load_le(descriptor + 16, 8);
    // Where the target published a key and the pair has one-sided access.
    const bool native = rank != context.rank() && key != 0 && state.communicator.pair(rank).one_sided();
    state.native[static_cast<size_t>(rank)] = native;
    // Its operations here are RDMA only where this rank published a key and
    // the pair has one-sided access; otherwise this rank's service answers them.
    state.served[static_cast<size_t>(rank)] =
        rank != context.rank() && !(remote && state.communicator.pair(rank).one_sided());
    if (native) state.remotes[static_cast<size_t>(rank)] = {load_le(descriptor + 8, 8), key - 1};
  }
  state.service = std::thread([&state] {
    try {
      state.serve();
    } catch (const std::exception& error) {
      CHORUS_LOG(warn, state.context.rank(), "window service stopped: ", error.what());
    }
  });
}

Window::~Window() {
  detail::WindowState& state = *state_;
  try {
    flush_all();
    barrier(state.context);
    // Every rank is done with every window now: release the services.
    for (int rank = 0; rank < state.context.size(); ++rank) {
      if (rank == state.context.rank() || state.native[static_cast<size_t>(rank)]) continue;
      auto& operation = state.start(rank);
      state.send_header(rank, operation, detail::close_op, 0, 0);
    }
    flush_all();
  } catch (const std::exception& error) {
    CHORUS_LOG(warn, state.context.rank(), "window closed after an error: ", error.what());
    detail::abort_for(state.context, std::current_exception());
  }
  if (state.service.joinable()) state.service.join();
}

size_t Window::bytes(int rank) const { return state_->sizes.at(static_cast<size_t>(rank)); }
bool Window::native(int rank) const { return state_->native.at(static_cast<size_t>(rank)); }

void Window::put(int rank, size_t offset, const void* data, size_t bytes) {
  detail::WindowState& state = *state_;
  state.check("put", rank, offset, bytes);
  const auto* source = static_cast<const std::byte*>(data);
  if (rank == state.context.rank()) {
    if (bytes) std::memmove(state.data + offset, source, bytes);
    return;
  }
  auto& operation = state.start(rank);
  transport::Pair& pair = state.communicator.pair(rank);
  if (state.native[static_cast<size_t>(rank)]) {
    transport::RemoteMemory target = state.remotes[static_cast<size_t>(rank)];
    target.address += offset;
    pair.post_put(operation.reply, {source, bytes}, target);
    return;
  }
  state.send_header(rank, operation, detail::put_op, offset, bytes);
  pair.post_send(operation.data_send, detail::tag_of(state.group, detail::put_data_tag), {source, bytes});
  pair.post_recv(operation.reply, detail::tag_of(state.group, detail::ack_tag),
                 std::span<std::byte>(reinterpret_cast<std::byte*>(&operation.ack), sizeof(operation.ack)));
}

void Window::get(int rank, size_t offset, void* out, size_t bytes) {
  detail::WindowState& state = *state_;
  state.check("get", rank, offset, bytes);
  auto* destination = static_cast<std::byte*>(out);
  if (rank == state.context.rank()) {
    if (bytes) std::memmove(destination, state.data + offset, bytes);
    return;
  }
  auto& operation = state.start(rank);
  transport::Pair& pair = state.communicator.pair(rank);
  if (state.native[static_cast<size_t>(rank)]) {
    transport::RemoteMemory source = state.remotes[static_cast<size_t>(rank)];
    source.address += offset;
    pair.post_get(operation.reply, {destination, bytes}, source);
    return;
  }
  state.send_header(rank, operation, detail::get_op, offset, bytes);
  pair.post_recv(operation.reply, detail::tag_of(state.group, detail::get_data_tag), {destination, bytes});
}

void Window::flush(int rank) {
  if (rank < 0 || rank >= state_->context.size())
    throw InvalidArgument(cat("rank ", state_->context.rank(), ": window flush of rank ", rank,
                              ", which is not in a context of size ", state_->context.size()));
  state_->flush(rank);
}

void Window::flush_all() {
  for (int rank = 0; rank < state_->context.size(); ++rank) state_->flush(rank);
}

}  // namespace chorus
