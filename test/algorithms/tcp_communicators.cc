// Loopback Communicators for the algorithm layer's tests (tcp_communicators.h).
#include "test/algorithms/tcp_communicators.h"

#include <thread>

#include "algorithms/run.h"
#include "transport/tcp/tcp.h"
#include "transport/transport.h"

namespace chorus::algorithms::testing {

using namespace std::chrono_literals;

std::vector<std::unique_ptr<Context>> make_contexts(int size, std::chrono::milliseconds,
                                                   std::optional<LinkModel> link_model) {
  std::vector<std::unique_ptr<transport::Device>> devices;
  std::vector<std::vector<std::byte>> addresses;
  for (int rank = 0; rank < size; ++rank) {
    transport::tcp::TcpDeviceOptions options;
    options.rank = rank;
    options.size = size;
    options.hostname = "127.0.0.1";
    options.describe_signature = describe_signature;
    options.link_model = link_model;
    devices.push_back(transport::tcp::create_device(options));
    addresses.push_back(devices.back()->address());
  }
  std::vector<std::shared_ptr<transport::Mesh>> meshes;
  std::vector<transport::Device*> raw;
  for (int rank = 0; rank < size; ++rank) {
    raw.push_back(devices[rank].get());
    std::vector<std::unique_ptr<transport::Device>> own;
    own.push_back(std::move(devices[rank]));
    meshes.push_back(std::make_shared<transport::Mesh>(rank, size, std::move(own)));
  }
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  const Deadline deadline = Deadline::after(10s);
  for (int rank = 0; rank < size; ++rank)
    threads.emplace_back([&, rank] {
      try {
        for (int peer = 0; peer < size; ++peer) {
          if (peer == rank) continue;
          transport::Mesh::Link link;
          link.device = raw[rank];
          link.streams.push_back(raw[rank]->connect(peer, addresses[peer], deadline));
          meshes[rank]->set_link(peer, std::move(link));
        }
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  for (auto& thread : threads) thread.join();
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
  std::vector<int> members(size);
  for (int rank = 0; rank < size; ++rank) members[rank] = rank;
  // What connect would agree on: the transport's own model of these links.
  CommunicatorSettings settings;
  if (size > 1) settings.local = settings.remote = meshes[0]->link_model(1);
  std::vector<std::unique_ptr<Context>> contexts;
  for (int rank = 0; rank < size; ++rank)
    contexts.push_back(
        std::make_unique<Communicator>(meshes[rank], members, 0,
                                       std::make_shared<const Topology>(Topology::single_host(size)), settings));
  return contexts;
}

std::vector<std::exception_ptr> on_every_rank(std::vector<std::unique_ptr<Context>>& contexts,
                                              const std::function<void(Context&)>& body) {
  std::vector<std::exception_ptr> errors(contexts.size());
  std::vector<std::thread> threads;
  for (size_t rank = 0; rank < contexts.size(); ++rank)
    threads.emplace_back([&, rank] {
      try {
        body(*contexts[rank]);
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  for (auto& thread : threads) thread.join();
  return errors;
}

void require_no_errors(const std::vector<std::exception_ptr>& errors) {
  for (const auto& error : errors)
    if (error) std::rethrow_exception(error);
}

Call make_call(Context& context, Collective collective, size_t count, DataType type, ReduceOp op, int root,
               bool in_place) {
  return make_call(collective, context.rank(), context.size(), count, type, op, root, in_place);
}

Deadline soon() { return Deadline::after(20s); }

void run_checked(Context& context, const Call& call, const void* input, void* output, const std::string& algorithm,
                 uint32_t sequence, Deadline deadline) {
  run_collective(context, checked_call(context, call, input, output), input, output, algorithm, sequence, deadline);
}

}  // namespace chorus::algorithms::testing
