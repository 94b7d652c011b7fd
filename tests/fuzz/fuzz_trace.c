/* fuzz_trace.c -- libFuzzer entry point for the "trace" target; the body is fuzz_trace_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/trace and crashes/trace. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_trace_one)
