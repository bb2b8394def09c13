// One rank of an integration-test job, run as a real process by
// test_processes.cc. It joins the job through connect_from_env (the env
// contract a launcher sets), runs the scenario named by argv[1] and prints
// one machine-readable line the driver parses:
//
//   RESULT rank=2 status=ok iterations=40
//   RESULT rank=1 status=IoError peer=3 phase=run elapsed_ms=812 error_at_ms=... again=IoError guards=ok what=...
//
// `what` is always last (it holds the error text, spaces included). Loops
// also print "READY rank=N" once their first collective has completed. The
// exit code is 0 when the outcome is the one the scenario expects, 1
// otherwise, 2 for bad arguments and 3 when joining the job failed (the
// driver retries that on a fresh port: the store port it picked may have
// been taken by someone else in between).
#include <chorus/chorus.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "test/integration/rank_checks.h"

namespace {

using chorus::Context;
using chorus::DataType;
using chorus::ReduceOp;
using namespace chorus::integration;

struct Arguments {
  std::string scenario;
  std::chrono::milliseconds timeout{30000};
  std::string variant;
  bool big = false;              // correctness: add one allreduce of more than 64 MiB
  std::string stop_file;         // hostile: loop until this file exists (on any rank)
  int max_seconds = 60;          // loops: give up (and fail) after this long
  int after = 100;               // shrink: checked allreduces among the survivors
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "rank_program: %s\nusage: rank_program correctness|loop|hostile|shrink|mismatch_count|mismatch_collective "
               "[--timeout-ms N] [--variant NAME] [--big] [--stop-file PATH] [--max-seconds N] [--after N]\n",
               why);
  std::exit(2);
}

Arguments parse_arguments(int argc, char** argv) {
  if (argc < 2) usage("no scenario given");
  Arguments arguments;
  arguments.scenario = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string_view flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("a flag is missing its value");
      return argv[++i];
    };
    if (flag == "--timeout-ms") arguments.timeout = std::chrono::milliseconds(std::stoll(value()));
    else if (flag == "--variant") arguments.variant = value();
    else if (flag == "--big") arguments.big = true;
    else if (flag == "--stop-file") arguments.stop_file = value();
    else if (flag == "--max-seconds") arguments.max_seconds = std::stoi(value());
    else if (flag == "--after") arguments.after = std::stoi(value());
    else usage("unknown flag");
  }
  return arguments;
}

// ---- correctness --------------------------------------------------------

int run_correctness(Context& context, const Arguments& arguments) {
  const size_t counts[] = {0, 1, 13, 1000003};  // 1000003 is prime: chunks never divide evenly
  for (size_t count : counts) {
    check_allreduce_float_sum(context, count, /*in_place=*/false);
    check_allreduce_int_max(context, count, /*in_place=*/true);
    check_allreduce_bfloat16_sum(context, count, /*in_place=*/false);
    check_allreduce_float_avg(context, count, /*in_place=*/true);
    check_allreduce_int_avg(context, count, /*in_place=*/false);
  }
  if (arguments.big) {
    // More than 64 MiB of float32 (and not a round number of elements).
    check_allreduce_float_sum(context, (size_t{64} << 20) / sizeof(float) + 4099, /*in_place=*/true);
  }
  for (int root = 0; root < context.size(); ++root) check_broadcast(context, root);
  check_barrier(context);
  check_async_sequence(context);
  return print_ok(context.rank(), 0);
}

// ---- loops (kill -9, SIGSTOP, hostile bytes) ----------------------------

bool stop_requested(Context& context, const std::string& stop_file) {
  // Every rank must leave the loop after the same collective, so the ranks
  // agree on the flag with a max-allreduce instead of each looking alone.
  int32_t flag = std::filesystem::exists(stop_file) ? 1 : 0;
  chorus::allreduce(context, std::span<int32_t>(&flag, 1), ReduceOp::max);
  return flag != 0;
}

// Runs 4 MiB float32 allreduces (checked bit-exactly) until a collective
// throws, the stop file appears, or max_seconds pass.
int run_loop(Context& context, const Arguments& arguments, bool expect_error) {
  const size_t count = size_t{1} << 20;
  std::vector<float> data(count);
  const int64_t give_up_at = monotonic_ms() + int64_t{arguments.max_seconds} * 1000;
  int64_t iterations = 0;
  int64_t started_at = 0;
  try {
    for (;; ++iterations) {
      if (monotonic_ms() > give_up_at) {
        print_result(context.rank(), "no_error", cat_fields("iterations=", iterations),
                     "the loop ran out of time without an error");
        return 1;
      }
      fill_loop_pattern(data, context.rank(), iterations);
      started_at = monotonic_ms();
      chorus::allreduce(context, std::span<float>(data), ReduceOp::sum);
      if (std::string wrong = check_loop_pattern(data, context.size(), iterations); !wrong.empty()) {
        print_result(context.rank(), "wrong_result", cat_fields("iterations=", iterations), wrong);
        return 1;
      }
      // An odd-sized small collective between the big ones, so hostile bytes
      // also meet a connection busy with short messages.
      int32_t small[13];
      for (int i = 0; i < 13; ++i) small[i] = context.rank() * 100 + i;
      chorus::allreduce(context, std::span<int32_t>(small, 13), ReduceOp::max);
      for (int i = 0; i < 13; ++i) {
        if (small[i] != (context.size() - 1) * 100 + i) {
          print_result(context.rank(), "wrong_result", cat_fields("iterations=", iterations),
                       "int32 max of 13 elements differs");
          return 1;
        }
      }
      if (iterations == 0) {
        std::printf("READY rank=%d\n", context.rank());
        std::fflush(stdout);
      }
      if (!arguments.stop_file.empty() && stop_requested(context, arguments.stop_file)) break;
    }
    chorus::barrier(context);
  } catch (const chorus::Error& error) {
    const int64_t now = monotonic_ms();
    std::string fields = cat_fields("phase=run iterations=", iterations, " elapsed_ms=", now - started_at,
                                    " error_at_ms=", now, " ", describe_peer(error), " again=",
                                    error_class_after(context));
    print_result(context.rank(), error_class(error), fields, error.what());
    return expect_error ? 0 : 1;
  }
  print_result(context.rank(), "ok", cat_fields("iterations=", iterations + 1), "");
  return expect_error ? 1 : 0;
}

// ---- shrink ----------------------------------------------------------------

// Checked allreduces until one fails (a rank was killed or stopped), then
// chorus::shrink and --after checked allreduces among the survivors. A rank
// the survivors left behind reports status=excluded.
int run_shrink(Context& context, const Arguments& arguments) {
  const int rank = context.rank();
  std::vector<float> data(size_t{1} << 18);
  const int64_t give_up_at = monotonic_ms() + int64_t{arguments.max_seconds} * 1000;
  std::string failure;
  std::string failure_text;
  try {
    for (int64_t iteration = 0;; ++iteration) {
      if (monotonic_ms() > give_up_at) {
        print_result(rank, "no_error", cat_fields("iterations=", iteration), "the loop ran out of time");
        return 1;
      }
      fill_loop_pattern(data, rank, iteration);
      chorus::allreduce(context, std::span<float>(data), ReduceOp::sum);
      if (std::string wrong = check_loop_pattern(data, context.size(), iteration); !wrong.empty()) {
        print_result(rank, "wrong_result", "phase=before", wrong);
        return 1;
      }
      if (iteration == 0) {
        std::printf("READY rank=%d\n", rank);
        std::fflush(stdout);
      }
    }
  } catch (const chorus::Error& error) {
    failure = error_class(error);
    failure_text = error.what();
  }
  const int64_t failed_at = monotonic_ms();
  std::shared_ptr<Context> survivors;
  try {
    survivors = chorus::shrink(context);
  } catch (const chorus::Aborted& error) {
    print_result(rank, "excluded", cat_fields("phase=shrink failure=", failure), error.what());
    return 0;
  } catch (const chorus::Error& error) {
    print_result(rank, error_class(error), cat_fields("phase=shrink failure=", failure), error.what());
    return 1;
  }
  const int64_t shrunk_at = monotonic_ms();
  try {
    for (int64_t iteration = 0; iteration < arguments.after; ++iteration) {
      fill_loop_pattern(data, survivors->rank(), iteration);
      chorus::allreduce(*survivors, std::span<float>(data), ReduceOp::sum);
      if (std::string wrong = check_loop_pattern(data, survivors->size(), iteration); !wrong.empty()) {
        print_result(rank, "wrong_result", "phase=after", wrong);
        return 1;
      }
    }
  } catch (const chorus::Error& error) {
    print_result(rank, error_class(error), "phase=after", error.what());
    return 1;
  }
  print_result(rank, "ok",
               cat_fields("failure=", failure, " new_rank=", survivors->rank(), " new_size=", survivors->size(),
                          " after=", arguments.after, " shrink_ms=", shrunk_at - failed_at, " after_ms=",
                          monotonic_ms() - shrunk_at, " failed_at_ms=", failed_at),
               failure_text);
  return 0;
}

// ---- mismatches -----------------------------------------------------------

// Runs one collective this rank disagrees about with some other rank, inside
// guard bytes; expects an error, the guards intact and the input untouched.
int run_mismatch(Context& context, const Arguments& arguments) {
  const int rank = context.rank();
  size_t count = 100000;
  enum class Call { allreduce, broadcast, barrier } call = Call::allreduce;
  if (arguments.scenario == "mismatch_count") {
    if (arguments.variant == "larger") count = rank == 1 ? 100003 : 100000;
    else if (arguments.variant == "smaller") count = rank == 1 ? 99000 : 100000;
    else if (arguments.variant == "tiny") count = rank == 1 ? 1 : 1000003;
    else usage("mismatch_count needs --variant larger|smaller|tiny");
  } else {
    if (arguments.variant == "broadcast") call = rank == 0 ? Call::broadcast : Call::allreduce;
    else if (arguments.variant == "barrier") call = rank == context.size() - 1 ? Call::barrier : Call::allreduce;
    else usage("mismatch_collective needs --variant broadcast|barrier");
  }

  GuardedBuffer input(count * sizeof(float), std::byte{0x5a});
  GuardedBuffer output(count * sizeof(float), std::byte{0xa5});
  auto* in = reinterpret_cast<float*>(input.data());
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((i + static_cast<size_t>(rank)) % 7);
  const std::vector<std::byte> input_copy(input.data(), input.data() + input.size());

  const int64_t started_at = monotonic_ms();
  std::string status = "ok";
  std::string fields;
  std::string what;
  try {
    switch (call) {
      case Call::allreduce:
        chorus::allreduce(context, input.data(), output.data(), count, DataType::float32, ReduceOp::sum);
        break;
      case Call::broadcast:
        chorus::broadcast(context, input.data(), count, DataType::float32, 0);
        break;
      case Call::barrier:
        chorus::barrier(context);
        break;
    }
  } catch (const chorus::Error& error) {
    status = error_class(error);
    fields = cat_fields(describe_peer(error), " again=", error_class_after(context));
    what = error.what();
  }
  const int64_t elapsed = monotonic_ms() - started_at;
  // A broadcast root only sends: its call may finish before any receiver
  // notices the disagreement. The error must then reach it by its next call.
  std::string first = status;
  if (status == "ok") {
    try {
      chorus::barrier(context);
    } catch (const chorus::Error& error) {
      status = error_class(error);
      fields = cat_fields(describe_peer(error), " again=", error_class_after(context));
      what = error.what();
    }
  }
  bool guards_intact = input.guards_intact() && output.guards_intact();
  // The broadcast root's buffer is its input; nobody else may touch an input.
  bool input_intact = call == Call::broadcast ||
                      std::equal(input_copy.begin(), input_copy.end(), input.data());
  print_result(rank, status,
               cat_fields("phase=run first=", first, " elapsed_ms=", elapsed, " error_after_ms=",
                          monotonic_ms() - started_at, " count=", count,
                          " guards=", guards_intact ? "ok" : "corrupt", " input=", input_intact ? "ok" : "changed",
                          fields.empty() ? "" : " ", fields),
               what);
  return status != "ok" && guards_intact && input_intact ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Arguments arguments = parse_arguments(argc, argv);
  const char* rank_text = std::getenv("CHORUS_RANK");
  const int env_rank = rank_text ? std::atoi(rank_text) : -1;

  std::shared_ptr<Context> context;
  const int64_t connect_started = monotonic_ms();
  try {
    chorus::ConnectOptions options;
    // Connecting measures links and dials every peer: in the Soft-RoCE VM
    // beside other work that took more than the 3 s some tests give their
    // collectives, and failed a job before its test began. The collectives
    // (and a shrink's survivors, who keep the Context's timeout) use --timeout-ms.
    options.timeout = std::max(arguments.timeout, std::chrono::milliseconds(30000));
    context = chorus::connect_from_env(options);
    context->set_timeout(arguments.timeout);
  } catch (const std::exception& error) {
    print_result(env_rank, exception_class(error),
                 cat_fields("phase=connect elapsed_ms=", monotonic_ms() - connect_started), error.what());
    return 3;
  }

  try {
    if (arguments.scenario == "correctness") return run_correctness(*context, arguments);
    if (arguments.scenario == "loop") return run_loop(*context, arguments, /*expect_error=*/true);
    if (arguments.scenario == "hostile") {
      if (arguments.stop_file.empty()) usage("hostile needs --stop-file");
      return run_loop(*context, arguments, /*expect_error=*/false);
    }
    if (arguments.scenario == "shrink") return run_shrink(*context, arguments);
    if (arguments.scenario == "mismatch_count" || arguments.scenario == "mismatch_collective")
      return run_mismatch(*context, arguments);
    usage("unknown scenario");
  } catch (const WrongResult& wrong) {
    print_result(context->rank(), "wrong_result", "phase=run", wrong.what());
  } catch (const std::exception& error) {
    print_result(context->rank(), exception_class(error), "phase=run", error.what());
  }
  return 1;
}
