#include "adapters/torch/process_group.h"

#include <pybind11/pybind11.h>

#include <utility>

#include "adapters/torch/store_bridge.h"
#include "adapters/torch/tensors.h"
#include "base/error.h"
#include "base/log.h"
#include "chorus/connect.h"
#include "rendezvous/bootstrap.h"
#include "rendezvous/prefix_store.h"

namespace chorus::torch_backend {

namespace {

std::shared_ptr<Context> connect_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                       std::chrono::milliseconds timeout) {
  // Under "chorus/" so our keys never meet torch's own in the group's prefix.
  auto chorus_store = std::make_shared<PrefixStore>("chorus", std::make_shared<TorchStore>(store, rank));
  StoreBootstrap bootstrap(chorus_store, rank, size, timeout);
  ConnectOptions options;
  options.timeout = timeout;
  return connect(bootstrap, options);
}

}  // namespace

ChorusProcessGroup::ChorusProcessGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                       std::chrono::milliseconds timeout)
    : BackendBase(rank, size), timeout_(timeout), context_(connect_group(store, rank, size, timeout)) {}

ChorusProcessGroup::~ChorusProcessGroup() {
  // Python drops the last reference to a group holding the GIL, and the
  // Completer may need the GIL to let go of a tensor that has a Python
  // object: joining it with the GIL held would deadlock.
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release release;
    completer_.stop();
  } else {
    completer_.stop();
  }
}

c10::intrusive_ptr<ChorusWork> ChorusProcessGroup::make_work(c10d::OpType type, const char* collective,
                                                             std::vector<at::Tensor> outputs,
                                                             const std::vector<at::Tensor>& inputs,
                                                             int source_rank) const {
  std::vector<at::Tensor> tensors = outputs;
  tensors.insert(tensors.end(), inputs.begin(), inputs.end());
  Placement placement = placement_of(tensors, collective, getRank());
  if (type != c10d::OpType::SEND && type != c10d::OpType::RECV && type != c10d::OpType::RECVANYSOURCE) ++sequence_;
  return c10::make_intrusive<ChorusWork>(getRank(), type, cat(collective, " on rank ", getRank(), " of ", getSize()),
                                         std::move(outputs), std::move(placement), source_rank);
}

CollectiveOptions ChorusProcessGroup::options(const Placement& placement, std::chrono::milliseconds timeout) const {
  CollectiveOptions options;
  place(options, placement);
  // kUnsetTimeout (negative): the group's, which its Context already has.
  if (timeout.count() > 0) options.timeout = timeout;
  return options;
}

int ChorusProcessGroup::root_of(int64_t root, const char* collective, const char* what) const {
  if (root < 0 || root >= getSize()) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch ", collective, ": ", what, " ", root,
                              " is not a rank of this group of ", getSize()));
  }
  return static_cast<int>(root);
}

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  const at::Tensor& tensor = single(tensors, "broadcast", "", getRank());
  const int root = root_of(opts.rootRank, "broadcast");
  if (opts.rootTensor != 0) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch broadcast: rootTensor ", opts.rootTensor,
                              " but there is one tensor per call"));
  }
  auto work = make_work(c10d::OpType::BROADCAST, "broadcast", {tensor});
  at::Tensor buffer = work->staging().output(tensor);
  const Elements elements = movement_elements(buffer);
  return issue(work, [&] { return broadcast_async(*context_, buffer.data_ptr(), elements.count, elements.type, root,
                                                  options(work->placement(), opts.timeout)); });
}

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::barrier(const c10d::BarrierOptions& opts) {
  auto work = make_work(c10d::OpType::BARRIER, "barrier", {});
  return issue(work, [&] { return barrier_async(*context_, options(work->placement(), opts.timeout)); });
}

namespace {

// chorus refuses a message to oneself by finishing the Context; refuse it here first.
void expect_other(int peer, int rank, const char* call) {
  if (peer == rank) {
    throw InvalidArgument(cat("rank ", rank, ": chorus.torch ", call, ": the peer is this rank itself; expected ",
                              "another rank of the group"));
  }
}

uint32_t tag_of(int tag, int rank, const char* call) {
  if (tag < 0) throw InvalidArgument(cat("rank ", rank, ": chorus.torch ", call, ": tag ", tag, " is negative"));
  return static_cast<uint32_t>(tag);
}

}  // namespace

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::send(std::vector<at::Tensor>& tensors, int destination, int tag) {
  const at::Tensor& tensor = single(tensors, "send", "", getRank());
  const int peer = root_of(destination, "send", "peer");
  expect_other(peer, getRank(), "send");
  auto work = make_work(c10d::OpType::SEND, "send", {tensor});
  at::Tensor buffer = work->staging().input(tensor);
  const Elements elements = movement_elements(buffer);
  return issue(work, [&] { return send_async(*context_, buffer.data_ptr(), elements.count, elements.type, peer,
                                             tag_of(tag, getRank(), "send"), options(work->placement(), timeout_)); });
}

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::recv(std::vector<at::Tensor>& tensors, int source, int tag) {
  const at::Tensor& tensor = single(tensors, "recv", "", getRank());
  const int peer = root_of(source, "recv", "peer");
  expect_other(peer, getRank(), "recv");
  auto work = make_work(c10d::OpType::RECV, "recv", {tensor}, {}, peer);
  at::Tensor buffer = work->staging().output(tensor);
  const Elements elements = movement_elements(buffer);
  return issue(work, [&] { return recv_async(*context_, buffer.data_ptr(), elements.count, elements.type, peer,
                                             tag_of(tag, getRank(), "recv"), options(work->placement(), timeout_)); });
}

c10::intrusive_ptr<TorchWork> ChorusProcessGroup::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  const at::Tensor& tensor = single(tensors, "recv from any source", "", getRank());
  if (getSize() == 1) {
    throw InvalidArgument(cat("rank ", getRank(), ": chorus.torch recv from any source: this group has no other rank"));
  }
  auto work = make_work(c10d::OpType::RECVANYSOURCE, "recv from any source", {tensor});
  at::Tensor buffer = work->staging().output(tensor);
  const Elements elements = movement_elements(buffer);
  return issue(work, [&] {
    return recv_any_async(*context_, buffer.data_ptr(), elements.count, elements.type,
                          tag_of(tag, getRank(), "recv from any source"), options(work->placement(), timeout_));
  });
}

}  // namespace chorus::torch_backend
