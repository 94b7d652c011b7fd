/* test_ext_workload.c -- --workload files and the workload built from the cache, which
 * feed --policy fgd and tessera_cluster_fragmentation_ratio. Real input: the demo pods. */
#include <stdlib.h>
#include <string.h>

#include "ext_helpers.h"
#include "extender/workload.h"
#include "harness.h"

/* The demo pod list with its deliberately invalid last pod (a fraction plus whole GPUs). */
TEST(ext_workload_file_rejects_an_invalid_pod_by_index) {
    size_t len;
    char *txt = test_fixture("../../data/demo-pods.json", &len), err[256] = "";
    policy_workload *w = ext_workload_from_json(txt, len, false, err, sizeof err);
    free(txt);
    CHECK(w == NULL);
    CHECK_MSG(strstr(err, "items[11]") && strstr(err, "gpu-fraction"), "err: %s", err);
}

/* The demo pods without that invalid last one, as a bare array (caller frees). */
static char *valid_demo_pods(void) {
    size_t len;
    char *txt = test_fixture("../../data/demo-pods.json", &len);
    cJSON *root = cJSON_Parse(txt);
    free(txt);
    cJSON *items = cJSON_GetObjectItem(root, "items");
    cJSON_DeleteItemFromArray(items, cJSON_GetArraySize(items) - 1);
    char *ok = cJSON_PrintUnformatted(items);
    cJSON_Delete(root);
    return ok;
}

TEST(ext_workload_file_counts_each_pod_once) {
    char *ok = valid_demo_pods(), err[256] = "";
    policy_workload *w = ext_workload_from_json(ok, strlen(ok), false, err, sizeof err);
    free(ok);
    CHECK_MSG(w != NULL, "err: %s", err);
    long tasks = 0;
    for (int i = 0; i < policy_workload_count(w); i++) tasks += policy_workload_type(w, i)->count;
    double cov = policy_workload_coverage(w);
    policy_workload_free(w);
    CHECK(tasks >= 1 && tasks <= 11);
    CHECK(cov >= 0.95 && cov <= 1.0);
}

/* With reservation delivery (the extender's default in a cluster) the file's fractions are
 * narrowed as filter narrows pods (never an MPS replica); nothing else changes. */
TEST(ext_workload_file_narrows_fractions_for_reservation_delivery) {
    char *ok = valid_demo_pods(), err[256] = "";
    int fractions = 0;
    for (int d = 0; d < 2; d++) {
        policy_workload *w = ext_workload_from_json(ok, strlen(ok), d == 1, err, sizeof err);
        CHECK_MSG(w != NULL, "err: %s", err);
        for (int i = 0; w && i < policy_workload_count(w); i++) {
            const policy_task_type *t = policy_workload_type(w, i);
            bool frac = t->req.kind == MODEL_REQ_FRACTION;
            fractions += frac && d == 1;
            CHECK_MSG(t->req.no_mps == (frac && d == 1), "type %d: kind %d no_mps %d", i, t->req.kind, t->req.no_mps);
        }
        policy_workload_free(w);
    }
    free(ok);
    CHECK(fractions > 0);   /* the demo pods have soft shares */
}

TEST(ext_workload_file_bad_input_is_a_clear_error) {
    static const char *bad[] = {"", "{", "42", "{\"items\":{}}", "[]", "[7]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char err[256] = "";
        policy_workload *w = ext_workload_from_json(bad[i], strlen(bad[i]), false, err, sizeof err);
        CHECK_MSG(w == NULL && err[0], "input %zu (%s) accepted or no message", i, bad[i]);
    }
}

/* Without --workload the fragmentation metric measures against the cache's GPU pods. */
TEST(ext_workload_from_state_follows_the_cache) {
    ext_state *st = demo_state();
    ext_state_lock(st);
    policy_workload *none = ext_workload_from_state(st, false);
    ext_state_unlock(st);
    CHECK(none == NULL);   /* no pods yet */
    char *pod = pod_json("w", "uid-w", 0, "\"nvidia.com/gpu\":\"1\"", NULL, "gpu-a100-whole");
    cJSON *obj = cJSON_Parse(pod);
    free(pod);
    ext_state_apply(st, KUBE_POD, KUBE_ADDED, obj);
    cJSON_Delete(obj);
    ext_state_lock(st);
    policy_workload *w = ext_workload_from_state(st, false);
    ext_state_unlock(st);
    int types = w ? policy_workload_count(w) : -1;
    const policy_task_type *t = w ? policy_workload_type(w, 0) : NULL;
    bool whole = t && t->kind == MODEL_REQ_WHOLE && t->gpus == 1;
    policy_workload_free(w);
    ext_state_free(st);
    CHECK_INT(types, 1);
    CHECK(whole);
}
