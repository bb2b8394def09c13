// The C API's collectives and point-to-point calls, blocking and async: each
// converts its C arguments through a CollectiveCall and calls the C++ form.
#include "adapters/c_api/c_api.h"
#include "chorus/collectives.h"

namespace chorus::c_api {
namespace {

template <class Run>
chorus_status blocking(chorus_context* handle, const char* function, const char* collective,
                       const chorus_collective_options* options, Run&& run) {
  return guarded([&] {
    const CollectiveCall call(handle, function, collective, options);
    run(call);
  });
}

template <class Issue>
chorus_status async(chorus_context* handle, const char* function, const char* collective,
                    const chorus_collective_options* options, chorus_work** work, Issue&& issue) {
  // A caller that ignores the status must not find a stale handle in *work.
  if (work != nullptr) *work = nullptr;
  return guarded([&] {
    const CollectiveCall call(handle, function, collective, options);
    issue_async(call, work, [&] { return issue(call); });
  });
}

}  // namespace
}  // namespace chorus::c_api

using namespace chorus;
using c_api::CollectiveCall;

extern "C" {

chorus_status chorus_allreduce(chorus_context* context, const void* input, void* output, size_t count,
                               chorus_datatype type, chorus_reduce_op op, const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_allreduce", "allreduce", options, [&](const CollectiveCall& c) {
    chorus::allreduce(c.context(), input, output, count, c.type(type), c.op(op), c.options());
  });
}

chorus_status chorus_allreduce_async(chorus_context* context, const void* input, void* output, size_t count,
                                     chorus_datatype type, chorus_reduce_op op,
                                     const chorus_collective_options* options, chorus_work** work) {
  return c_api::async(context, "chorus_allreduce_async", "allreduce", options, work, [&](const CollectiveCall& c) {
    return chorus::allreduce_async(c.context(), input, output, count, c.type(type), c.op(op), c.options());
  });
}

chorus_status chorus_broadcast(chorus_context* context, void* data, size_t count, chorus_datatype type, int root,
                               const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_broadcast", "broadcast", options, [&](const CollectiveCall& c) {
    chorus::broadcast(c.context(), data, count, c.type(type), root, c.options());
  });
}

chorus_status chorus_broadcast_async(chorus_context* context, void* data, size_t count, chorus_datatype type, int root,
                                     const chorus_collective_options* options, chorus_work** work) {
  return c_api::async(context, "chorus_broadcast_async", "broadcast", options, work, [&](const CollectiveCall& c) {
    return chorus::broadcast_async(c.context(), data, count, c.type(type), root, c.options());
  });
}

chorus_status chorus_reduce(chorus_context* context, const void* input, void* output, size_t count,
                            chorus_datatype type, chorus_reduce_op op, int root,
                            const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_reduce", "reduce", options, [&](const CollectiveCall& c) {
    chorus::reduce(c.context(), input, output, count, c.type(type), c.op(op), root, c.options());
  });
}

chorus_status chorus_reduce_async(chorus_context* context, const void* input, void* output, size_t count,
                                  chorus_datatype type, chorus_reduce_op op, int root,
                                  const chorus_collective_options* options, chorus_work** work) {
  return c_api::async(context, "chorus_reduce_async", "reduce", options, work, [&](const CollectiveCall& c) {
    return chorus::reduce_async(c.context(), input, output, count, c.type(type), c.op(op), root, c.options());
  });
}

chorus_status chorus_reduce_scatter(chorus_context* context, const void* input, void* output, size_t count,
                                    chorus_datatype type, chorus_reduce_op op,
                                    const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_reduce_scatter", "reduce_scatter", options, [&](const CollectiveCall& c) {
    chorus::reduce_scatter(c.context(), input, output, count, c.type(type), c.op(op), c.options());
  });
}

chorus_status chorus_reduce_scatter_async(chorus_context* context, const void* input, void* output, size_t count,
                                          chorus_datatype type, chorus_reduce_op op,
                                          const chorus_collective_options* options, chorus_work** work) {
  return c_api::async(
      context, "chorus_reduce_scatter_async", "reduce_scatter", options, work, [&](const CollectiveCall& c) {
        return chorus::reduce_scatter_async(c.context(), input, output, count, c.type(type), c.op(op), c.options());
      });
}

chorus_status chorus_reduce_scatter_v(chorus_context* context, const void* input, void* output, const size_t* counts,
                                      chorus_datatype type, chorus_reduce_op op,
                                      const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_reduce_scatter_v", "reduce_scatter_v", options, [&](const CollectiveCall& c) {
    chorus::reduce_scatter_v(c.context(), input, output, c.counts(counts, "counts"), c.type(type), c.op(op),
                             c.options());
  });
}

chorus_status chorus_reduce_scatter_v_async(chorus_context* context, const void* input, void* output,
                                            const size_t* counts, chorus_datatype type, chorus_reduce_op op,
                                            const chorus_collective_options* options, chorus_work** work) {
  return c_api::async(context, "chorus_reduce_scatter_v_async", "reduce_scatter_v", options, work,
                      [&](const CollectiveCall& c) {
                        return chorus::reduce_scatter_v_async(c.context(), input, output, c.counts(counts, "counts"),
                                                              c.type(type), c.op(op), c.options());
                      });
}

chorus_status chorus_allgather(chorus_context* context, const void* input, void* output, size_t count,
                               chorus_datatype type, const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_allgather", "allgather", options, [&](const CollectiveCall& c) {
    chorus::allgather(c.context(), input, output, count, c.type(type), c.options());
  });
}

chorus_status chorus_allgather_async(chorus_context* context, const void* input, void* output, size_t count,
                                     chorus_datatype type, const chorus_collective_options* options,
                                     chorus_work** work) {
  return c_api::async(context, "chorus_allgather_async", "allgather", options, work, [&](const CollectiveCall& c) {
    return chorus::allgather_async(c.context(), input, output, count, c.type(type), c.options());
  });
}

chorus_status chorus_allgatherv(chorus_context* context, const void* input, void* output, const size_t* counts,
                                chorus_datatype type, const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_allgatherv", "allgatherv", options, [&](const CollectiveCall& c) {
    chorus::allgatherv(c.context(), input, output, c.counts(counts, "counts"), c.type(type), c.options());
  });
}

chorus_status chorus_allgatherv_async(chorus_context* context, const void* input, void* output, const size_t* counts,
                                      chorus_datatype type, const chorus_collective_options* options,
                                      chorus_work** work) {
  return c_api::async(context, "chorus_allgatherv_async", "allgatherv", options, work, [&](const CollectiveCall& c) {
    return chorus::allgatherv_async(c.context(), input, output, c.counts(counts, "counts"), c.type(type), c.options());
  });
}

chorus_status chorus_gather(chorus_context* context, const void* input, void* output, size_t count,
                            chorus_datatype type, int root, const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_gather", "gather", options, [&](const CollectiveCall& c) {
    chorus::gather(c.context(), input, output, count, c.type(type), root, c.options());
  });
}

chorus_status chorus_gather_async(chorus_context* context, const void* input, void* output, size_t count,
                                  chorus_datatype type, int root, const chorus_collective_options* options,
                                  chorus_work** work) {
  return c_api::async(context, "chorus_gather_async", "gather", options, work, [&](const CollectiveCall& c) {
    return chorus::gather_async(c.context(), input, output, count, c.type(type), root, c.options());
  });
}

chorus_status chorus_gatherv(chorus_context* context, const void* input, void* output, const size_t* counts,
                             chorus_datatype type, int root, const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_gatherv", "gatherv", options, [&](const CollectiveCall& c) {
    chorus::gatherv(c.context(), input, output, c.counts(counts, "counts"), c.type(type), root, c.options());
  });
}

chorus_status chorus_gatherv_async(chorus_context* context, const void* input, void* output, const size_t* counts,
                                   chorus_datatype type, int root, const chorus_collective_options* options,
                                   chorus_work** work) {
  return c_api::async(context, "chorus_gatherv_async", "gatherv", options, work, [&](const CollectiveCall& c) {
    return chorus::gatherv_async(c.context(), input, output, c.counts(counts, "counts"), c.type(type), root,
                                 c.options());
  });
}

chorus_status chorus_scatter(chorus_context* context, const void* input, void* output, size_t count,
                             chorus_datatype type, int root, const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_scatter", "scatter", options, [&](const CollectiveCall& c) {
    chorus::scatter(c.context(), input, output, count, c.type(type), root, c.options());
  });
}

chorus_status chorus_scatter_async(chorus_context* context, const void* input, void* output, size_t count,
                                   chorus_datatype type, int root, const chorus_collective_options* options,
                                   chorus_work** work) {
  return c_api::async(context, "chorus_scatter_async", "scatter", options, work, [&](const CollectiveCall& c) {
    return chorus::scatter_async(c.context(), input, output, count, c.type(type), root, c.options());
  });
}

chorus_status chorus_scatterv(chorus_context* context, const void* input, void* output, const size_t* counts,
                              chorus_datatype type, int root, const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_scatterv", "scatterv", options, [&](const CollectiveCall& c) {
    chorus::scatterv(c.context(), input, output, c.counts(counts, "counts"), c.type(type), root, c.options());
  });
}

chorus_status chorus_scatterv_async(chorus_context* context, const void* input, void* output, const size_t* counts,
                                    chorus_datatype type, int root, const chorus_collective_options* options,
                                    chorus_work** work) {
  return c_api::async(context, "chorus_scatterv_async", "scatterv", options, work, [&](const CollectiveCall& c) {
    return chorus::scatterv_async(c.context(), input, output, c.counts(counts, "counts"), c.type(type), root,
                                  c.options());
  });
}

chorus_status chorus_alltoall(chorus_context* context, const void* input, void* output, size_t count,
                              chorus_datatype type, const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_alltoall", "alltoall", options, [&](const CollectiveCall& c) {
    chorus::alltoall(c.context(), input, output, count, c.type(type), c.options());
  });
}

chorus_status chorus_alltoall_async(chorus_context* context, const void* input, void* output, size_t count,
                                    chorus_datatype type, const chorus_collective_options* options,
                                    chorus_work** work) {
  return c_api::async(context, "chorus_alltoall_async", "alltoall", options, work, [&](const CollectiveCall& c) {
    return chorus::alltoall_async(c.context(), input, output, count, c.type(type), c.options());
  });
}

chorus_status chorus_alltoallv(chorus_context* context, const void* input, const size_t* send_counts, void* output,
                               const size_t* recv_counts, chorus_datatype type,
                               const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_alltoallv", "alltoallv", options, [&](const CollectiveCall& c) {
    chorus::alltoallv(c.context(), input, c.counts(send_counts, "send_counts"), output,
                      c.counts(recv_counts, "recv_counts"), c.type(type), c.options());
  });
}

chorus_status chorus_alltoallv_async(chorus_context* context, const void* input, const size_t* send_counts,
                                     void* output, const size_t* recv_counts, chorus_datatype type,
                                     const chorus_collective_options* options, chorus_work** work) {
  return c_api::async(context, "chorus_alltoallv_async", "alltoallv", options, work, [&](const CollectiveCall& c) {
    return chorus::alltoallv_async(c.context(), input, c.counts(send_counts, "send_counts"), output,
                                   c.counts(recv_counts, "recv_counts"), c.type(type), c.options());
  });
}

// Grouped collectives: the C arrays become the C++ call's members.

chorus_status chorus_grouped_allreduce(chorus_context* context, const void* const* inputs, void* const* outputs,
                                       const size_t* counts, size_t members, chorus_datatype type,
                                       chorus_reduce_op op, const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_grouped_allreduce", "grouped_allreduce", options,
                         [&](const CollectiveCall& c) {
                           chorus::grouped_allreduce(c.context(), c.members(inputs, outputs, counts, members),
                                                     c.type(type), c.op(op), c.options());
                         });
}

chorus_status chorus_grouped_allreduce_async(chorus_context* context, const void* const* inputs,
                                             void* const* outputs, const size_t* counts, size_t members,
                                             chorus_datatype type, chorus_reduce_op op,
                                             const chorus_collective_options* options, chorus_work** work) {
  return c_api::async(context, "chorus_grouped_allreduce_async", "grouped_allreduce", options, work,
                      [&](const CollectiveCall& c) {
                        return chorus::grouped_allreduce_async(c.context(),
                                                               c.members(inputs, outputs, counts, members),
                                                               c.type(type), c.op(op), c.options());
                      });
}

chorus_status chorus_grouped_allgather(chorus_context* context, const void* const* inputs, void* const* outputs,
                                       const size_t* counts, size_t members, chorus_datatype type,
                                       const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_grouped_allgather", "grouped_allgather", options,
                         [&](const CollectiveCall& c) {
                           chorus::grouped_allgather(c.context(), c.members(inputs, outputs, counts, members),
                                                     c.type(type), c.options());
                         });
}

chorus_status chorus_grouped_allgather_async(chorus_context* context, const void* const* inputs,
                                             void* const* outputs, const size_t* counts, size_t members,
                                             chorus_datatype type, const chorus_collective_options* options,
                                             chorus_work** work) {
  return c_api::async(context, "chorus_grouped_allgather_async", "grouped_allgather", options, work,
                      [&](const CollectiveCall& c) {
                        return chorus::grouped_allgather_async(
                            c.context(), c.members(inputs, outputs, counts, members), c.type(type), c.options());
                      });
}

chorus_status chorus_grouped_reduce_scatter(chorus_context* context, const void* const* inputs,
                                            void* const* outputs, const size_t* counts, size_t members,
                                            chorus_datatype type, chorus_reduce_op op,
                                            const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_grouped_reduce_scatter", "grouped_reduce_scatter", options,
                         [&](const CollectiveCall& c) {
                           chorus::grouped_reduce_scatter(c.context(), c.members(inputs, outputs, counts, members),
                                                          c.type(type), c.op(op), c.options());
                         });
}

chorus_status chorus_grouped_reduce_scatter_async(chorus_context* context, const void* const* inputs,
                                                  void* const* outputs, const size_t* counts, size_t members,
                                                  chorus_datatype type, chorus_reduce_op op,
                                                  const chorus_collective_options* options, chorus_work** work) {
  return c_api::async(context, "chorus_grouped_reduce_scatter_async", "grouped_reduce_scatter", options, work,
                      [&](const CollectiveCall& c) {
                        return chorus::grouped_reduce_scatter_async(c.context(),
                                                                    c.members(inputs, outputs, counts, members),
                                                                    c.type(type), c.op(op), c.options());
                      });
}

chorus_status chorus_barrier(chorus_context* context, const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_barrier", "barrier", options,
                         [&](const CollectiveCall& c) { chorus::barrier(c.context(), c.options()); });
}

chorus_status chorus_barrier_async(chorus_context* context, const chorus_collective_options* options,
                                   chorus_work** work) {
  return c_api::async(context, "chorus_barrier_async", "barrier", options, work,
                      [&](const CollectiveCall& c) { return chorus::barrier_async(c.context(), c.options()); });
}

// Point-to-point.

chorus_status chorus_send(chorus_context* context, const void* data, size_t count, chorus_datatype type, int peer,
                          uint32_t tag, const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_send", "send", options, [&](const CollectiveCall& c) {
    chorus::send(c.context(), data, count, c.type(type), peer, tag, c.options());
  });
}

chorus_status chorus_send_async(chorus_context* context, const void* data, size_t count, chorus_datatype type, int peer,
                                uint32_t tag, const chorus_collective_options* options, chorus_work** work) {
  return c_api::async(context, "chorus_send_async", "send", options, work, [&](const CollectiveCall& c) {
    return chorus::send_async(c.context(), data, count, c.type(type), peer, tag, c.options());
  });
}

chorus_status chorus_recv(chorus_context* context, void* data, size_t count, chorus_datatype type, int peer,
                          uint32_t tag, const chorus_collective_options* options) {
  return c_api::blocking(context, "chorus_recv", "recv", options, [&](const CollectiveCall& c) {
    chorus::recv(c.context(), data, count, c.type(type), peer, tag, c.options());
  });
}

chorus_status chorus_recv_async(chorus_context* context, void* data, size_t count, chorus_datatype type, int peer,
                                uint32_t tag, const chorus_collective_options* options, chorus_work** work) {
  return c_api::async(context, "chorus_recv_async", "recv", options, work, [&](const CollectiveCall& c) {
    return chorus::recv_async(c.context(), data, count, c.type(type), peer, tag, c.options());
  });
}

chorus_status chorus_recv_any(chorus_context* context, void* data, size_t count, chorus_datatype type, uint32_t tag,
                              const chorus_collective_options* options, int* source) {
  return c_api::blocking(context, "chorus_recv_any", "recv_any", options, [&](const CollectiveCall& c) {
    const int sender = chorus::recv_any(c.context(), data, count, c.type(type), tag, c.options());
    if (source) *source = sender;
  });
}

chorus_status chorus_recv_any_async(chorus_context* context, void* data, size_t count, chorus_datatype type,
                                    uint32_t tag, const chorus_collective_options* options, chorus_work** work) {
  return c_api::async(context, "chorus_recv_any_async", "recv_any", options, work, [&](const CollectiveCall& c) {
    return chorus::recv_any_async(c.context(), data, count, c.type(type), tag, c.options());
  });
}

}  // extern "C"
