/* A plain C program on the C API (chorus/chorus_c.h), run as a real job
 * under chorus-run (4 ranks in the tests; 3 to 10 work): every collective
 * blocking and asynchronous, point-to-point, split and the context queries,
 * each result checked bit-exactly; then the error cases (bad arguments, a count that
 * differs across ranks, abort, a rank that dies and the survivors' shrink),
 * checking the status codes and that every message names the rank.
 *
 * Built twice: by Meson against the build tree, and by scripts/test.sh
 * against the installed library through pkg-config. It exits non-zero on
 * the first wrong result, naming it. */
#define _POSIX_C_SOURCE 200809L

#include <chorus/chorus_c.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int my_rank = -1;
static int job_size = 0;
static unsigned long checks = 0;

static void fail(int line, const char* format, ...) {
  va_list arguments;
  fprintf(stderr, "c_program: rank %d: line %d: ", my_rank, line);
  va_start(arguments, format);
  vfprintf(stderr, format, arguments);
  va_end(arguments);
  fprintf(stderr, "\n");
  exit(1);
}

static void check_ok(chorus_status status, const char* call, int line) {
  if (status != CHORUS_OK)
    fail(line, "%s returned %s: %s", call, chorus_status_name(status), chorus_last_error());
  ++checks;
}
#define CHECK_OK(call) check_ok((call), #call, __LINE__)

#define CHECK(condition)                                      \
  do {                                                        \
    if (!(condition)) fail(__LINE__, "failed: %s", #condition); \
    ++checks;                                                 \
  } while (0)

/* The call must fail with `expected`, and the message hold every word of
 * `parts` (a null-terminated list). */
static void check_fails(chorus_status status, chorus_status expected, const char* call, int line, ...) {
  const char* message = chorus_last_error();
  va_list parts;
  const char* part;
  if (status != expected)
    fail(line, "%s returned %s, expected %s: %s", call, chorus_status_name(status), chorus_status_name(expected),
         status == CHORUS_OK ? "" : message);
  va_start(parts, line);
  while ((part = va_arg(parts, const char*)) != NULL)
    if (strstr(message, part) == NULL) fail(line, "%s: the message lacks '%s': %s", call, part, message);
  va_end(parts);
  ++checks;
}
#define CHECK_FAILS(call, expected, ...) \
  check_fails((call), (expected), #call, __LINE__, __VA_ARGS__, (const char*)NULL)

/* "rank 2" for this rank, for messages. */
static char rank_words[32];

/* ---- element values -------------------------------------------------------
 * Small integers, exact in every type (float16 and bfloat16 too), so sums
 * compare bit for bit: over 10 ranks at most 95, which even int8 holds. */

static long value(int rank, size_t i) { return (long)(rank + 1) + (long)(i % 5); }

/* IEEE binary16 bits of a small integer (|v| <= 2048), and back. */
static uint16_t half_of(long v) {
  uint16_t sign = 0;
  int exponent = 0;
  if (v == 0) return 0;
  if (v < 0) {
    sign = 0x8000;
    v = -v;
  }
  while ((1L << (exponent + 1)) <= v) ++exponent;
  return (uint16_t)(sign | ((exponent + 15) << 10) | (((unsigned long)v << (10 - exponent)) & 0x3ff));
}

static long long_of_half(uint16_t bits) {
  const int exponent = ((bits >> 10) & 0x1f) - 15;
  const long magnitude = (bits & 0x7fff) == 0 ? 0 : (long)((bits & 0x3ff) | 0x400) >> (10 - exponent);
  return (bits & 0x8000) ? -magnitude : magnitude;
}

/* bfloat16 is the top half of a float32: exact for integers up to 256. */
static uint16_t bfloat_of(long v) {
  const float f = (float)v;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return (uint16_t)(bits >> 16);
}

static long long_of_bfloat(uint16_t half) {
  const uint32_t bits = (uint32_t)half << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return (long)f;
}

static void put(chorus_datatype type, void* buffer, size_t i, long v) {
  switch (type) {
    case CHORUS_INT8: ((int8_t*)buffer)[i] = (int8_t)v; break;
    case CHORUS_UINT8: ((uint8_t*)buffer)[i] = (uint8_t)v; break;
    case CHORUS_INT32: ((int32_t*)buffer)[i] = (int32_t)v; break;
    case CHORUS_UINT32: ((uint32_t*)buffer)[i] = (uint32_t)v; break;
    case CHORUS_INT64: ((int64_t*)buffer)[i] = (int64_t)v; break;
    case CHORUS_UINT64: ((uint64_t*)buffer)[i] = (uint64_t)v; break;
    case CHORUS_FLOAT16: ((uint16_t*)buffer)[i] = half_of(v); break;
    case CHORUS_BFLOAT16: ((uint16_t*)buffer)[i] = bfloat_of(v); break;
    case CHORUS_FLOAT32: ((float*)buffer)[i] = (float)v; break;
    case CHORUS_FLOAT64: ((double*)buffer)[i] = (double)v; break;
    default: fail(__LINE__, "put: type %d", (int)type);
  }
}

static long get(chorus_datatype type, const void* buffer, size_t i) {
  switch (type) {
    case CHORUS_INT8: return ((const int8_t*)buffer)[i];
    case CHORUS_UINT8: return ((const uint8_t*)buffer)[i];
    case CHORUS_INT32: return ((const int32_t*)buffer)[i];
    case CHORUS_UINT32: return (long)((const uint32_t*)buffer)[i];
    case CHORUS_INT64: return (long)((const int64_t*)buffer)[i];
    case CHORUS_UINT64: return (long)((const uint64_t*)buffer)[i];
    case CHORUS_FLOAT16: return long_of_half(((const uint16_t*)buffer)[i]);
    case CHORUS_BFLOAT16: return long_of_bfloat(((const uint16_t*)buffer)[i]);
    case CHORUS_FLOAT32: return (long)((const float*)buffer)[i];
    case CHORUS_FLOAT64: return (long)((const double*)buffer)[i];
    default: fail(__LINE__, "get: type %d", (int)type);
  }
  return 0;
}

static void* allocate(chorus_datatype type, size_t count) {
  size_t element = 0;
  void* buffer;
  CHECK_OK(chorus_datatype_size(type, &element));
  buffer = calloc(count == 0 ? 1 : count, element);
  if (buffer == NULL) fail(__LINE__, "out of memory");
  return buffer;
}

/* ---- finishing async work -------------------------------------------------
 * Rotates through the ways a caller may finish a work, so that each is
 * exercised on every collective over the blocking/async runs. */
static unsigned finish_style = 0;

static void finish(chorus_work* work, int line) {
  chorus_status status = CHORUS_OK;
  int done = 0;
  switch (finish_style++ % 3) {
    case 0: status = chorus_work_wait(work, -1); break;
    case 1:
      while (status == CHORUS_OK && !done) status = chorus_work_test(work, &done);
      break;
    default:
      do status = chorus_work_wait(work, 1); while (status == CHORUS_IN_PROGRESS);
  }
  if (status != CHORUS_OK) fail(line, "async work returned %s: %s", chorus_status_name(status), chorus_last_error());
  CHECK_OK(chorus_work_free(work));
}

/* Calls `name` blocking (async == 0) or its _async form; both take the same arguments. */
#define RUN(async, name, ...)                                    \
  do {                                                           \
    if (async) {                                                 \
      chorus_work* work_ = NULL;                                 \
      CHECK_OK(name##_async(__VA_ARGS__, &work_));               \
      finish(work_, __LINE__);                                   \
    } else {                                                     \
      CHECK_OK(name(__VA_ARGS__));                               \
    }                                                            \
  } while (0)

/* ---- the collectives ------------------------------------------------------ */

static const chorus_datatype every_type[] = {CHORUS_INT8,    CHORUS_UINT8,   CHORUS_INT32,   CHORUS_UINT32,
                                             CHORUS_INT64,   CHORUS_UINT64,  CHORUS_FLOAT16, CHORUS_BFLOAT16,
                                             CHORUS_FLOAT32, CHORUS_FLOAT64};
#define TYPES (sizeof every_type / sizeof every_type[0])

static void check_allreduce_every_type(chorus_context* context, int async) {
  const size_t count = 1000;
  size_t t, i;
  for (t = 0; t < TYPES; ++t) {
    const chorus_datatype type = every_type[t];
    void* input = allocate(type, count);
    void* output = allocate(type, count);
    for (i = 0; i < count; ++i) put(type, input, i, value(my_rank, i));
    RUN(async, chorus_allreduce, context, input, output, count, type, CHORUS_SUM, NULL);
    for (i = 0; i < count; ++i) {
      long expected = 0;
      int r;
      for (r = 0; r < job_size; ++r) expected += value(r, i);
      if (get(type, output, i) != expected)
        fail(__LINE__, "allreduce sum of type %d, element %zu: %ld, expected %ld", (int)type, i,
             get(type, output, i), expected);
    }
    /* In place, too. */
    RUN(async, chorus_allreduce, context, input, input, count, type, CHORUS_MAX, NULL);
    for (i = 0; i < count; ++i)
      if (get(type, input, i) != value(job_size - 1, i)) fail(__LINE__, "in-place allreduce max, type %d", (int)type);
    free(input);
    free(output);
  }
  checks += TYPES;
}

static void check_allreduce_every_op(chorus_context* context, int async) {
  enum { count = 77 };
  int32_t input[count], output[count];
  uint64_t bits[count], bits_out[count];
  float floats[count], floats_out[count];
  size_t i;
  int r;
  const chorus_reduce_op arithmetic[] = {CHORUS_SUM, CHORUS_PROD, CHORUS_MIN, CHORUS_MAX};
  const chorus_reduce_op bitwise[] = {CHORUS_BAND, CHORUS_BOR, CHORUS_BXOR};
  size_t o;
  for (o = 0; o < 4; ++o) {
    /* 1 to 4: their product over 10 ranks still fits in int32. */
    for (i = 0; i < count; ++i) input[i] = (int32_t)(my_rank % 3 + 1) + (int32_t)(i % 2);
    RUN(async, chorus_allreduce, context, input, output, count, CHORUS_INT32, arithmetic[o], NULL);
    for (i = 0; i < count; ++i) {
      int32_t expected = arithmetic[o] == CHORUS_PROD ? 1 : arithmetic[o] == CHORUS_MIN ? INT32_MAX : 0;
      for (r = 0; r < job_size; ++r) {
        const int32_t v = (int32_t)(r % 3 + 1) + (int32_t)(i % 2);
        if (arithmetic[o] == CHORUS_SUM) expected += v;
        if (arithmetic[o] == CHORUS_PROD) expected *= v;
        if (arithmetic[o] == CHORUS_MIN && v < expected) expected = v;
        if (arithmetic[o] == CHORUS_MAX && v > expected) expected = v;
      }
      if (output[i] != expected) fail(__LINE__, "allreduce op %d element %zu: %d, expected %d", (int)arithmetic[o], i,
                                      output[i], expected);
    }
  }
  for (o = 0; o < 3; ++o) {
    for (i = 0; i < count; ++i) bits[i] = ((uint64_t)1 << (my_rank + i % 7)) | ((uint64_t)1 << 40);
    RUN(async, chorus_allreduce, context, bits, bits_out, count, CHORUS_UINT64, bitwise[o], NULL);
    for (i = 0; i < count; ++i) {
      uint64_t expected = bitwise[o] == CHORUS_BAND ? ~(uint64_t)0 : 0;
      for (r = 0; r < job_size; ++r) {
        const uint64_t v = ((uint64_t)1 << (r + i % 7)) | ((uint64_t)1 << 40);
        if (bitwise[o] == CHORUS_BAND) expected &= v;
        if (bitwise[o] == CHORUS_BOR) expected |= v;
        if (bitwise[o] == CHORUS_BXOR) expected ^= v;
      }
      if (bits_out[i] != expected) fail(__LINE__, "allreduce bitwise op %d element %zu", (int)bitwise[o], i);
    }
  }
  /* avg: rank r gives (i % 5) + r, so the mean is (i % 5) + (size - 1) / 2, exact in binary for 4 ranks. */
  for (i = 0; i < count; ++i) floats[i] = (float)(i % 5) + (float)my_rank;
  RUN(async, chorus_allreduce, context, floats, floats_out, count, CHORUS_FLOAT32, CHORUS_AVG, NULL);
  for (i = 0; i < count; ++i) {
    float sum = 0;
    for (r = 0; r < job_size; ++r) sum += (float)(i % 5) + (float)r;
    if (floats_out[i] != sum / (float)job_size) fail(__LINE__, "allreduce avg element %zu: %g", i, floats_out[i]);
  }
  checks += 8;
}

static void check_rooted(chorus_context* context, int async) {
  enum { count = 37 };
  const size_t n = (size_t)job_size;
  int32_t data[count];
  float input[count], reduced[count];
  int64_t block[count], *gathered = calloc(n * count, sizeof(int64_t));
  double scattered[count], *whole = calloc(n * count, sizeof(double));
  size_t i, r;
  const int broadcast_root = job_size - 1, reduce_root = 1 % job_size, gather_root = 2 % job_size;
  const int scatter_root = 1 % job_size;
  if (gathered == NULL || whole == NULL) fail(__LINE__, "out of memory");

  for (i = 0; i < count; ++i) data[i] = my_rank == broadcast_root ? (int32_t)(1000 + i) : -1;
  RUN(async, chorus_broadcast, context, data, count, CHORUS_INT32, broadcast_root, NULL);
  for (i = 0; i < count; ++i) CHECK(data[i] == (int32_t)(1000 + i));

  for (i = 0; i < count; ++i) input[i] = (float)value(my_rank, i);
  memset(reduced, 0, sizeof reduced);
  /* Only root's output is used: the others pass null. */
  RUN(async, chorus_reduce, context, input, my_rank == reduce_root ? reduced : NULL, count, CHORUS_FLOAT32, CHORUS_SUM,
      reduce_root, NULL);
  if (my_rank == reduce_root)
    for (i = 0; i < count; ++i) {
      long expected = 0;
      for (r = 0; r < n; ++r) expected += value((int)r, i);
      CHECK(reduced[i] == (float)expected);
    }

  for (i = 0; i < count; ++i) block[i] = (int64_t)my_rank * 100000 + (int64_t)i;
  RUN(async, chorus_gather, context, block, my_rank == gather_root ? gathered : NULL, count, CHORUS_INT64, gather_root,
      NULL);
  if (my_rank == gather_root)
    for (r = 0; r < n; ++r)
      for (i = 0; i < count; ++i) CHECK(gathered[r * count + i] == (int64_t)r * 100000 + (int64_t)i);

  if (my_rank == scatter_root)
    for (r = 0; r < n; ++r)
      for (i = 0; i < count; ++i) whole[r * count + i] = (double)(r * 1000 + i);
  RUN(async, chorus_scatter, context, my_rank == scatter_root ? whole : NULL, scattered, count, CHORUS_FLOAT64,
      scatter_root, NULL);
  for (i = 0; i < count; ++i) CHECK(scattered[i] == (double)((size_t)my_rank * 1000 + i));
  free(gathered);
  free(whole);
}

/* The v variants: rank r's block has r * 2 + (r == 1 ? 0 : 1) elements (rank 1's is empty). */
static size_t v_count(size_t r) { return r == 1 ? 0 : r * 2 + 1; }

static void check_blocks(chorus_context* context, int async) {
  enum { count = 19 };
  const size_t n = (size_t)job_size;
  size_t counts[64], offsets[64], total = 0;
  int32_t mine[count], *all = calloc(n * count, sizeof(int32_t)), *vall, *vmine;
  float *sums_in = calloc(n * count, sizeof(float)), sums_out[count];
  size_t i, r;
  const int v_root = job_size - 1;
  if (all == NULL || sums_in == NULL || n > 64) fail(__LINE__, "out of memory or too many ranks");
  for (r = 0; r < n; ++r) {
    counts[r] = v_count(r);
    offsets[r] = total;
    total += counts[r];
  }
  vall = calloc(total, sizeof(int32_t));
  vmine = calloc(counts[my_rank] + 1, sizeof(int32_t));
  if (vall == NULL || vmine == NULL) fail(__LINE__, "out of memory");

  for (i = 0; i < count; ++i) mine[i] = my_rank * 100 + (int32_t)i;
  RUN(async, chorus_allgather, context, mine, all, count, CHORUS_INT32, NULL);
  for (r = 0; r < n; ++r)
    for (i = 0; i < count; ++i) CHECK(all[r * count + i] == (int32_t)(r * 100 + i));

  for (i = 0; i < counts[my_rank]; ++i) vmine[i] = my_rank * 100 + (int32_t)i;
  RUN(async, chorus_allgatherv, context, vmine, vall, counts, CHORUS_INT32, NULL);
  for (r = 0; r < n; ++r)
    for (i = 0; i < counts[r]; ++i) CHECK(vall[offsets[r] + i] == (int32_t)(r * 100 + i));

  memset(vall, 0, total * sizeof(int32_t));
  RUN(async, chorus_gatherv, context, vmine, my_rank == v_root ? vall : NULL, counts, CHORUS_INT32, v_root, NULL);
  if (my_rank == v_root)
    for (r = 0; r < n; ++r)
      for (i = 0; i < counts[r]; ++i) CHECK(vall[offsets[r] + i] == (int32_t)(r * 100 + i));

  if (my_rank == 0)
    for (r = 0; r < n; ++r)
      for (i = 0; i < counts[r]; ++i) vall[offsets[r] + i] = (int32_t)(r * 7 + i);
  memset(vmine, 0, (counts[my_rank] + 1) * sizeof(int32_t));
  RUN(async, chorus_scatterv, context, my_rank == 0 ? vall : NULL, vmine, counts, CHORUS_INT32, 0, NULL);
  for (i = 0; i < counts[my_rank]; ++i) CHECK(vmine[i] == (int32_t)((size_t)my_rank * 7 + i));

  /* reduce_scatter: block b of rank r's input holds value(r, i) + b. */
  for (r = 0; r < n; ++r)
    for (i = 0; i < count; ++i) sums_in[r * count + i] = (float)(value(my_rank, i) + (long)r);
  RUN(async, chorus_reduce_scatter, context, sums_in, sums_out, count, CHORUS_FLOAT32, CHORUS_SUM, NULL);
  for (i = 0; i < count; ++i) {
    long expected = 0;
    for (r = 0; r < n; ++r) expected += value((int)r, i) + my_rank;
    CHECK(sums_out[i] == (float)expected);
  }

  {
    float* vin = calloc(total + 1, sizeof(float));
    float* vout = calloc(counts[my_rank] + 1, sizeof(float));
    if (vin == NULL || vout == NULL) fail(__LINE__, "out of memory");
    for (r = 0; r < n; ++r)
      for (i = 0; i < counts[r]; ++i) vin[offsets[r] + i] = (float)(my_rank + 1) * (float)(i + 1);
    RUN(async, chorus_reduce_scatter_v, context, vin, vout, counts, CHORUS_FLOAT32, CHORUS_SUM, NULL);
    for (i = 0; i < counts[my_rank]; ++i) CHECK(vout[i] == (float)(n * (n + 1) / 2) * (float)(i + 1));
    free(vin);
    free(vout);
  }
  free(all);
  free(vall);
  free(vmine);
  free(sums_in);
}

static void check_alltoall(chorus_context* context, int async) {
  enum { count = 5 };
  const size_t n = (size_t)job_size;
  int32_t *input = calloc(n * count, sizeof(int32_t)), *output = calloc(n * count, sizeof(int32_t));
  size_t send_counts[64], recv_counts[64], send_total = 0, recv_total = 0, offset;
  int32_t *vin, *vout;
  size_t p, j;
  if (input == NULL || output == NULL || n > 64) fail(__LINE__, "out of memory or too many ranks");
  for (p = 0; p < n; ++p)
    for (j = 0; j < count; ++j) input[p * count + j] = (int32_t)((size_t)my_rank * 100 + p * 10 + j);
  RUN(async, chorus_alltoall, context, input, output, count, CHORUS_INT32, NULL);
  for (p = 0; p < n; ++p)
    for (j = 0; j < count; ++j) CHECK(output[p * count + j] == (int32_t)(p * 100 + (size_t)my_rank * 10 + j));

  /* Rank r sends (r + p) % 3 + 1 elements to p, so it receives (p + r) % 3 + 1 from p. */
  for (p = 0; p < n; ++p) {
    send_counts[p] = ((size_t)my_rank + p) % 3 + 1;
    recv_counts[p] = (p + (size_t)my_rank) % 3 + 1;
    send_total += send_counts[p];
    recv_total += recv_counts[p];
  }
  vin = calloc(send_total, sizeof(int32_t));
  vout = calloc(recv_total, sizeof(int32_t));
  if (vin == NULL || vout == NULL) fail(__LINE__, "out of memory");
  for (offset = 0, p = 0; p < n; offset += send_counts[p], ++p)
    for (j = 0; j < send_counts[p]; ++j) vin[offset + j] = (int32_t)((size_t)my_rank * 100 + p * 10 + j);
  RUN(async, chorus_alltoallv, context, vin, send_counts, vout, recv_counts, CHORUS_INT32, NULL);
  for (offset = 0, p = 0; p < n; offset += recv_counts[p], ++p)
    for (j = 0; j < recv_counts[p]; ++j) CHECK(vout[offset + j] == (int32_t)(p * 100 + (size_t)my_rank * 10 + j));
  free(input);
  free(output);
  free(vin);
  free(vout);
}

static void check_point_to_point(chorus_context* context, int async) {
  enum { count = 64 };
  double out[count], in[count];
  const int next = (my_rank + 1) % job_size, previous = (my_rank + job_size - 1) % job_size;
  size_t i;
  for (i = 0; i < count; ++i) out[i] = (double)(my_rank * 1000 + (int)i);
  /* A send finishes once the transport holds the data, so a ring of blocking sends cannot deadlock. */
  RUN(async, chorus_send, context, out, count, CHORUS_FLOAT64, next, 5u, NULL);
  RUN(async, chorus_recv, context, in, count, CHORUS_FLOAT64, previous, 5u, NULL);
  for (i = 0; i < count; ++i) CHECK(in[i] == (double)(previous * 1000 + (int)i));
  RUN(async, chorus_barrier, context, NULL);
}

/* Every other rank sends its rank to rank 0, which takes the messages from
 * any peer (blocking and async alternately) and must see each sender once. */
static void check_recv_any(chorus_context* context) {
  int32_t mine = my_rank, got = -1;
  int seen[64] = {0};
  int received, source;
  if (my_rank != 0) {
    CHECK_OK(chorus_send(context, &mine, 1, CHORUS_INT32, 0, 11u, NULL));
  } else {
    for (received = 0; received < job_size - 1; ++received) {
      source = -1;
      if (received % 2 == 0) {
        CHECK_OK(chorus_recv_any(context, &got, 1, CHORUS_INT32, 11u, NULL, &source));
      } else {
        chorus_work* work = NULL;
        CHECK_OK(chorus_recv_any_async(context, &got, 1, CHORUS_INT32, 11u, NULL, &work));
        CHECK_OK(chorus_work_wait(work, -1));
        CHECK_OK(chorus_work_source(work, &source));
        CHECK_OK(chorus_work_free(work));
      }
      CHECK(source > 0 && source < job_size && source < 64 && got == source);
      if (source > 0 && source < 64) ++seen[source];
    }
    for (source = 1; source < job_size && source < 64; ++source) CHECK(seen[source] == 1);
  }
  CHECK_OK(chorus_barrier(context, NULL));
}

/* Several async collectives in flight at once, waited for in reverse order. */
static void check_async_in_flight(chorus_context* context) {
  enum { count = 4096 };
  static float a[count], b[count];
  static int64_t c[count];
  chorus_work* works[4];
  chorus_collective_options options;
  int done = 0;
  size_t i;
  int w;
  chorus_collective_options_init(&options);
  options.algorithm = "ring";
  options.timeout_ms = 20000;
  for (i = 0; i < count; ++i) {
    a[i] = (float)value(my_rank, i);
    b[i] = 1.0f;
    c[i] = my_rank == 0 ? (int64_t)i : -1;
  }
  CHECK_OK(chorus_allreduce_async(context, a, a, count, CHORUS_FLOAT32, CHORUS_SUM, &options, &works[0]));
  CHECK_OK(chorus_broadcast_async(context, c, count, CHORUS_INT64, 0, NULL, &works[1]));
  CHECK_OK(chorus_allreduce_async(context, b, b, count, CHORUS_FLOAT32, CHORUS_SUM, NULL, &works[2]));
  CHECK_OK(chorus_barrier_async(context, NULL, &works[3]));
  for (w = 3; w >= 0; --w) {
    CHECK_OK(chorus_work_wait(works[w], -1));
    CHECK_OK(chorus_work_test(works[w], &done));
    CHECK(done == 1);
    CHECK_OK(chorus_work_free(works[w]));
  }
  for (i = 0; i < count; ++i) {
    long expected = 0;
    int r;
    for (r = 0; r < job_size; ++r) expected += value(r, i);
    CHECK(a[i] == (float)expected && b[i] == (float)job_size && c[i] == (int64_t)i);
  }
}

/* A bounded wait that runs out: rank 0's receive cannot finish before rank
 * 1 hears from it, so the wait must say CHORUS_IN_PROGRESS, then succeed. */
static void check_wait_timeout(chorus_context* context) {
  int32_t go = 1, answer = 0;
  if (my_rank == 0) {
    chorus_work* work = NULL;
    int done = 1;
    CHECK_OK(chorus_recv_async(context, &answer, 1, CHORUS_INT32, 1, 7u, NULL, &work));
    CHECK(chorus_work_wait(work, 20) == CHORUS_IN_PROGRESS);
    CHECK_OK(chorus_work_test(work, &done));
    CHECK(done == 0);
    CHECK_OK(chorus_send(context, &go, 1, CHORUS_INT32, 1, 8u, NULL));
    CHECK_OK(chorus_work_wait(work, 30000));
    CHECK(answer == 42);
    CHECK_OK(chorus_work_free(work));
  } else if (my_rank == 1) {
    CHECK_OK(chorus_recv(context, &go, 1, CHORUS_INT32, 0, 8u, NULL));
    answer = 42;
    CHECK_OK(chorus_send(context, &answer, 1, CHORUS_INT32, 0, 7u, NULL));
  }
}

static void check_queries(chorus_context* context) {
  int rank = -1, size = -1, hosts = -1, host = -1, local_rank = -1, local_size = -1, streams = 0;
  int64_t timeout = 0;
  char transport[16];
  size_t element = 0;
  CHECK_OK(chorus_context_rank(context, &rank));
  CHECK_OK(chorus_context_size(context, &size));
  if (getenv("CHORUS_RANK") != NULL && getenv("CHORUS_SIZE") != NULL)
    CHECK(rank == atoi(getenv("CHORUS_RANK")) && size == atoi(getenv("CHORUS_SIZE")));
  CHECK_OK(chorus_context_hosts(context, &hosts));
  CHECK_OK(chorus_context_host_of(context, size - 1, &host));
  CHECK_OK(chorus_context_local_rank(context, &local_rank));
  CHECK_OK(chorus_context_local_size(context, &local_size));
  /* chorus-run starts every rank on this host. */
  CHECK(hosts == 1 && host == 0 && local_rank == rank && local_size == size);
  CHECK_OK(chorus_context_link_to(context, (rank + 1) % size, transport, sizeof transport, &streams));
  CHECK((strcmp(transport, "shm") == 0 || strcmp(transport, "tcp") == 0) && streams >= 1);
  if (getenv("CHORUS_TRANSPORT") != NULL && strcmp(getenv("CHORUS_TRANSPORT"), "tcp") == 0)
    CHECK(strcmp(transport, "tcp") == 0);
  CHECK_FAILS(chorus_context_link_to(context, (rank + 1) % size, transport, 2, &streams), CHORUS_INVALID_ARGUMENT,
              rank_words, "bytes");
  CHECK_FAILS(chorus_context_link_to(context, rank, transport, sizeof transport, NULL), CHORUS_INVALID_ARGUMENT,
              rank_words);
  CHECK_FAILS(chorus_context_host_of(context, size, &host), CHORUS_INVALID_ARGUMENT, rank_words);
  CHECK_OK(chorus_context_timeout(context, &timeout));
  CHECK(timeout == 30000);
  CHECK_OK(chorus_context_set_timeout(context, 25000));
  CHECK_OK(chorus_context_timeout(context, &timeout));
  CHECK(timeout == 25000);
  CHECK_FAILS(chorus_context_set_timeout(context, 0), CHORUS_INVALID_ARGUMENT, rank_words, "timeout");
  CHECK_OK(chorus_datatype_size(CHORUS_BFLOAT16, &element));
  CHECK(element == 2);
  CHECK_OK(chorus_datatype_size(CHORUS_UINT64, &element));
  CHECK(element == 8);
  CHECK_FAILS(chorus_datatype_size(10, &element), CHORUS_INVALID_ARGUMENT, "invalid data type value 10");
  CHECK_OK(chorus_context_check(context));
}

/* A fresh child has run exactly the one allreduce above: its counters say so. */
static void check_child_statistics(chorus_context* child, int members) {
  chorus_statistics statistics;
  chorus_statistics old_layout;
  chorus_statistics_init(&statistics);
  CHECK_OK(chorus_context_statistics(child, &statistics));
  CHECK(statistics.collectives == 1 && statistics.failed_collectives == 0);
  CHECK(statistics.messages_sent == 0 && statistics.messages_received == 0);
  CHECK(members == 1 || (statistics.bytes_sent > 0 && statistics.bytes_received > 0));
  CHECK(statistics.time_in_collectives_ns > 0 && statistics.time_waiting_ns > 0);
  /* A program built when the struct ended earlier: the fields past its size stay as it set them. */
  chorus_statistics_init(&old_layout);
  old_layout.struct_size = offsetof(chorus_statistics, bytes_sent);
  old_layout.bytes_sent = 12345;
  CHECK_OK(chorus_context_statistics(child, &old_layout));
  CHECK(old_layout.collectives == 1 && old_layout.bytes_sent == 12345);
  statistics.struct_size = 3;
  CHECK_FAILS(chorus_context_statistics(child, &statistics), CHORUS_INVALID_ARGUMENT, "struct_size is 3");
  CHECK_FAILS(chorus_context_statistics(child, NULL), CHORUS_INVALID_ARGUMENT, "null");
}

static void check_split(chorus_context* context) {
  chorus_context* child = NULL;
  int child_rank = -1, child_size = -1, r, members = 0, position = 0;
  int32_t mine, sum = 0;
  /* Parity groups, ranked by a key that reverses the parent's order. */
  CHECK_OK(chorus_context_split(context, my_rank % 2, -my_rank, &child));
  CHECK(child != NULL);
  CHECK_OK(chorus_context_rank(child, &child_rank));
  CHECK_OK(chorus_context_size(child, &child_size));
  for (r = 0; r < job_size; ++r)
    if (r % 2 == my_rank % 2) {
      ++members;
      if (r > my_rank) ++position;
      sum += r;
    }
  CHECK(child_size == members && child_rank == position);
  mine = my_rank;
  CHECK_OK(chorus_allreduce(child, &mine, &mine, 1, CHORUS_INT32, CHORUS_SUM, NULL));
  CHECK(mine == sum);
  check_child_statistics(child, members);
  /* A rank taking part without a color gets no child. */
  CHECK_OK(chorus_context_destroy(child));
  child = (chorus_context*)&child;
  CHECK_OK(chorus_context_split(context, my_rank == 0 ? CHORUS_NO_COLOR : 0, 0, &child));
  if (my_rank == 0) {
    CHECK(child == NULL);
  } else {
    CHECK_OK(chorus_context_size(child, &child_size));
    CHECK(child_size == job_size - 1);
  }
  CHECK_OK(chorus_context_destroy(child));
}

/* ---- error cases ------------------------------------------------------------ */

/* A new context of the same ranks under its own job id, so each error case
 * starts on a context no earlier error finished. */
static chorus_context* fresh_context_connecting(const char* phase, int32_t connections) {
  char job_id[256];
  chorus_connect_options options;
  chorus_context* context = NULL;
  const char* store = getenv("CHORUS_STORE");
  const char* job = getenv("CHORUS_JOB_ID");
  snprintf(job_id, sizeof job_id, "%s/c-program/%s", job != NULL ? job : "none", phase);
  chorus_connect_options_init(&options);
  options.timeout_ms = 20000;
  options.connections = connections;
  CHECK_OK(chorus_context_create(store, job_id, my_rank, job_size, &options, &context));
  return context;
}

static chorus_context* fresh_context(const char* phase) { return fresh_context_connecting(phase, 0); }

/* Collectives and messages again, each pair connecting when first needed. */
static void check_on_demand(void) {
  chorus_context* context = fresh_context_connecting("on-demand", CHORUS_CONNECTIONS_ON_DEMAND);
  check_point_to_point(context, 1);
  check_allreduce_every_type(context, 0);
  check_rooted(context, 0);
  check_alltoall(context, 0);
  CHECK_OK(chorus_barrier(context, NULL));
  CHECK_OK(chorus_context_destroy(context));
}

/* Local argument errors: each fails on this rank with a message naming it,
 * before anything moves. */
static void check_bad_arguments(void) {
  chorus_context* context = fresh_context("bad-arguments");
  float data[8] = {0};
  float big[8 * 64] = {0};
  chorus_work* work = (chorus_work*)data;
  chorus_collective_options options;
  chorus_connect_options connect_options;
  chorus_context* none = (chorus_context*)data;
  int out = 0;

  CHECK_FAILS(chorus_broadcast(context, data, 8, CHORUS_FLOAT32, job_size, NULL), CHORUS_INVALID_ARGUMENT, rank_words,
              "root");
  CHECK_FAILS(chorus_reduce(context, data, big, 8, CHORUS_FLOAT32, CHORUS_SUM, -1, NULL), CHORUS_INVALID_ARGUMENT,
              rank_words, "root");
  CHECK_FAILS(chorus_allreduce(context, NULL, data, 8, CHORUS_FLOAT32, CHORUS_SUM, NULL), CHORUS_INVALID_ARGUMENT,
              rank_words, "null");
  CHECK_FAILS(chorus_allreduce(context, data, data, 8, 42, CHORUS_SUM, NULL), CHORUS_INVALID_ARGUMENT, rank_words,
              "unknown data type (42)");
  CHECK_FAILS(chorus_allreduce(context, data, data, 8, -1, CHORUS_SUM, NULL), CHORUS_INVALID_ARGUMENT, rank_words,
              "unknown data type -1");
  CHECK_FAILS(chorus_allreduce(context, data, data, 8, CHORUS_FLOAT32, 99, NULL), CHORUS_INVALID_ARGUMENT, rank_words,
              "unknown reduce op (99)");
  CHECK_FAILS(chorus_allreduce(context, data, data, 8, CHORUS_FLOAT32, CHORUS_BXOR, NULL), CHORUS_INVALID_ARGUMENT,
              rank_words, "bxor");
  CHECK_FAILS(chorus_allgatherv(context, data, big, NULL, CHORUS_FLOAT32, NULL), CHORUS_INVALID_ARGUMENT, rank_words,
              "counts");
  CHECK_FAILS(chorus_allreduce_async(context, data, data, 8, CHORUS_FLOAT32, CHORUS_SUM, NULL, NULL),
              CHORUS_INVALID_ARGUMENT, rank_words, "chorus_work");
  CHECK_FAILS(chorus_broadcast_async(context, data, 8, 77, 0, NULL, &work), CHORUS_INVALID_ARGUMENT, rank_words,
              "unknown data type (77)");
  CHECK(work == NULL); /* a failed async call leaves no stale handle behind */
  CHECK_FAILS(chorus_send(context, data, 8, CHORUS_FLOAT32, my_rank, 1u, NULL), CHORUS_INVALID_ARGUMENT, rank_words,
              "itself");
  CHECK_FAILS(chorus_recv(context, data, 8, CHORUS_FLOAT32, job_size, 1u, NULL), CHORUS_INVALID_ARGUMENT, rank_words,
              "out of range");

  chorus_collective_options_init(&options);
  options.struct_size = 3;
  CHECK_FAILS(chorus_barrier(context, &options), CHORUS_INVALID_ARGUMENT, rank_words, "struct_size");
  chorus_collective_options_init(&options);
  options.memory_kind = 7;
  CHECK_FAILS(chorus_barrier(context, &options), CHORUS_INVALID_ARGUMENT, rank_words, "memory_kind");
  chorus_collective_options_init(&options);
  options.algorithm = "no_such_algorithm";
  /* Unknown names are caught where the algorithm is chosen: the context already failed, so any error will do. */
  CHECK(chorus_allreduce(context, data, data, 8, CHORUS_FLOAT32, CHORUS_SUM, &options) != CHORUS_OK);

  /* Null handles and outputs. */
  CHECK_FAILS(chorus_allreduce(NULL, data, data, 8, CHORUS_FLOAT32, CHORUS_SUM, NULL), CHORUS_INVALID_ARGUMENT,
              "chorus_allreduce got a null context handle");
  CHECK_FAILS(chorus_context_rank(NULL, &out), CHORUS_INVALID_ARGUMENT, "chorus_context_rank");
  CHECK_FAILS(chorus_context_rank(context, NULL), CHORUS_INVALID_ARGUMENT, rank_words, "null");
  CHECK_FAILS(chorus_work_wait(NULL, -1), CHORUS_INVALID_ARGUMENT, "null work");
  CHECK_FAILS(chorus_context_split(context, 0, 0, NULL), CHORUS_INVALID_ARGUMENT, rank_words, "null");
  CHECK_FAILS(chorus_context_create(NULL, "x", my_rank, job_size, NULL, &none), CHORUS_INVALID_ARGUMENT, rank_words,
              "store_url");
  CHECK(none == NULL);
  CHECK_FAILS(chorus_context_create(getenv("CHORUS_STORE"), "x", job_size, job_size, NULL, &none),
              CHORUS_INVALID_ARGUMENT, "out of range");
  chorus_connect_options_init(&connect_options);
  connect_options.connections = 7;
  CHECK_FAILS(chorus_context_create(getenv("CHORUS_STORE"), "x", my_rank, job_size, &connect_options, &none),
              CHORUS_INVALID_ARGUMENT, rank_words, "connections");
  chorus_connect_options_init(&connect_options);
  connect_options.transports = " , ";
  CHECK_FAILS(chorus_context_create_from_env(&connect_options, &none), CHORUS_INVALID_ARGUMENT, "transports");
  CHECK(chorus_last_error_peer() == -1);
  CHECK_OK(chorus_context_destroy(NULL));
  CHECK_OK(chorus_work_free(NULL));

  /* Every rejected call aborted the context, as in C++: it is finished. */
  CHECK(chorus_context_check(context) != CHORUS_OK);
  CHECK(chorus_barrier(context, NULL) != CHORUS_OK);
  CHECK(strlen(chorus_last_error()) > 0);
  CHECK_OK(chorus_context_destroy(context));
}

/* Rank size-1 brings one element more to an allreduce than the others: every
 * rank must fail (none may hang), and the disagreement be reported as such.
 * Returns this rank's status. */
static chorus_status mismatched_count(void) {
  chorus_context* context = fresh_context("mismatch");
  const size_t count = my_rank == job_size - 1 ? 1001 : 1000;
  float* data = calloc(1001, sizeof(float));
  chorus_status status;
  if (data == NULL) fail(__LINE__, "out of memory");
  status = chorus_allreduce(context, data, data, count, CHORUS_FLOAT32, CHORUS_SUM, NULL);
  if (status != CHORUS_MISMATCH && status != CHORUS_INVALID_ARGUMENT && status != CHORUS_ABORTED &&
      status != CHORUS_IO_ERROR)
    fail(__LINE__, "a count that differs across ranks gave %s: %s", chorus_status_name(status), chorus_last_error());
  if (strstr(chorus_last_error(), "rank ") == NULL)
    fail(__LINE__, "the mismatch names no rank: %s", chorus_last_error());
  printf("c_program: rank %d: mismatched count: %s: %s\n", my_rank, chorus_status_name(status), chorus_last_error());
  ++checks;
  free(data);
  CHECK_OK(chorus_context_destroy(context));
  return status;
}

/* Which statuses the ranks got in the mismatch, gathered on a fresh context:
 * at least one rank must have named the disagreement itself. */
static void check_mismatch_reported(chorus_status mine) {
  chorus_context* context = fresh_context("mismatch-report");
  int32_t status = mine, everyone[64];
  int r, mismatches = 0;
  if (job_size > 64) fail(__LINE__, "too many ranks");
  CHECK_OK(chorus_allgather(context, &status, everyone, 1, CHORUS_INT32, NULL));
  for (r = 0; r < job_size; ++r) mismatches += everyone[r] == CHORUS_MISMATCH;
  CHECK(mismatches >= 1);
  CHECK_OK(chorus_context_destroy(context));
}

static void check_abort(void) {
  chorus_context* context = fresh_context("abort");
  float data[4] = {0};
  CHECK_OK(chorus_context_abort(context, "stopping on purpose"));
  CHECK_FAILS(chorus_allreduce(context, data, data, 4, CHORUS_FLOAT32, CHORUS_SUM, NULL), CHORUS_ABORTED,
              "stopping on purpose");
  CHECK_FAILS(chorus_context_check(context), CHORUS_ABORTED, "stopping on purpose");
  CHECK_OK(chorus_context_destroy(context));
}

/* The last rank dies without closing its contexts; the others must fail
 * naming it (CHORUS_PEER_LOST, chorus_last_error_peer), then shrink and go on. */
static void check_peer_lost_and_shrink(void) {
  chorus_context* context = fresh_context("peer-lost");
  chorus_context* survivors = NULL;
  const int victim = job_size - 1;
  char victim_words[32];
  float data[16];
  int32_t one = 1;
  int size = 0;
  int64_t timeout_ms = 0;
  size_t i;
  chorus_status status;
  /* Any peer's death fails whatever the context is doing, so the victim
   * waits until every survivor is past connecting (a barrier would not do:
   * the victim may leave it while others still progress theirs). */
  if (my_rank == victim) {
    int r;
    for (r = 0; r < victim; ++r) CHECK_OK(chorus_recv(context, &one, 1, CHORUS_INT32, r, 9u, NULL));
    printf("c_program: rank %d: %lu checks passed; exiting now on purpose without closing\n", my_rank, checks);
    fflush(stdout);
    _exit(0);
  }
  CHECK_OK(chorus_send(context, &one, 1, CHORUS_INT32, victim, 9u, NULL));
  for (i = 0; i < 16; ++i) data[i] = 1.0f;
  snprintf(victim_words, sizeof victim_words, "rank %d", victim);
  status = chorus_allreduce(context, data, data, 16, CHORUS_FLOAT32, CHORUS_SUM, NULL);
  if (status != CHORUS_PEER_LOST)
    fail(__LINE__, "a dead peer gave %s, expected CHORUS_PEER_LOST: %s", chorus_status_name(status),
         chorus_last_error());
  if (strstr(chorus_last_error(), victim_words) == NULL || chorus_last_error_peer() != victim)
    fail(__LINE__, "the error does not name rank %d (peer %d): %s", victim, chorus_last_error_peer(),
         chorus_last_error());
  ++checks;
  /* The survivors keep the timeout the context had when it shrank. */
  CHECK_OK(chorus_context_set_timeout(context, 17000));
  CHECK_OK(chorus_context_shrink(context, 0, &survivors));
  CHECK_OK(chorus_context_size(survivors, &size));
  CHECK(size == job_size - 1);
  CHECK_OK(chorus_context_timeout(survivors, &timeout_ms));
  CHECK(timeout_ms == 17000);
  CHECK_OK(chorus_allreduce(survivors, &one, &one, 1, CHORUS_INT32, CHORUS_SUM, NULL));
  CHECK(one == job_size - 1);
  CHECK_OK(chorus_context_destroy(survivors));
  CHECK_OK(chorus_context_destroy(context));
}

/* Registered buffers: usable in collectives while registered (bit-exact),
 * the same buffer twice is fine, an overlapping range and bad arguments are
 * refused with messages that say why. */
static void check_registered_buffers(chorus_context* context) {
  enum { count = 4096 };
  int32_t* data = (int32_t*)malloc(count * sizeof(int32_t));
  chorus_registered_buffer* whole = NULL;
  chorus_registered_buffer* again = NULL;
  chorus_registered_buffer* overlap = (chorus_registered_buffer*)&whole; /* must stay untouched on failure */
  size_t i;
  int round;
  CHECK(data != NULL);
  CHECK_OK(chorus_register_buffer(data, count * sizeof(int32_t), &whole));
  CHECK_OK(chorus_register_buffer(data, count * sizeof(int32_t), &again));
  CHECK_FAILS(chorus_register_buffer(data + 16, 64, &overlap), CHORUS_INVALID_ARGUMENT, "overlaps", "registered");
  CHECK(overlap == (chorus_registered_buffer*)&whole);
  CHECK_FAILS(chorus_register_buffer(NULL, 64, &overlap), CHORUS_INVALID_ARGUMENT, "null");
  CHECK_FAILS(chorus_register_buffer(data, 0, &overlap), CHORUS_INVALID_ARGUMENT, "0 bytes");
  CHECK_FAILS(chorus_register_buffer(data, 64, NULL), CHORUS_INVALID_ARGUMENT, "null", "registration");
  for (round = 0; round < 3; ++round) {
    for (i = 0; i < count; ++i) data[i] = (int32_t)(my_rank + 1 + round) * (int32_t)(i % 7 + 1);
    CHECK_OK(chorus_allreduce(context, data, data, count, CHORUS_INT32, CHORUS_SUM, NULL));
    for (i = 0; i < count; ++i) {
      const int32_t ranks = (int32_t)job_size;
      const int32_t expected = (ranks * (ranks + 1) / 2 + ranks * round) * (int32_t)(i % 7 + 1);
      if (data[i] != expected) fail(__LINE__, "element %zu is %d, expected %d", i, (int)data[i], (int)expected);
    }
    ++checks;
  }
  CHECK_OK(chorus_registered_buffer_free(again));
  CHECK_OK(chorus_registered_buffer_free(whole));
  CHECK_OK(chorus_registered_buffer_free(NULL));
  /* Deregistered whole: the sub-range may be registered on its own now. */
  CHECK_OK(chorus_register_buffer(data + 16, 64, &overlap));
  CHECK_OK(chorus_registered_buffer_free(overlap));
  free(data);
}

int main(void) {
  chorus_context* context = NULL;
  chorus_status mismatch;
  int async;

  if (!CHORUS_C_API_COMPATIBLE(chorus_version()))
    fail(__LINE__, "the library's C API %d.%d does not serve this header's %d.%d",
         CHORUS_VERSION_MAJOR_OF(chorus_version()), CHORUS_VERSION_MINOR_OF(chorus_version()),
         CHORUS_C_API_VERSION_MAJOR, CHORUS_C_API_VERSION_MINOR);
  CHECK(strcmp(chorus_last_error(), "") == 0 && chorus_last_error_peer() == -1);

  CHECK_OK(chorus_context_create_from_env(NULL, &context));
  CHECK_OK(chorus_context_rank(context, &my_rank));
  CHECK_OK(chorus_context_size(context, &job_size));
  snprintf(rank_words, sizeof rank_words, "rank %d", my_rank);
  if (job_size < 3 || job_size > 10) fail(__LINE__, "run me with 3 to 10 ranks (chorus-run -n 4)");

  check_queries(context);
  for (async = 0; async <= 1; ++async) {
    check_allreduce_every_type(context, async);
    check_allreduce_every_op(context, async);
    check_rooted(context, async);
    check_blocks(context, async);
    check_alltoall(context, async);
    check_point_to_point(context, async);
  }
  check_async_in_flight(context);
  check_wait_timeout(context);
  check_recv_any(context);
  check_split(context);
  check_registered_buffers(context);
  CHECK_OK(chorus_barrier(context, NULL));
  CHECK_OK(chorus_context_destroy(context));

  check_on_demand();
  check_bad_arguments();
  mismatch = mismatched_count();
  check_mismatch_reported(mismatch);
  check_abort();
  check_peer_lost_and_shrink();
  printf("c_program: rank %d: %lu checks passed\n", my_rank, checks);
  return 0;
}
