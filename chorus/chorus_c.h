/* The C API of libchorus: everything a framework needs (contexts, every
 * collective blocking and asynchronous, point-to-point, sub-groups, shrinking
 * after a dead rank) behind opaque handles, for C programs and for the
 * language bindings and framework ops that cannot take C++ types.
 *
 * Rules that hold for every function below (docs/c_api.md has the reasons):
 *
 * - Every function returns a chorus_status, except the few pure queries that
 *   cannot fail (chorus_version, chorus_last_error, chorus_last_error_peer,
 *   chorus_status_name). CHORUS_OK is 0.
 * - On failure, chorus_last_error() holds the full message of this thread's
 *   last failed call (it names the rank and, where there is one, the peer),
 *   and chorus_last_error_peer() the peer rank to blame, or -1. Calls that
 *   succeed leave both untouched, like errno.
 * - No C++ exception ever leaves a function; running out of memory is
 *   CHORUS_OUT_OF_MEMORY.
 * - Sizes and counts are size_t element counts. A count array (the v
 *   variants) has one entry per rank of the context. Times are int64_t
 *   milliseconds (microseconds where named _us), at most a year.
 * - Enumerations cross as int32_t, never as C enums (whose size is the
 *   compiler's choice); a value the library does not know is rejected with
 *   CHORUS_INVALID_ARGUMENT.
 * - A collective this rank rejects (bad argument, unknown type) also aborts
 *   the context, as in C++, so that the other ranks, already waiting inside
 *   the same collective, fail at once with this rank's reason instead of
 *   timing out. After any error the context is finished: every later call
 *   on it, and on every context split from it or it from, fails again.
 * - Options structs start with struct_size: set it with the *_init function
 *   of this header, so an older program keeps working with a newer library.
 */
#ifndef CHORUS_CHORUS_C_H
#define CHORUS_CHORUS_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version -------------------------------------------------------------
 * The version of this C interface (not of the library's release). A library
 * serves a program built against a header of the same major version and a
 * minor version no newer than its own: CHORUS_C_API_COMPATIBLE(chorus_version()). */
#define CHORUS_C_API_VERSION_MAJOR 1
#define CHORUS_C_API_VERSION_MINOR 2
#define CHORUS_C_API_VERSION_PATCH 0
#define CHORUS_MAKE_VERSION(major, minor, patch) \
  ((((uint32_t)(major)) << 16) | (((uint32_t)(minor)) << 8) | ((uint32_t)(patch)))
#define CHORUS_C_API_VERSION \
  CHORUS_MAKE_VERSION(CHORUS_C_API_VERSION_MAJOR, CHORUS_C_API_VERSION_MINOR, CHORUS_C_API_VERSION_PATCH)
#define CHORUS_VERSION_MAJOR_OF(version) ((int)(((uint32_t)(version)) >> 16))
#define CHORUS_VERSION_MINOR_OF(version) ((int)((((uint32_t)(version)) >> 8) & 0xffu))
#define CHORUS_VERSION_PATCH_OF(version) ((int)(((uint32_t)(version)) & 0xffu))
#define CHORUS_C_API_COMPATIBLE(library_version)                                \
  (CHORUS_VERSION_MAJOR_OF(library_version) == CHORUS_C_API_VERSION_MAJOR &&    \
   CHORUS_VERSION_MINOR_OF(library_version) >= CHORUS_C_API_VERSION_MINOR)

/* The C interface version the loaded library implements (CHORUS_MAKE_VERSION form). */
uint32_t chorus_version(void);

/* ---- status and errors -------------------------------------------------- */

typedef int32_t chorus_status;
enum {
  CHORUS_OK = 0,
  /* A bad argument: null handle or pointer, root or peer out of range, an
   * unknown type, op or option, buffers that overlap wrongly. */
  CHORUS_INVALID_ARGUMENT = 1,
  /* A connection failed (closed, reset, unreachable); the peer is named. */
  CHORUS_IO_ERROR = 2,
  /* A peer's process is gone (killed, crashed, exited without closing its
   * context): an I/O error of its own kind, so a caller can decide to shrink. */
  CHORUS_PEER_LOST = 3,
  /* A deadline passed; the message says what was being waited for. */
  CHORUS_TIMEOUT = 4,
  /* Ranks disagree on the collective, its count, type, op or root. */
  CHORUS_MISMATCH = 5,
  /* The context was aborted (chorus_context_abort here or on a peer). */
  CHORUS_ABORTED = 6,
  CHORUS_OUT_OF_MEMORY = 7,
  /* A chorus error of no more specific kind. */
  CHORUS_ERROR = 8,
  /* A failure inside the library that is none of the above (a bug: please report it). */
  CHORUS_INTERNAL_ERROR = 9,
  /* Not an error: chorus_work_wait's timeout passed before the work finished. */
  CHORUS_IN_PROGRESS = 10
};

/* This thread's last failure: the full message, or "" if none yet. Valid
 * until this thread's next failing call. */
const char* chorus_last_error(void);
/* The peer rank this thread's last failure blames (a lost or failed
 * connection), or -1 when no single peer is to blame. */
int chorus_last_error_peer(void);
/* "CHORUS_TIMEOUT" for CHORUS_TIMEOUT, ...; "CHORUS_UNKNOWN_STATUS" otherwise. */
const char* chorus_status_name(chorus_status status);

/* ---- element types, reductions, memory ---------------------------------- */

typedef int32_t chorus_datatype;
enum {
  CHORUS_INT8 = 0,
  CHORUS_UINT8 = 1,
  CHORUS_INT32 = 2,
  CHORUS_UINT32 = 3,
  CHORUS_INT64 = 4,
  CHORUS_UINT64 = 5,
  CHORUS_FLOAT16 = 6,  /* IEEE binary16, as uint16_t bits */
  CHORUS_BFLOAT16 = 7, /* bfloat16, as uint16_t bits */
  CHORUS_FLOAT32 = 8,
  CHORUS_FLOAT64 = 9
};

typedef int32_t chorus_reduce_op;
enum {
  CHORUS_SUM = 0,
  CHORUS_PROD = 1,
  CHORUS_MIN = 2,
  CHORUS_MAX = 3,
  CHORUS_AVG = 4,
  CHORUS_BAND = 5, /* bitwise and, or, xor: integer types only */
  CHORUS_BOR = 6,
  CHORUS_BXOR = 7
};

/* Bytes per element of `type`. */
chorus_status chorus_datatype_size(chorus_datatype type, size_t* size);

typedef int32_t chorus_memory_kind;
enum {
  CHORUS_MEMORY_HOST = 0,
  /* CUDA device memory (docs/cuda.md): moved over every transport, through
   * pinned host memory where a transport moves host memory only; in a build
   * or process without CUDA the call fails naming the reason. */
  CHORUS_MEMORY_CUDA = 1
};

/* ---- contexts ------------------------------------------------------------ */

/* One rank's membership in a group of ranks (chorus::Context). */
typedef struct chorus_context chorus_context;

/* chorus_connect_options.connections: when pairs of ranks connect. */
#define CHORUS_CONNECTIONS_FULL 1      /* every pair at connect */
#define CHORUS_CONNECTIONS_ON_DEMAND 2 /* each pair when a collective or message first needs it */

/* How to connect. Zero or null fields take the documented default; the
 * environment (CHORUS_TRANSPORT, CHORUS_SECRET, ...; README) fills what a
 * field leaves open. Fields are 8 bytes or paired so the struct has no padding. */
typedef struct chorus_connect_options {
  size_t struct_size;         /* sizeof(chorus_connect_options): chorus_connect_options_init sets it */
  int64_t timeout_ms;         /* every collective's default timeout, and connecting's; 0: CHORUS_TIMEOUT, else 30000 */
  const char* transports;     /* "shm,tcp" in order of preference; null: CHORUS_TRANSPORT, else all */
  const char* network_interface; /* interface whose address is published ("eth0"); null: CHORUS_SOCKET_IFNAME */
  const char* hostname;       /* or the address / host name to bind and publish */
  const char* host_id;        /* this rank's host identity; null: CHORUS_HOST_ID, else derived */
  const char* link_model;     /* as CHORUS_LINK_MODEL; null: that variable */
  const char* secret;         /* the job secret; null: CHORUS_SECRET / CHORUS_SECRET_FILE */
  int64_t poll_time_us;       /* polling before sleeping; negative: CHORUS_POLL_US, else 200 */
  int32_t streams;            /* TCP connections per peer, 1..16; 0: CHORUS_STREAMS, else 1 */
  int32_t connections;        /* CHORUS_CONNECTIONS_FULL or _ON_DEMAND (docs/connections.md); 0: CHORUS_CONNECTIONS, else
                                 automatic (full up to 64 ranks). Was `reserved` (must be 0) before: same layout. */
  /* Tracing (docs/trace.md): */
  const char* trace;          /* Chrome trace file of this rank's calls ("{rank}" for the rank); null: CHORUS_TRACE */
  int32_t trace_steps;        /* 1: the trace shows every step; 0: no; -1: CHORUS_TRACE_STEPS */
  int32_t reserved2;          /* must be 0 */
} chorus_connect_options;

/* Defaults for every field, and struct_size for this header's version. */
static inline void chorus_connect_options_init(chorus_connect_options* options) {
  options->struct_size = sizeof(chorus_connect_options);
  options->timeout_ms = 0;
  options->transports = NULL;
  options->network_interface = NULL;
  options->hostname = NULL;
  options->host_id = NULL;
  options->link_model = NULL;
  options->secret = NULL;
  options->poll_time_us = -1;
  options->streams = 0;
  options->connections = 0;
  options->trace = NULL;
  options->trace_steps = -1;
  options->reserved2 = 0;
}

/* Joins the job its launcher describes in the environment (CHORUS_RANK,
 * CHORUS_SIZE, CHORUS_STORE, CHORUS_JOB_ID, or torchrun's, Open MPI's, PMI's,
 * Slurm's variables: README). options may be null. A collective call over the
 * whole job: every rank must make it. */
chorus_status chorus_context_create_from_env(const chorus_connect_options* options, chorus_context** context);

/* Joins a job whose rendezvous the caller names: the store URL
 * (tcp://host:port, where rank 0 hosts the store unless a chorus-store serves
 * it; file:///shared/dir; redis://host:port[/db]), this rank, the job size and
 * a job id unique to this run (null or "" only with tcp://). Several contexts
 * of one job meet at one store under different job ids. */
chorus_status chorus_context_create(const char* store_url, const char* job_id, int rank, int size,
                                    const chorus_connect_options* options, chorus_context** context);

/* Releases the handle (null is fine). Asynchronous work still holding the
 * context keeps it alive until that work is freed. */
chorus_status chorus_context_destroy(chorus_context* context);

chorus_status chorus_context_rank(const chorus_context* context, int* rank);
chorus_status chorus_context_size(const chorus_context* context, int* size);
/* Topology: hosts are numbered in order of their lowest rank. */
chorus_status chorus_context_hosts(const chorus_context* context, int* hosts);
chorus_status chorus_context_host_of(const chorus_context* context, int rank, int* host);
/* This rank's index among the ranks of its host, and their number. */
chorus_status chorus_context_local_rank(const chorus_context* context, int* local_rank);
chorus_status chorus_context_local_size(const chorus_context* context, int* local_size);
/* The transport serving `peer` ("shm", "tcp") written into transport
 * (capacity bytes, NUL included; CHORUS_INVALID_ARGUMENT if it does not
 * fit), and its number of connections. streams may be null. */
chorus_status chorus_context_link_to(const chorus_context* context, int peer, char* transport, size_t capacity,
                                     int* streams);

/* The default timeout of the context's collectives. */
chorus_status chorus_context_timeout(const chorus_context* context, int64_t* timeout_ms);
chorus_status chorus_context_set_timeout(chorus_context* context, int64_t timeout_ms);

/* MPI_Comm_split: a collective call on `context`. Ranks passing the same
 * color form a child context ranked by (key, rank); a rank passing
 * CHORUS_NO_COLOR takes part and gets a null child. Children share the
 * parent's connections and outlive it if need be. */
#define CHORUS_NO_COLOR (-1)
chorus_status chorus_context_split(chorus_context* context, int color, int key, chorus_context** child);

/* After a rank died: the survivors call this together, agree through the
 * job's store on who is left, and get a new context ranked 0..n-1 in their
 * old order (chorus/shrink.h). join_window_ms: how long they wait for each
 * other at most; 0: the context's timeout. Not for contexts made by split. */
chorus_status chorus_context_shrink(const chorus_context* context, int64_t join_window_ms,
                                    chorus_context** survivors);

/* Makes every pending and later call on the context (and those sharing its
 * connections) fail with CHORUS_ABORTED and `reason` (null: a default).
 * Any thread. */
chorus_status chorus_context_abort(chorus_context* context, const char* reason);
/* CHORUS_OK while the context works; else the error that finished it. */
chorus_status chorus_context_check(const chorus_context* context);

/* What the context has done since it was made (a split child counts its own
 * calls). The caller sets struct_size (chorus_statistics_init); a library
 * that knows fewer fields leaves the rest as the caller set them. */
typedef struct chorus_statistics {
  size_t struct_size;
  uint64_t collectives;          /* finished, successfully or not */
  uint64_t failed_collectives;
  uint64_t messages_sent;        /* point-to-point, completed */
  uint64_t messages_received;
  uint64_t bytes_sent;           /* by this rank over every transport, collectives and messages */
  uint64_t bytes_received;
  uint64_t time_in_collectives_ns; /* from the start of each collective's run to its end */
  uint64_t time_waiting_ns;      /* callers blocked in blocking calls and chorus_work_wait */
} chorus_statistics;

static inline void chorus_statistics_init(chorus_statistics* statistics) {
  statistics->struct_size = sizeof(chorus_statistics);
  statistics->collectives = 0;
  statistics->failed_collectives = 0;
  statistics->messages_sent = 0;
  statistics->messages_received = 0;
  statistics->bytes_sent = 0;
  statistics->bytes_received = 0;
  statistics->time_in_collectives_ns = 0;
  statistics->time_waiting_ns = 0;
}

chorus_status chorus_context_statistics(const chorus_context* context, chorus_statistics* statistics);

/* ---- options of one call ------------------------------------------------- */

typedef struct chorus_collective_options {
  size_t struct_size;            /* sizeof(chorus_collective_options): chorus_collective_options_init sets it */
  const char* algorithm;         /* "ring", "binomial", ...; null or "auto": chosen by the cost model */
  int64_t timeout_ms;            /* 0: the context's timeout */
  chorus_memory_kind memory_kind; /* where the buffers live: CHORUS_MEMORY_HOST (default) or CUDA */
  int32_t device;                 /* the CUDA device of CHORUS_MEMORY_CUDA buffers; ignored for host */
  /* Since 0.1 (struct version 2): the caller's cudaStream_t for CUDA
   * buffers, null for the legacy default stream. The call reads its input
   * after the work queued there before it, and work queued there after it
   * runs after its result (async calls too). */
  void* cuda_stream;
} chorus_collective_options;

static inline void chorus_collective_options_init(chorus_collective_options* options) {
  options->struct_size = sizeof(chorus_collective_options);
  options->algorithm = NULL;
  options->timeout_ms = 0;
  options->memory_kind = CHORUS_MEMORY_HOST;
  options->device = 0;
  options->cuda_stream = NULL;
}

/* ---- asynchronous work ----------------------------------------------------
 * Every collective has an _async form that returns a chorus_work. Works on
 * one context finish in the order they were issued; their buffers must stay
 * valid until they finish. */
typedef struct chorus_work chorus_work;

/* Waits up to timeout_ms (negative: until it finishes, which the
 * collective's own timeout bounds) and returns the work's outcome, or
 * CHORUS_IN_PROGRESS if it is still running at the timeout. */
chorus_status chorus_work_wait(chorus_work* work, int64_t timeout_ms);
/* Never blocks: *done = 0 while running (CHORUS_OK); once finished, *done = 1
 * and the work's outcome is returned. */
chorus_status chorus_work_test(chorus_work* work, int* done);
/* Releases the handle (null is fine); an unfinished work is waited for
 * first, so its buffers are free once this returns. Its outcome is not
 * reported here (the context keeps any error). */
chorus_status chorus_work_free(chorus_work* work);
/* Never blocks: the sender's rank of a finished chorus_recv_any_async; -1
 * while it runs, after it failed, and for every other work. */
chorus_status chorus_work_source(chorus_work* work, int* source);

/* ---- registered buffers (since 1.2) -----------------------------------------
 * A host buffer the caller reuses call after call, registered so that verbs
 * devices without on-demand paging pin it once, on its first message, and
 * keep the pin, instead of pinning and unpinning it for every message
 * (chorus/registered_buffer.h has the whole contract). Per process, for
 * every context. The memory must stay allocated until the registration is
 * freed, and no collective may be using it then. The same buffer may be
 * registered again (each handle counts); a range overlapping a registered
 * one without being it is CHORUS_INVALID_ARGUMENT. */
typedef struct chorus_registered_buffer chorus_registered_buffer;

chorus_status chorus_register_buffer(const void* data, size_t bytes, chorus_registered_buffer** registration);
/* Unpins the buffer on every device before it returns; null is fine. */
chorus_status chorus_registered_buffer_free(chorus_registered_buffer* registration);

/* ---- collectives ----------------------------------------------------------
 * Every rank of the context calls the same collective with the same count,
 * type, op and root, in the same order. options may be null. `count` is the
 * whole buffer for allreduce, broadcast and reduce, and one rank's block for
 * the others (the large side holds size blocks in rank order). In place:
 * input == output for allreduce and reduce (on root); for the block
 * collectives, the small buffer is this rank's block inside the large one. */

chorus_status chorus_allreduce(chorus_context* context, const void* input, void* output, size_t count,
                               chorus_datatype type, chorus_reduce_op op, const chorus_collective_options* options);
chorus_status chorus_allreduce_async(chorus_context* context, const void* input, void* output, size_t count,
                                     chorus_datatype type, chorus_reduce_op op,
                                     const chorus_collective_options* options, chorus_work** work);

/* Root's data is sent; every other rank's is overwritten. */
chorus_status chorus_broadcast(chorus_context* context, void* data, size_t count, chorus_datatype type, int root,
                               const chorus_collective_options* options);
chorus_status chorus_broadcast_async(chorus_context* context, void* data, size_t count, chorus_datatype type,
                                     int root, const chorus_collective_options* options, chorus_work** work);

/* Root's output receives op over every rank's input; output is used on root
 * only (other ranks may pass null). */
chorus_status chorus_reduce(chorus_context* context, const void* input, void* output, size_t count,
                            chorus_datatype type, chorus_reduce_op op, int root,
                            const chorus_collective_options* options);
chorus_status chorus_reduce_async(chorus_context* context, const void* input, void* output, size_t count,
                                  chorus_datatype type, chorus_reduce_op op, int root,
                                  const chorus_collective_options* options, chorus_work** work);

/* input: size blocks of count; output (count) receives op over every rank's
 * block number rank. */
chorus_status chorus_reduce_scatter(chorus_context* context, const void* input, void* output, size_t count,
                                    chorus_datatype type, chorus_reduce_op op,
                                    const chorus_collective_options* options);
chorus_status chorus_reduce_scatter_async(chorus_context* context, const void* input, void* output, size_t count,
                                          chorus_datatype type, chorus_reduce_op op,
                                          const chorus_collective_options* options, chorus_work** work);
/* Block r of input has counts[r] elements; output has counts[rank]. */
chorus_status chorus_reduce_scatter_v(chorus_context* context, const void* input, void* output, const size_t* counts,
                                      chorus_datatype type, chorus_reduce_op op,
                                      const chorus_collective_options* options);
chorus_status chorus_reduce_scatter_v_async(chorus_context* context, const void* input, void* output,
                                            const size_t* counts, chorus_datatype type, chorus_reduce_op op,
                                            const chorus_collective_options* options, chorus_work** work);

/* Every rank's input (count) lands in block r of every output. */
chorus_status chorus_allgather(chorus_context* context, const void* input, void* output, size_t count,
                               chorus_datatype type, const chorus_collective_options* options);
chorus_status chorus_allgather_async(chorus_context* context, const void* input, void* output, size_t count,
                                     chorus_datatype type, const chorus_collective_options* options,
                                     chorus_work** work);
/* Rank r contributes counts[r] elements. */
chorus_status chorus_allgatherv(chorus_context* context, const void* input, void* output, const size_t* counts,
                                chorus_datatype type, const chorus_collective_options* options);
chorus_status chorus_allgatherv_async(chorus_context* context, const void* input, void* output, const size_t* counts,
                                      chorus_datatype type, const chorus_collective_options* options,
                                      chorus_work** work);

/* Root's output receives every rank's input in rank order; output is used
 * on root only. */
chorus_status chorus_gather(chorus_context* context, const void* input, void* output, size_t count,
                            chorus_datatype type, int root, const chorus_collective_options* options);
chorus_status chorus_gather_async(chorus_context* context, const void* input, void* output, size_t count,
                                  chorus_datatype type, int root, const chorus_collective_options* options,
                                  chorus_work** work);
chorus_status chorus_gatherv(chorus_context* context, const void* input, void* output, const size_t* counts,
                             chorus_datatype type, int root, const chorus_collective_options* options);
chorus_status chorus_gatherv_async(chorus_context* context, const void* input, void* output, const size_t* counts,
                                   chorus_datatype type, int root, const chorus_collective_options* options,
                                   chorus_work** work);

/* Block r of root's input goes to rank r's output; input is used on root only. */
chorus_status chorus_scatter(chorus_context* context, const void* input, void* output, size_t count,
                             chorus_datatype type, int root, const chorus_collective_options* options);
chorus_status chorus_scatter_async(chorus_context* context, const void* input, void* output, size_t count,
                                   chorus_datatype type, int root, const chorus_collective_options* options,
                                   chorus_work** work);
chorus_status chorus_scatterv(chorus_context* context, const void* input, void* output, const size_t* counts,
                              chorus_datatype type, int root, const chorus_collective_options* options);
chorus_status chorus_scatterv_async(chorus_context* context, const void* input, void* output, const size_t* counts,
                                    chorus_datatype type, int root, const chorus_collective_options* options,
                                    chorus_work** work);

/* Block p of this rank's input goes to block rank of peer p's output. Out of
 * place only. */
chorus_status chorus_alltoall(chorus_context* context, const void* input, void* output, size_t count,
                              chorus_datatype type, const chorus_collective_options* options);
chorus_status chorus_alltoall_async(chorus_context* context, const void* input, void* output, size_t count,
                                    chorus_datatype type, const chorus_collective_options* options,
                                    chorus_work** work);
/* send_counts[p] elements go to peer p, recv_counts[p] come from it
 * (recv_counts[p] here equals peer p's send_counts[rank]). */
chorus_status chorus_alltoallv(chorus_context* context, const void* input, const size_t* send_counts, void* output,
                               const size_t* recv_counts, chorus_datatype type,
                               const chorus_collective_options* options);
chorus_status chorus_alltoallv_async(chorus_context* context, const void* input, const size_t* send_counts,
                                     void* output, const size_t* recv_counts, chorus_datatype type,
                                     const chorus_collective_options* options, chorus_work** work);

/* ---- grouped collectives --------------------------------------------------
 * `members` buffers of one type as ONE collective: packed end to end, one
 * collective over them, unpacked. Member i is inputs[i], outputs[i] and
 * counts[i], its count meaning what it means for the plain call (the whole
 * buffer for allreduce; one rank's block for allgather and reduce_scatter),
 * in place as for the plain call. Every rank passes the same counts in the
 * same order; ranks whose groups differ (even with equal totals) all get
 * CHORUS_MISMATCH and no member's output is written. Members of count 0 may
 * have null buffers; the arrays may be null when members is 0. Outputs of
 * different members must not overlap. The arrays are read during the call
 * only; an async call's buffers must stay valid until its work finishes. */
chorus_status chorus_grouped_allreduce(chorus_context* context, const void* const* inputs, void* const* outputs,
                                       const size_t* counts, size_t members, chorus_datatype type,
                                       chorus_reduce_op op, const chorus_collective_options* options);
chorus_status chorus_grouped_allreduce_async(chorus_context* context, const void* const* inputs,
                                             void* const* outputs, const size_t* counts, size_t members,
                                             chorus_datatype type, chorus_reduce_op op,
                                             const chorus_collective_options* options, chorus_work** work);
/* Block r of outputs[i] (size * counts[i] elements) is rank r's inputs[i]. */
chorus_status chorus_grouped_allgather(chorus_context* context, const void* const* inputs, void* const* outputs,
                                       const size_t* counts, size_t members, chorus_datatype type,
                                       const chorus_collective_options* options);
chorus_status chorus_grouped_allgather_async(chorus_context* context, const void* const* inputs,
                                             void* const* outputs, const size_t* counts, size_t members,
                                             chorus_datatype type, const chorus_collective_options* options,
                                             chorus_work** work);
/* inputs[i] holds size blocks of counts[i]; outputs[i] receives op over
 * every rank's block number rank. */
chorus_status chorus_grouped_reduce_scatter(chorus_context* context, const void* const* inputs,
                                            void* const* outputs, const size_t* counts, size_t members,
                                            chorus_datatype type, chorus_reduce_op op,
                                            const chorus_collective_options* options);
chorus_status chorus_grouped_reduce_scatter_async(chorus_context* context, const void* const* inputs,
                                                  void* const* outputs, const size_t* counts, size_t members,
                                                  chorus_datatype type, chorus_reduce_op op,
                                                  const chorus_collective_options* options, chorus_work** work);

chorus_status chorus_barrier(chorus_context* context, const chorus_collective_options* options);
chorus_status chorus_barrier_async(chorus_context* context, const chorus_collective_options* options,
                                   chorus_work** work);

/* ---- point-to-point --------------------------------------------------------
 * Between two ranks only, not numbered like collectives. Between one pair,
 * messages with the same tag match in the order sent. Both sides agree on
 * count and type (else CHORUS_MISMATCH). send finishes once the transport
 * holds the data; recv once it landed. options->algorithm is ignored. */
chorus_status chorus_send(chorus_context* context, const void* data, size_t count, chorus_datatype type, int peer,
                          uint32_t tag, const chorus_collective_options* options);
chorus_status chorus_send_async(chorus_context* context, const void* data, size_t count, chorus_datatype type,
                                int peer, uint32_t tag, const chorus_collective_options* options,
                                chorus_work** work);
chorus_status chorus_recv(chorus_context* context, void* data, size_t count, chorus_datatype type, int peer,
                          uint32_t tag, const chorus_collective_options* options);
chorus_status chorus_recv_async(chorus_context* context, void* data, size_t count, chorus_datatype type, int peer,
                                uint32_t tag, const chorus_collective_options* options, chorus_work** work);
/* Receives the first message with `tag` from any other rank (MPI_ANY_SOURCE);
 * *source (may be null) gets the sender's rank. Exactly one message is taken;
 * the others stay for later receives. Host memory only. The async form's
 * sender comes from chorus_work_source once the work finished. */
chorus_status chorus_recv_any(chorus_context* context, void* data, size_t count, chorus_datatype type, uint32_t tag,
                              const chorus_collective_options* options, int* source);
chorus_status chorus_recv_any_async(chorus_context* context, void* data, size_t count, chorus_datatype type,
                                    uint32_t tag, const chorus_collective_options* options, chorus_work** work);

#ifdef __cplusplus
}
#endif

#endif /* CHORUS_CHORUS_C_H */
