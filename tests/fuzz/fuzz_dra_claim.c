/* fuzz_dra_claim.c -- libFuzzer entry point for the "dra_claim" target; the body is fuzz_dra_claim_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/dra_claim and crashes/dra_claim. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_dra_claim_one)
