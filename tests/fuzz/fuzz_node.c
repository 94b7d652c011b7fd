/* fuzz_node.c -- libFuzzer entry point for the "node" target; the body is fuzz_node_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/node and crashes/node. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_node_one)
