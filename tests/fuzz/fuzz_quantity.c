/* fuzz_quantity.c -- libFuzzer entry point for the "quantity" target; the body is fuzz_quantity_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/quantity and crashes/quantity. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_quantity_one)
