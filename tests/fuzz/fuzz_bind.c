/* fuzz_bind.c -- libFuzzer entry point for the "bind" target; the body is fuzz_bind_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/bind and crashes/bind. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_bind_one)
