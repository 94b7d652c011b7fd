/* fuzz_reserve_visible.c -- libFuzzer entry point for the "reserve_visible" target; the body is fuzz_reserve_visible_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/reserve_visible and crashes/reserve_visible. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_reserve_visible_one)
