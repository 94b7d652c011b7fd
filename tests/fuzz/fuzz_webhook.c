/* fuzz_webhook.c -- libFuzzer entry point for the "webhook" target; the body is fuzz_webhook_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/webhook and crashes/webhook. */
#include "tests/fuzz/fuzz_targets.h"
#include "kube/log.h"

FUZZ_LIBFUZZER_TARGET(fuzz_webhook_one)
