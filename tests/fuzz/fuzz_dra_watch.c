/* fuzz_dra_watch.c -- libFuzzer entry point for the "dra_watch" target; the body is fuzz_dra_watch_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/dra_watch and crashes/dra_watch. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_dra_watch_one)
