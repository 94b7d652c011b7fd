/* fuzz_prioritize.c -- libFuzzer entry point for the "prioritize" target; the body is fuzz_prioritize_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/prioritize and crashes/prioritize. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_prioritize_one)
