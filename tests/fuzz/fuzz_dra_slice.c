/* fuzz_dra_slice.c -- libFuzzer entry point for the "dra_slice" target; the body is fuzz_dra_slice_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/dra_slice and crashes/dra_slice. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_dra_slice_one)
