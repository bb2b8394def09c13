#include "test/collectives/point_to_point_checks.h"

#include <chrono>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

#include "chorus/collectives.h"
#include "base/log.h"

namespace chorus::collective_test {
namespace {

int64_t message_value(uint32_t tag, int sender, size_t index) {
  return static_cast<int64_t>((index * 3 + tag * 5 + static_cast<size_t>(sender)) % 97);
}

std::vector<int64_t> message(uint32_t tag, int sender, size_t count) {
  std::vector<int64_t> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = message_value(tag, sender, i);
  return data;
}

std::string expect_message(const std::vector<int64_t>& got, uint32_t tag, int sender, const char* what) {
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != message_value(tag, sender, i))
      return cat(what, ": element ", i, " of the message with tag ", tag, " from rank ", sender, " is ", got[i],
                 ", expected ", message_value(tag, sender, i));
  return "";
}

// Rank 0 and the last rank bounce messages of several sizes; the bouncer
// adds one to every element so each direction is checked.
std::string ping_pong(Context& context) {
  const int last = context.size() - 1;
  if (context.rank() != 0 && context.rank() != last) return "";
  const size_t sizes[] = {0, 1, 1000, 300000};
  uint32_t tag = 100;
  for (size_t count : sizes) {
    for (int round = 0; round < 3; ++round, ++tag) {
      if (context.rank() == 0) {
        std::vector<int64_t> data = message(tag, 0, count);
        send(context, std::span(data), last, tag);
        std::vector<int64_t> back(count);
        recv(context, std::span(back), last, tag + 10000);
        for (size_t i = 0; i < count; ++i)
          if (back[i] != message_value(tag, 0, i) + 1)
            return cat("ping-pong: element ", i, " of ", count, " came back as ", back[i]);
      } else {
        std::vector<int64_t> data(count);
        recv(context, std::span(data), 0, tag);
        if (auto failure = expect_message(data, tag, 0, "ping-pong"); !failure.empty()) return failure;
        for (int64_t& value : data) ++value;
        send(context, std::span(data), 0, tag + 10000);
      }
    }
  }
  return "";
}

// Everyone sends to its right neighbour and receives from its left at once.
std::string async_ring(Context& context) {
  const int right = (context.rank() + 1) % context.size();
  const int left = (context.rank() + context.size() - 1) % context.size();
  const uint32_t tag = 7;
  std::vector<int64_t> outgoing = message(tag, context.rank(), 4099);
  std::vector<int64_t> incoming(4099);
  Work received = recv_async(context, std::span(incoming), left, tag);
  Work sent = send_async(context, std::span(outgoing), right, tag);
  sent.wait();
  received.wait();
  return expect_message(incoming, tag, left, "async ring");
}

// Everyone sends to its right neighbour with a blocking send, then
// receives from its left: send must finish before the peer posts its recv
// (point_to_point.h), also for messages shm would otherwise copy with a
// single-copy pull (from 64 KiB), which waits for the receive, and for
// messages larger than its 1 MiB ring. Found by chorus-soak: this ring
// timed out over shared memory.
std::string blocking_ring(Context& context) {
  const int right = (context.rank() + 1) % context.size();
  const int left = (context.rank() + context.size() - 1) % context.size();
  uint32_t tag = 20;
  for (size_t count : {size_t{12289}, size_t{300007}}) {
    std::vector<int64_t> outgoing = message(tag, context.rank(), count);
    std::vector<int64_t> incoming(count);
    send(context, std::span(outgoing), right, tag);
    recv(context, std::span(incoming), left, tag);
    if (auto failure = expect_message(incoming, tag, left, "blocking ring"); !failure.empty()) return failure;
    ++tag;
  }
  return "";
}

// Rank 1 sends tags 1, 2, 3; rank 0 receives 3, then 1, then 2. Then rank 0
// sends two messages with one tag; rank 1 must get them in order.
std::string tag_order(Context& context) {
  if (context.rank() == 1) {
    for (uint32_t tag = 1; tag <= 3; ++tag) {
      std::vector<int64_t> data = message(tag, 1, 100 + tag);
      send(context, std::span(data), 0, tag);
    }
    for (uint32_t copy = 0; copy < 2; ++copy) {
      std::vector<int64_t> data(50);
      recv(context, std::span(data), 0, 9);
      if (auto failure = expect_message(data, 9 + copy, 0, "same-tag order"); !failure.empty()) return failure;
    }
  } else if (context.rank() == 0) {
    for (uint32_t tag : {3u, 1u, 2u}) {
      std::vector<int64_t> data(100 + tag);
      recv(context, std::span(data), 1, tag);
      if (auto failure = expect_message(data, tag, 1, "out-of-order tags"); !failure.empty()) return failure;
    }
    std::vector<int64_t> first = message(9, 0, 50), second = message(10, 0, 50);
    Work a = send_async(context, std::span(first), 1, 9);
    Work b = send_async(context, std::span(second), 1, 9);
    a.wait();
    b.wait();
  }
  return "";
}

// A message in flight across a collective, and an async receive polled
// with test() while its sender is still sleeping.
std::string interleaved(Context& context) {
  const int last = context.size() - 1;
  std::vector<int64_t> data = message(11, 0, 777);
  Work sent;
  if (context.rank() == 0) sent = send_async(context, std::span(data), last, 11);
  int64_t everyone = 1;
  allreduce(context, std::span(&everyone, 1), ReduceOp::sum);
  if (everyone != context.size()) return cat("interleaved allreduce gave ", everyone);
  if (context.rank() == last) {
    std::vector<int64_t> got(777);
    recv(context, std::span(got), 0, 11);
    if (auto failure = expect_message(got, 11, 0, "across a collective"); !failure.empty()) return failure;
  }
  if (sent.valid()) sent.wait();

  if (context.rank() == last) {
    std::vector<int64_t> got(64);
    Work pending = recv_async(context, std::span(got), 0, 12);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!pending.test()) {
      if (std::chrono::steady_clock::now() > give_up) return "test() never saw the async receive finish";
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (pending.exception()) std::rethrow_exception(pending.exception());
    pending.wait();
    return expect_message(got, 12, 0, "polled receive");
  }
  if (context.rank() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::vector<int64_t> later = message(12, 0, 64);
    send(context, std::span(later), last, 12);
  }
  return "";
}

}  // namespace

std::string check_point_to_point(Context& context, size_t& checks) {
  if (context.size() < 2) return "";
  using Check = std::string (*)(Context&);
  const std::pair<const char*, Check> all[] = {
      {"ping-pong", ping_pong},     {"async ring", async_ring},   {"blocking ring", blocking_ring},
      {"tag order", tag_order},     {"interleaved", interleaved}};
  for (auto [name, check] : all) {
    std::string failure;
    try {
      failure = check(context);
    } catch (const std::exception& error) {
      failure = cat(name, ": threw ", error.what());
    }
    if (!failure.empty()) return cat("rank ", context.rank(), ": ", failure);
    ++checks;
  }
  return "";
}

}  // namespace chorus::collective_test
