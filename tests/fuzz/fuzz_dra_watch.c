/* fuzz_dra_watch.c -- libFuzzer entry point for the "dra_watch" target; the body is fuzz_dra_watch_one in
 * fuzz_targets.c, which `make test` also replays over tests/fuzz/corpus/dra_watch and crashes/dra_watch. */
#include "tests/fuzz/fuzz_targets.h"
#include "extender/log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    ext_log_set_level(EXT_LOG_OFF);   /* a rejected input is not news; findings abort */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
    fuzz_dra_watch_one(data, len);
    return 0;
}
