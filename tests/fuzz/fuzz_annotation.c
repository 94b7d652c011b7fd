/* fuzz_annotation.c -- libFuzzer entry point for the "annotation" target; the body is fuzz_annotation_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/annotation and crashes/annotation. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_annotation_one)
