// The C API's contexts: connecting (from the environment or a named store),
// what a context knows about its group, split, shrink, abort.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "adapters/c_api/c_api.h"
#include "base/config.h"
#include "chorus/connect.h"
#include "chorus/shrink.h"

namespace chorus::c_api {
namespace {

// The first version of chorus_connect_options: every field through
// `connections` (then named `reserved`, and 0).
constexpr size_t connect_options_v1_size = offsetof(chorus_connect_options, connections) + sizeof(int32_t);

std::string text_or_empty(const char* text) { return text != nullptr ? std::string(text) : std::string(); }

// `who` starts every message ("rank 3: chorus_context_create: ").
ConnectOptions connect_options_from(const chorus_connect_options* given, const std::string& who) {
  chorus_connect_options defaults;
  chorus_connect_options_init(&defaults);
  chorus_connect_options c = defaults;
  try {
    c = versioned_options(given, defaults, connect_options_v1_size, "chorus_connect_options");
  } catch (const InvalidArgument& error) {
    throw InvalidArgument(who + error.what());
  }
  ConnectOptions options;
  if (c.timeout_ms < 0 || c.timeout_ms > longest_timeout_ms)
    throw InvalidArgument(cat(who, "chorus_connect_options.timeout_ms is ", c.timeout_ms,
                              " (expected a positive timeout up to a year, or 0 for the default)"));
  if (c.timeout_ms > 0) options.timeout = std::chrono::milliseconds(c.timeout_ms);
  if (c.transports != nullptr) {
    options.transports = comma_list(c.transports);
    if (options.transports.empty())
      throw InvalidArgument(cat(who, "chorus_connect_options.transports '", c.transports,
                                "' names no transport (e.g. \"shm,tcp\"; null for the default)"));
  }
  options.interface = text_or_empty(c.network_interface);
  options.hostname = text_or_empty(c.hostname);
  options.host_id = text_or_empty(c.host_id);
  options.link_model = text_or_empty(c.link_model);
  options.secret = text_or_empty(c.secret);
  options.trace = text_or_empty(c.trace);
  if (c.trace_steps < -1 || c.trace_steps > 1)
    throw InvalidArgument(cat(who, "chorus_connect_options.trace_steps is ", c.trace_steps,
                              " (expected 1, 0, or -1 for CHORUS_TRACE_STEPS)"));
  if (c.trace_steps >= 0) options.trace_steps = c.trace_steps == 1;
  if (c.reserved2 != 0)
    throw InvalidArgument(cat(who, "chorus_connect_options.reserved2 is ", c.reserved2, " (must be 0)"));
  if (c.poll_time_us / 1000 > longest_timeout_ms)
    throw InvalidArgument(cat(who, "chorus_connect_options.poll_time_us is ", c.poll_time_us, " (more than a year)"));
  if (c.poll_time_us >= 0) options.poll_time = std::chrono::microseconds(c.poll_time_us);
  // Out-of-range stream counts are left to connect(), which names both the value and the range.
  if (c.streams != 0) options.streams = c.streams;
  if (c.connections == CHORUS_CONNECTIONS_FULL)
    options.connections = Connections::full_mesh;
  else if (c.connections == CHORUS_CONNECTIONS_ON_DEMAND)
    options.connections = Connections::on_demand;
  else if (c.connections != 0)
    throw InvalidArgument(cat(who, "chorus_connect_options.connections is ", c.connections,
                              " (expected CHORUS_CONNECTIONS_FULL, CHORUS_CONNECTIONS_ON_DEMAND, or 0 for "
                              "CHORUS_CONNECTIONS)"));
  return options;
}

// Hands out a new handle for a connected Context. The handle is allocated
// before connecting: a connect that succeeded on every rank must not be
// followed by a local out-of-memory that leaves the other ranks connected
// to nobody.
template <class Connect>
void create(chorus_context** out, const char* function, Connect&& connect) {
  chorus_context*& result = output(out, nullptr, function, "chorus_context*");
  result = nullptr;
  auto handle = std::make_unique<chorus_context>();
  handle->context = connect();
  result = handle.release();
}

// A query of a context that cannot fail once its arguments are good.
template <class Value, class Get>
chorus_status query(const chorus_context* handle, Value* out, const char* function, const char* name, Get&& get) {
  return guarded([&] {
    const Context& context = context_of(handle, function);
    output(out, &context, function, name) = get(context);
  });
}

}  // namespace
}  // namespace chorus::c_api

using namespace chorus;
using c_api::context_of;
using c_api::guarded;
using c_api::output;

extern "C" {

chorus_status chorus_context_create_from_env(const chorus_connect_options* options, chorus_context** context) {
  return guarded([&] {
    constexpr const char* function = "chorus_context_create_from_env";
    c_api::create(context, function, [&] {
      return connect_from_env(c_api::connect_options_from(options, cat(function, ": ")));
    });
  });
}

chorus_status chorus_context_create(const char* store_url, const char* job_id, int rank, int size,
                                    const chorus_connect_options* options, chorus_context** context) {
  return guarded([&] {
    constexpr const char* function = "chorus_context_create";
    const std::string who = cat("rank ", rank, ": ", function, ": ");
    c_api::create(context, function, [&] {
      if (store_url == nullptr) throw InvalidArgument(who + "got a null store_url");
      return connect_to_store(store_url, rank, size, c_api::text_or_empty(job_id),
                              c_api::connect_options_from(options, who));
    });
  });
}

chorus_status chorus_context_destroy(chorus_context* context) {
  return guarded([&] { delete context; });
}

chorus_status chorus_context_rank(const chorus_context* context, int* rank) {
  return c_api::query(context, rank, "chorus_context_rank", "rank", [](const Context& c) { return c.rank(); });
}

chorus_status chorus_context_size(const chorus_context* context, int* size) {
  return c_api::query(context, size, "chorus_context_size", "size", [](const Context& c) { return c.size(); });
}

chorus_status chorus_context_hosts(const chorus_context* context, int* hosts) {
  return c_api::query(context, hosts, "chorus_context_hosts", "hosts", [](const Context& c) { return c.hosts(); });
}

chorus_status chorus_context_host_of(const chorus_context* context, int rank, int* host) {
  return c_api::query(context, host, "chorus_context_host_of", "host",
                      [rank](const Context& c) { return c.host_of(rank); });
}

chorus_status chorus_context_local_rank(const chorus_context* context, int* local_rank) {
  return c_api::query(context, local_rank, "chorus_context_local_rank", "local_rank",
                      [](const Context& c) { return c.local_rank(); });
}

chorus_status chorus_context_local_size(const chorus_context* context, int* local_size) {
  return c_api::query(context, local_size, "chorus_context_local_size", "local_size",
                      [](const Context& c) { return c.local_size(); });
}

chorus_status chorus_context_link_to(const chorus_context* context, int peer, char* transport, size_t capacity,
                                     int* streams) {
  return guarded([&] {
    constexpr const char* function = "chorus_context_link_to";
    const Context& c = context_of(context, function);
    char* name = &output(transport, &c, function, "transport");
    const PeerLink link = c.link_to(peer);
    if (link.transport.size() + 1 > capacity)
      throw InvalidArgument(cat("rank ", c.rank(), ": ", function, ": the transport name '", link.transport,
                                "' needs ", link.transport.size() + 1, " bytes but transport holds ", capacity));
    link.transport.copy(name, link.transport.size());
    name[link.transport.size()] = '\0';
    if (streams != nullptr) *streams = link.streams;
  });
}

chorus_status chorus_context_timeout(const chorus_context* context, int64_t* timeout_ms) {
  return c_api::query(context, timeout_ms, "chorus_context_timeout", "timeout_ms",
                      [](const Context& c) { return static_cast<int64_t>(c.timeout().count()); });
}

chorus_status chorus_context_set_timeout(chorus_context* context, int64_t timeout_ms) {
  return guarded([&] {
    Context& c = context_of(context, "chorus_context_set_timeout");
    if (timeout_ms <= 0 || timeout_ms > c_api::longest_timeout_ms)
      throw InvalidArgument(cat("rank ", c.rank(), ": chorus_context_set_timeout: timeout_ms ", timeout_ms,
                                " is not a positive timeout up to a year"));
    c.set_timeout(std::chrono::milliseconds(timeout_ms));
  });
}

chorus_status chorus_context_statistics(const chorus_context* context, chorus_statistics* statistics) {
  return guarded([&] {
    const Context& c = context_of(context, "chorus_context_statistics");
    chorus_statistics& out = c_api::output(statistics, &c, "chorus_context_statistics", "chorus_statistics");
    const size_t size = out.struct_size;
    if (size < offsetof(chorus_statistics, collectives) + sizeof(uint64_t) || size > 4096)
      throw InvalidArgument(cat("rank ", c.rank(), ": chorus_context_statistics: struct_size is ", size,
                                ", not the size of any version of chorus_statistics (", sizeof(chorus_statistics),
                                " here); set it with chorus_statistics_init"));
    const ContextStatistics counted = c.statistics();
    chorus_statistics filled;
    filled.struct_size = size;
    filled.collectives = counted.collectives;
    filled.failed_collectives = counted.failed_collectives;
    filled.messages_sent = counted.messages_sent;
    filled.messages_received = counted.messages_received;
    filled.bytes_sent = counted.bytes_sent;
    filled.bytes_received = counted.bytes_received;
    filled.time_in_collectives_ns = static_cast<uint64_t>(counted.time_in_collectives.count());
    filled.time_waiting_ns = static_cast<uint64_t>(counted.time_waiting.count());
    std::memcpy(statistics, &filled, std::min(size, sizeof(chorus_statistics)));
  });
}

chorus_status chorus_context_split(chorus_context* context, int color, int key, chorus_context** child) {
  return guarded([&] {
    const c_api::CollectiveCall call(context, "chorus_context_split", "split", nullptr);
    if (child == nullptr) call.reject("got a null chorus_context** (where the child context goes)");
    chorus_context*& result = *child;
    result = nullptr;
    auto handle = std::make_unique<chorus_context>();
    handle->context = call.context().split(color, key);
    if (handle->context != nullptr) result = handle.release();
  });
}

chorus_status chorus_context_shrink(const chorus_context* context, int64_t join_window_ms,
                                    chorus_context** survivors) {
  return guarded([&] {
    constexpr const char* function = "chorus_context_shrink";
    const Context& c = context_of(context, function);
    if (join_window_ms < 0 || join_window_ms > c_api::longest_timeout_ms)
      throw InvalidArgument(cat("rank ", c.rank(), ": ", function, ": join_window_ms ", join_window_ms,
                                " is not a time up to a year (0: the context's timeout)"));
    ShrinkOptions options;
    options.join_window = std::chrono::milliseconds(join_window_ms);
    c_api::create(survivors, function, [&] { return shrink(c, options); });
  });
}

chorus_status chorus_context_abort(chorus_context* context, const char* reason) {
  return guarded([&] {
    Context& c = context_of(context, "chorus_context_abort");
    if (reason != nullptr) c.abort(reason);
    else c.abort();
  });
}

chorus_status chorus_context_check(const chorus_context* context) {
  return guarded([&] { context_of(context, "chorus_context_check").throw_if_failed(); });
}

}  // extern "C"
