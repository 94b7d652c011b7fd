/* fuzz_preempt.c -- libFuzzer entry point for the "preempt" target; the body is fuzz_preempt_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/preempt and crashes/preempt. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_preempt_one)
