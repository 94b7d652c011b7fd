/* fuzz_openb.c -- libFuzzer entry point for the "openb" target; the body is fuzz_openb_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/openb and crashes/openb. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_openb_one)
