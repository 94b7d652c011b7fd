/* fuzz_holdings.c -- libFuzzer entry point for the "holdings" target; the body is fuzz_holdings_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/holdings and crashes/holdings. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_holdings_one)
