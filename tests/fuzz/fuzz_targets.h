/* fuzz_targets.h -- the bodies of tessera's fuzz targets: one function per input that
 * crosses a trust boundary (kube-scheduler's ExtenderArgs, API objects, annotations,
 * AdmissionReviews, simulator files, tessera-reserve's environment, DRA ResourceSlices,
 * ResourceClaims and their watch, the kubelet's Pod Resources replies).
 *
 * Each fuzz_<target>_one feeds one input to the real parser or verb and aborts when an
 * invariant the code promises is broken (a reply that is not JSON, an over-committed GPU, a
 * round trip that loses data), so the sanitizers and these checks are the oracle. Nothing
 * mutable survives a call. The libFuzzer wrappers (fuzz_<target>.c, clang only) and the
 * corpus replay in `make test` (tests/unit/test_fuzz_replay.c, gcc) call the same functions.
 */
#ifndef FUZZ_TARGETS_H
#define FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

void fuzz_filter_one(const uint8_t *data, size_t len);
void fuzz_prioritize_one(const uint8_t *data, size_t len);
void fuzz_bind_one(const uint8_t *data, size_t len);
void fuzz_preempt_one(const uint8_t *data, size_t len);
void fuzz_watch_one(const uint8_t *data, size_t len);
void fuzz_request_one(const uint8_t *data, size_t len);
void fuzz_node_one(const uint8_t *data, size_t len);
void fuzz_annotation_one(const uint8_t *data, size_t len);
void fuzz_quantity_one(const uint8_t *data, size_t len);
void fuzz_trace_one(const uint8_t *data, size_t len);
void fuzz_openb_one(const uint8_t *data, size_t len);
void fuzz_cluster_one(const uint8_t *data, size_t len);
void fuzz_webhook_one(const uint8_t *data, size_t len);
void fuzz_reserve_visible_one(const uint8_t *data, size_t len);
void fuzz_dra_slice_one(const uint8_t *data, size_t len);
void fuzz_dra_claim_one(const uint8_t *data, size_t len);
void fuzz_dra_watch_one(const uint8_t *data, size_t len);
void fuzz_podresources_one(const uint8_t *data, size_t len);
void fuzz_holdings_one(const uint8_t *data, size_t len);

typedef struct fuzz_target {
    const char *name;            /* tests/fuzz/corpus/<name>, tests/fuzz/crashes/<name> */
    void (*one)(const uint8_t *data, size_t len);
} fuzz_target;

/* Every target, in the order `make fuzz` runs them; ends with {NULL, NULL}. */
extern const fuzz_target fuzz_targets[];

/* The libFuzzer entry points for one target (fuzz_<target>.c is just this line): the log is off, since a
 * rejected input is not news and findings abort. Needs kube/log.h. */
#define FUZZ_LIBFUZZER_TARGET(one)                                  \
    int LLVMFuzzerInitialize(int *argc, char ***argv);              \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);    \
    int LLVMFuzzerInitialize(int *argc, char ***argv) {             \
        kube_log_set_level(KUBE_LOG_OFF);                             \
        return 0;                                                   \
    }                                                               \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {   \
        one(data, len);                                             \
        return 0;                                                   \
    }

#endif
