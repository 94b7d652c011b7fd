/* fuzz_podresources.c -- libFuzzer entry point for the "podresources" target; the body is fuzz_podresources_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/podresources and crashes/podresources. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_podresources_one)
