#include "oracle/collective_cases.h"

#include <cstring>
#include <span>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "chorus/collectives.h"
#include "oracle/reference_data.h"

namespace chorus::oracle {
namespace {

// Bytes after every buffer that no collective may write.
constexpr size_t guard_bytes = 64;
constexpr std::byte guard_value{0xa5};
constexpr std::byte garbage{0xee};

bool rooted_in_place(const Call& call) { return call.in_place && call.rank == call.root; }

// The library's in-place flag for this rank: rooted collectives are in
// place on root only.
bool library_in_place(const Call& call) {
  switch (call.collective) {
    case Collective::broadcast:
    case Collective::barrier: return true;
    case Collective::reduce:
    case Collective::gather:
    case Collective::scatter: return rooted_in_place(call);
    case Collective::alltoall: return false;
    default: return call.in_place;
  }
}

std::vector<size_t> alltoallv_sends(const Call& call) {
  std::vector<size_t> counts(static_cast<size_t>(call.size));
  for (int to = 0; to < call.size; ++to) counts[static_cast<size_t>(to)] = alltoallv_count(call.rank, to, call.count);
  return counts;
}

std::vector<size_t> alltoallv_receives(const Call& call) {
  std::vector<size_t> counts(static_cast<size_t>(call.size));
  for (int from = 0; from < call.size; ++from)
    counts[static_cast<size_t>(from)] = alltoallv_count(from, call.rank, call.count);
  return counts;
}

Work invoke_raw(Context& context, const Case& test, const void* in, void* out) {
  const Call& call = test.call;
  CollectiveOptions options;
  options.algorithm = test.algorithm;
  const bool v = !call.counts.empty();
  auto run = [&](auto&& blocking, auto&& async) -> Work {
    if (test.async) return async();
    blocking();
    return Work();
  };
  switch (call.collective) {
    case Collective::allreduce:
      return run([&] { allreduce(context, in, out, call.count, call.type, call.op, options); },
                 [&] { return allreduce_async(context, in, out, call.count, call.type, call.op, options); });
    case Collective::broadcast:
      return run([&] { broadcast(context, out, call.count, call.type, call.root, options); },
                 [&] { return broadcast_async(context, out, call.count, call.type, call.root, options); });
    case Collective::barrier:
      return run([&] { barrier(context, options); }, [&] { return barrier_async(context, options); });
    case Collective::reduce:
      return run([&] { reduce(context, in, out, call.count, call.type, call.op, call.root, options); },
                 [&] { return reduce_async(context, in, out, call.count, call.type, call.op, call.root, options); });
    case Collective::reduce_scatter:
      if (v)
        return run([&] { reduce_scatter_v(context, in, out, call.counts, call.type, call.op, options); },
                   [&] { return reduce_scatter_v_async(context, in, out, call.counts, call.type, call.op, options); });
      return run([&] { reduce_scatter(context, in, out, call.count, call.type, call.op, options); },
                 [&] { return reduce_scatter_async(context, in, out, call.count, call.type, call.op, options); });
    case Collective::allgather:
      if (v)
        return run([&] { allgatherv(context, in, out, call.counts, call.type, options); },
                   [&] { return allgatherv_async(context, in, out, call.counts, call.type, options); });
      return run([&] { allgather(context, in, out, call.count, call.type, options); },
                 [&] { return allgather_async(context, in, out, call.count, call.type, options); });
    case Collective::gather:
      if (v)
        return run([&] { gatherv(context, in, out, call.counts, call.type, call.root, options); },
                   [&] { return gatherv_async(context, in, out, call.counts, call.type, call.root, options); });
      return run([&] { gather(context, in, out, call.count, call.type, call.root, options); },
                 [&] { return gather_async(context, in, out, call.count, call.type, call.root, options); });
    case Collective::scatter:
      if (v)
        return run([&] { scatterv(context, in, out, call.counts, call.type, call.root, options); },
                   [&] { return scatterv_async(context, in, out, call.counts, call.type, call.root, options); });
      return run([&] { scatter(context, in, out, call.count, call.type, call.root, options); },
                 [&] { return scatter_async(context, in, out, call.count, call.type, call.root, options); });
    case Collective::alltoall:
      if (!call.send_counts.empty()) {
        const std::vector<size_t> sends = alltoallv_sends(call), receives = alltoallv_receives(call);
        return run([&] { alltoallv(context, in, sends, out, receives, call.type, options); },
                   [&] { return alltoallv_async(context, in, sends, out, receives, call.type, options); });
      }
      return run([&] { alltoall(context, in, out, call.count, call.type, options); },
                 [&] { return alltoall_async(context, in, out, call.count, call.type, options); });
    case Collective::send:
    case Collective::recv: break;
  }
  throw InvalidArgument("collective test: point-to-point cases are not collectives");
}

// The std::span overloads, for float32 cases. `whole` is the in-place
// buffer (allgather, reduce_scatter) of total_count elements.
Work invoke_typed(Context& context, const Case& test, const void* in, size_t in_elements, void* out,
                  size_t out_elements, float* whole) {
  const Call& call = test.call;
  CollectiveOptions options;
  options.algorithm = test.algorithm;
  const bool v = !call.counts.empty();
  std::span<const float> input(static_cast<const float*>(in), in_elements);
  std::span<float> output(static_cast<float*>(out), out_elements);
  switch (call.collective) {
    case Collective::allreduce:
      if (call.in_place) {
        if (test.async) return allreduce_async(context, output, call.op, options);
        allreduce(context, output, call.op, options);
      } else {
        if (test.async) return allreduce_async(context, input, output, call.op, options);
        allreduce(context, input, output, call.op, options);
      }
      return Work();
    case Collective::broadcast:
      if (test.async) return broadcast_async(context, output, call.root, options);
      broadcast(context, output, call.root, options);
      return Work();
    case Collective::reduce:
      if (rooted_in_place(call)) {
        reduce(context, output, call.op, call.root, options);
        return Work();
      }
      if (test.async) return reduce_async(context, input, output, call.op, call.root, options);
      reduce(context, input, output, call.op, call.root, options);
      return Work();
    case Collective::reduce_scatter:
      if (call.in_place && !v) {
        reduce_scatter(context, std::span<float>(whole, call.total_count()), call.op, options);
      } else if (v) {
        if (test.async) return reduce_scatter_v_async(context, input, output, call.counts, call.op, options);
        reduce_scatter_v(context, input, output, call.counts, call.op, options);
      } else {
        if (test.async) return reduce_scatter_async(context, input, output, call.op, options);
        reduce_scatter(context, input, output, call.op, options);
      }
      return Work();
    case Collective::allgather:
      if (call.in_place) {
        if (v) allgatherv(context, std::span<float>(whole, call.total_count()), call.counts, options);
        else allgather(context, std::span<float>(whole, call.total_count()), options);
      } else if (v) {
        if (test.async) return allgatherv_async(context, input, output, call.counts, options);
        allgatherv(context, input, output, call.counts, options);
      } else {
        if (test.async) return allgather_async(context, input, output, options);
        allgather(context, input, output, options);
      }
      return Work();
    case Collective::gather:
      if (v) gatherv(context, input, output, call.counts, call.root, options);
      else if (test.async) return gather_async(context, input, output, call.root, options);
      else gather(context, input, output, call.root, options);
      return Work();
    case Collective::scatter:
      if (v) scatterv(context, input, output, call.counts, call.root, options);
      else if (test.async) return scatter_async(context, input, output, call.root, options);
      else scatter(context, input, output, call.root, options);
      return Work();
    case Collective::alltoall:
      if (!call.send_counts.empty()) {
        const std::vector<size_t> sends = alltoallv_sends(call), receives = alltoallv_receives(call);
        if (test.async) return alltoallv_async(context, input, sends, output, receives, options);
        alltoallv(context, input, sends, output, receives, options);
      } else {
        if (test.async) return alltoall_async(context, input, output, options);
        alltoall(context, input, output, options);
      }
      return Work();
    case Collective::barrier:
      barrier(context, options);
      return Work();
    case Collective::send:
    case Collective::recv: break;
  }
  throw InvalidArgument("collective test: point-to-point cases are not collectives");
}

}  // namespace

algorithms::Call library_call(const Case& test) {
  Call call = test.call;
  call.in_place = library_in_place(test.call);
  if (!call.counts.empty()) call.count = call.total_count();
  if (!call.send_counts.empty()) {
    call.send_counts = alltoallv_sends(test.call);
    call.recv_counts = alltoallv_receives(test.call);
    call.count = 0;
  }
  if (call.collective == Collective::barrier) call.count = 0;
  return call;
}

std::string describe(const Case& test) {
  const Call& call = test.call;
  std::string text = cat(algorithms::to_string(call.collective), call.counts.empty() ? "" : "v",
                         call.send_counts.empty() ? "" : "v", " ", test.algorithm, " count ", call.count, " ",
                         to_string(call.type));
  if (call.collective == Collective::allreduce || call.collective == Collective::reduce ||
      call.collective == Collective::reduce_scatter)
    text += cat(" ", to_string(call.op));
  if (call.collective == Collective::broadcast || call.collective == Collective::reduce ||
      call.collective == Collective::gather || call.collective == Collective::scatter)
    text += cat(" root ", call.root);
  if (!call.counts.empty()) {
    text += " counts";
    for (size_t count : call.counts) text += cat(" ", count);
  }
  if (call.in_place) text += " in place";
  if (test.async) text += " async";
  if (test.typed) text += " typed";
  if (test.salt != 0) text += cat(" salt ", test.salt);
  return text;
}

Support algorithm_support(const algorithms::Algorithm& algorithm, const Case& test,
                          const std::shared_ptr<const Topology>& topology) {
  int supported = 0;
  for (int rank = 0; rank < test.call.size; ++rank) {
    Case of_rank = test;
    of_rank.call.rank = rank;
    if (!of_rank.call.send_counts.empty()) of_rank.call.send_counts = {1};
    algorithms::Call call = library_call(of_rank);
    call.topology = topology;
    // The algorithm layer runs an in-place reduce_scatter out of place into
    // a block buffer (see run.cc), so that is what the algorithm must serve.
    if (call.collective == Collective::reduce_scatter) call.in_place = false;
    supported += algorithm.supports(call) ? 1 : 0;
  }
  if (supported == test.call.size) return Support::all;
  return supported == 0 ? Support::none : Support::some;
}

struct CheckedCall::State {
  // Nested, not in an anonymous namespace: g++ warns (-Wsubobject-linkage)
  // when this class, declared in a header, holds fields of internal-linkage
  // types from a file that is not the main one, as in a unity build.
  struct Buffer {
    std::vector<std::byte> bytes;
    size_t length = 0;  // before the guard

    explicit Buffer(size_t size, std::byte fill = garbage) : bytes(size + guard_bytes, fill), length(size) {
      std::memset(bytes.data() + size, static_cast<int>(guard_value), guard_bytes);
    }
    Buffer(const std::vector<std::byte>& content) : Buffer(content.size()) {
      if (!content.empty()) std::memcpy(bytes.data(), content.data(), content.size());
    }
    std::byte* data() { return length == 0 ? nullptr : bytes.data(); }
    bool guard_intact() const {
      for (size_t i = length; i < bytes.size(); ++i)
        if (bytes[i] != guard_value) return false;
      return true;
    }
  };

  Case test;
  std::vector<std::byte> expected;
  std::vector<std::byte> own_input;
  Buffer input;
  Buffer output;
  const void* in = nullptr;
  void* out = nullptr;
  // Where the result is read back and which buffer's guard to check.
  std::byte* result = nullptr;
  Buffer* written = nullptr;
  size_t in_elements = 0;
  size_t out_elements = 0;
  float* whole = nullptr;

  explicit State(const Case& c)
      : test(c),
        expected(expected_output(c.call, c.salt)),
        own_input(input_bytes_of(c.call, c.call.rank, c.salt)),
        input(own_input),
        output(expected.size()) {}
};

CheckedCall::CheckedCall(const Case& test) : state_(std::make_unique<State>(test)) {
  State& s = *state_;
  const Call& call = s.test.call;
  const size_t element = call.element_bytes();
  const bool root = call.rank == call.root;
  State::Buffer& input = s.input;
  State::Buffer& output = s.output;
  s.in = input.data();
  s.out = output.data();
  s.result = output.data();
  s.written = &output;
  s.in_elements = s.own_input.size() / element;
  s.out_elements = s.expected.size() / element;

  const size_t own_offset_bytes = call.block_offset(call.rank) * element;
  switch (call.collective) {
    case Collective::allreduce:
      if (call.in_place) {
        s.out = input.data();
        s.result = input.data();
        s.written = &input;
      }
      break;
    case Collective::broadcast:
      if (root) {
        s.out = input.data();
        s.result = input.data();
        s.written = &input;
      }
      break;
    case Collective::reduce:
      if (rooted_in_place(call)) {
        s.out = input.data();
        s.result = input.data();
        s.written = &input;
      }
      break;
    case Collective::reduce_scatter:
      if (call.in_place) {
        s.whole = reinterpret_cast<float*>(input.bytes.data());
        s.out = input.bytes.data() + own_offset_bytes;
        s.result = input.bytes.data() + own_offset_bytes;
        s.written = &input;
      }
      break;
    case Collective::allgather:
    case Collective::gather:
      if (call.collective == Collective::allgather ? call.in_place : rooted_in_place(call)) {
        if (!s.own_input.empty())
          std::memcpy(output.bytes.data() + own_offset_bytes, s.own_input.data(), s.own_input.size());
        s.whole = reinterpret_cast<float*>(output.bytes.data());
        s.in = output.bytes.data() + own_offset_bytes;
      }
      break;
    case Collective::scatter:
      if (rooted_in_place(call)) {
        s.out = input.bytes.data() + own_offset_bytes;
        s.result = input.bytes.data() + own_offset_bytes;
        s.written = &input;
      }
      break;
    default: break;
  }
}

CheckedCall::~CheckedCall() = default;

const Case& CheckedCall::test() const { return state_->test; }

std::span<std::byte> CheckedCall::result_bytes() {
  if (state_->expected.empty()) return {};
  return {state_->result, state_->expected.size()};
}

Work CheckedCall::issue(Context& context) {
  State& s = *state_;
  return s.test.typed ? invoke_typed(context, s.test, s.in, s.in_elements, s.out, s.out_elements, s.whole)
                      : invoke_raw(context, s.test, s.in, s.out);
}

std::string CheckedCall::check() const {
  const State& s = *state_;
  const Case& test = s.test;
  const Call& call = test.call;
  const size_t element = call.element_bytes();
  if (!s.expected.empty()) {
    const size_t index = first_difference(call.type, s.expected, s.result);
    if (index * element < s.expected.size())
      return cat(describe(test), ": output element ", index, " of ", s.expected.size() / element, " is ",
                 element_text(call.type, s.result + index * element), ", expected ",
                 element_text(call.type, s.expected.data() + index * element));
  }
  if (!s.written->guard_intact()) return cat(describe(test), ": wrote past the end of its buffer");
  if (s.written != &s.input && !s.input.guard_intact()) return cat(describe(test), ": wrote past the end of the input");
  const bool input_is_const = s.written != &s.input && !(call.collective == Collective::broadcast);
  if (input_is_const && !s.own_input.empty() &&
      std::memcmp(s.input.bytes.data(), s.own_input.data(), s.own_input.size()) != 0)
    return cat(describe(test), ": modified its input");
  return "";
}

std::string run_case(Context& context, const Case& test) {
  CheckedCall checked(test);
  try {
    Work work = checked.issue(context);
    if (work.valid()) work.wait();
  } catch (const std::exception& error) {
    return cat(describe(test), ": threw ", error.what());
  }
  return checked.check();
}

}  // namespace chorus::oracle
