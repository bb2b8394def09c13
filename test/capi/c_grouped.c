/* The C API's grouped collectives from a plain C program, as a real job
 * under chorus-run (2 and 3 ranks in the tests): chorus_grouped_allreduce,
 * _allgather and _reduce_scatter, blocking and async, in and out of place,
 * with an empty member, checked bit-exactly; null arrays rejected naming
 * the rank; and groups that split one total differently failing with
 * CHORUS_MISMATCH on every rank, no member's output written. Exits non-zero
 * on the first wrong result, naming it. */
#define _POSIX_C_SOURCE 200809L

#include <chorus/chorus_c.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEMBERS 3
#define MOST_RANKS 8

static int my_rank = -1;
static int job_size = 0;
static unsigned long checks = 0;

static void fail(int line, const char* what, const char* detail) {
  fprintf(stderr, "c_grouped: rank %d: line %d: %s: %s\n", my_rank, line, what, detail);
  exit(1);
}

#define CHECK_OK(call)                                                          \
  do {                                                                          \
    chorus_status status_ = (call);                                             \
    if (status_ != CHORUS_OK) fail(__LINE__, #call, chorus_last_error());       \
    ++checks;                                                                   \
  } while (0)

#define CHECK(condition)                                                        \
  do {                                                                          \
    if (!(condition)) fail(__LINE__, "failed", #condition);                     \
    ++checks;                                                                   \
  } while (0)

/* Member i has counts[i] elements (one rank's block for allgather and
 * reduce_scatter); the middle one is empty. */
static const size_t counts[MEMBERS] = {5, 0, 3};

static int32_t mark(int rank, size_t member, size_t index) {
  return (int32_t)((rank + 1) * (int)(index % 7 + member + 1));
}

static int32_t sum_of_marks(size_t member, size_t index) {
  int32_t sum = 0;
  int r;
  for (r = 0; r < job_size; ++r) sum += mark(r, member, index);
  return sum;
}

/* Buffers big enough for any member's large side. */
static int32_t inputs[MEMBERS][8 * MOST_RANKS];
static int32_t outputs[MEMBERS][8 * MOST_RANKS];

static void fill(size_t input_blocks) {
  size_t m, i;
  for (m = 0; m < MEMBERS; ++m) {
    for (i = 0; i < counts[m] * input_blocks; ++i) inputs[m][i] = mark(my_rank, m, i);
    for (i = 0; i < 8 * MOST_RANKS; ++i) outputs[m][i] = -1;
  }
}

/* An async call's outcome once its work finished; a blocking call's as it is. */
static chorus_status finish(chorus_status issued, chorus_work* work) {
  chorus_status status;
  if (issued != CHORUS_OK || work == NULL) return issued;
  status = chorus_work_wait(work, -1);
  chorus_work_free(work);
  return status;
}

static void check_allreduce(chorus_context* context, int async, int in_place) {
  const void* in[MEMBERS];
  void* out[MEMBERS];
  chorus_work* work = NULL;
  chorus_status issued;
  size_t m, i;
  fill(1);
  for (m = 0; m < MEMBERS; ++m) {
    in[m] = inputs[m];
    out[m] = in_place ? (void*)inputs[m] : (void*)outputs[m];
  }
  issued = async ? chorus_grouped_allreduce_async(context, in, out, counts, MEMBERS, CHORUS_INT32, CHORUS_SUM, NULL,
                                                  &work)
                 : chorus_grouped_allreduce(context, in, out, counts, MEMBERS, CHORUS_INT32, CHORUS_SUM, NULL);
  CHECK_OK(finish(issued, work));
  for (m = 0; m < MEMBERS; ++m)
    for (i = 0; i < counts[m]; ++i) CHECK(((const int32_t*)out[m])[i] == sum_of_marks(m, i));
}

static void check_allgather(chorus_context* context, int async, int in_place) {
  const void* in[MEMBERS];
  void* out[MEMBERS];
  chorus_work* work = NULL;
  chorus_status issued;
  size_t m, i;
  int r;
  fill(1);
  for (m = 0; m < MEMBERS; ++m) {
    int32_t* own = outputs[m] + (size_t)my_rank * counts[m];
    if (in_place) memcpy(own, inputs[m], counts[m] * sizeof(int32_t));
    in[m] = in_place ? (const void*)own : (const void*)inputs[m];
    out[m] = outputs[m];
  }
  issued = async ? chorus_grouped_allgather_async(context, in, out, counts, MEMBERS, CHORUS_INT32, NULL, &work)
                 : chorus_grouped_allgather(context, in, out, counts, MEMBERS, CHORUS_INT32, NULL);
  CHECK_OK(finish(issued, work));
  for (m = 0; m < MEMBERS; ++m)
    for (r = 0; r < job_size; ++r)
      for (i = 0; i < counts[m]; ++i) CHECK(outputs[m][(size_t)r * counts[m] + i] == mark(r, m, i));
}

static void check_reduce_scatter(chorus_context* context, int async, int in_place) {
  const void* in[MEMBERS];
  void* out[MEMBERS];
  chorus_work* work = NULL;
  chorus_status issued;
  const size_t own = (size_t)my_rank;
  size_t m, i;
  fill((size_t)job_size);
  for (m = 0; m < MEMBERS; ++m) {
    in[m] = inputs[m];
    out[m] = in_place ? (void*)(inputs[m] + own * counts[m]) : (void*)outputs[m];
  }
  issued = async ? chorus_grouped_reduce_scatter_async(context, in, out, counts, MEMBERS, CHORUS_INT32, CHORUS_SUM,
                                                       NULL, &work)
                 : chorus_grouped_reduce_scatter(context, in, out, counts, MEMBERS, CHORUS_INT32, CHORUS_SUM, NULL);
  CHECK_OK(finish(issued, work));
  for (m = 0; m < MEMBERS; ++m)
    for (i = 0; i < counts[m]; ++i) CHECK(((const int32_t*)out[m])[i] == sum_of_marks(m, own * counts[m] + i));
}

static chorus_context* fresh_context(const char* phase) {
  char job_id[256];
  chorus_context* context = NULL;
  const char* job = getenv("CHORUS_JOB_ID");
  snprintf(job_id, sizeof job_id, "%s/c-grouped/%s", job != NULL ? job : "none", phase);
  CHECK_OK(chorus_context_create(getenv("CHORUS_STORE"), job_id, my_rank, job_size, NULL, &context));
  return context;
}

/* Every rank passes null arrays for two members: rejected here, naming this rank. */
static void check_null_arrays(void) {
  chorus_context* context = fresh_context("null-arrays");
  char words[128];
  const chorus_status status = chorus_grouped_allreduce(context, NULL, NULL, counts, 2, CHORUS_INT32, CHORUS_SUM, NULL);
  snprintf(words, sizeof words, "rank %d: grouped_allreduce: got a null inputs array for 2 members", my_rank);
  CHECK(status == CHORUS_INVALID_ARGUMENT);
  if (strstr(chorus_last_error(), words) == NULL) fail(__LINE__, "unexpected words", chorus_last_error());
  CHECK_OK(chorus_context_destroy(context));
}

/* Rank 0 splits 8 elements 3 + 5, every other rank 5 + 3. */
static void check_mismatch(chorus_context* context) {
  const size_t first[2] = {3, 5}, other[2] = {5, 3};
  int32_t a[8], b[8];
  const void* in[2];
  void* out[2];
  size_t i;
  chorus_status status;
  for (i = 0; i < 8; ++i) a[i] = b[i] = 7;
  in[0] = a;
  out[0] = a;
  in[1] = b;
  out[1] = b;
  status = chorus_grouped_allreduce(context, in, out, my_rank == 0 ? first : other, 2, CHORUS_INT32, CHORUS_SUM, NULL);
  if (status != CHORUS_MISMATCH) fail(__LINE__, "a differently split group did not give CHORUS_MISMATCH",
                                      chorus_last_error());
  CHECK(strstr(chorus_last_error(), "grouped allreduce") != NULL);
  for (i = 0; i < 8; ++i) CHECK(a[i] == 7 && b[i] == 7);
}

int main(void) {
  chorus_context* context = NULL;
  int async, in_place;
  CHECK_OK(chorus_context_create_from_env(NULL, &context));
  CHECK_OK(chorus_context_rank(context, &my_rank));
  CHECK_OK(chorus_context_size(context, &job_size));
  if (job_size < 2 || job_size > MOST_RANKS) fail(__LINE__, "run me with 2 to 8 ranks", "");
  for (async = 0; async <= 1; ++async) {
    for (in_place = 0; in_place <= 1; ++in_place) {
      check_allreduce(context, async, in_place);
      check_allgather(context, async, in_place);
      check_reduce_scatter(context, async, in_place);
    }
  }
  /* No members at all: a collective over nothing, still in step. */
  CHECK_OK(chorus_grouped_allreduce(context, NULL, NULL, NULL, 0, CHORUS_INT32, CHORUS_SUM, NULL));
  CHECK_OK(chorus_barrier(context, NULL));
  check_null_arrays();
  check_mismatch(context);
  CHECK_OK(chorus_context_destroy(context));
  printf("c_grouped: rank %d: %lu checks passed\n", my_rank, checks);
  return 0;
}
