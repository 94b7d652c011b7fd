/* fuzz_filter.c -- libFuzzer entry point for the "filter" target; the body is fuzz_filter_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/filter and crashes/filter. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_filter_one)
