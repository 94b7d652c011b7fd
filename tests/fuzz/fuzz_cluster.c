/* fuzz_cluster.c -- libFuzzer entry point for the "cluster" target; the body is fuzz_cluster_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/cluster and crashes/cluster. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_cluster_one)
