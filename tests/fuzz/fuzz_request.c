/* fuzz_request.c -- libFuzzer entry point for the "request" target; the body is fuzz_request_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/request and crashes/request. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_request_one)
