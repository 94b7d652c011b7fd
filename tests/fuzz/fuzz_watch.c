/* fuzz_watch.c -- libFuzzer entry point for the "watch" target; the body is fuzz_watch_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/watch and crashes/watch. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_watch_one)
