// libFuzzer calls LLVMFuzzerInitialize once, before the first input. Bad
// bytes make the library log a warning on nearly every run, which would
// bury the fuzzer's own output: every harness silences the logs here, but
// tcp_store_client, which also starts its store server there and so writes
// its own.
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  chorus::fuzz::quiet_logs();
  return 0;
}
