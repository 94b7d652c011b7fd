/* workload.c -- target workloads from Pod objects (a file) or from the cache. */
#include "extender/workload.h"

#include <stdio.h>

#include <cjson/cJSON.h>

#define COVERAGE_PCT 95.0

policy_workload *ext_workload_from_json(const char *json, size_t len, bool reservation_delivery, char *err,
                                        size_t errlen) {
    cJSON *root = cJSON_ParseWithLength(json, len);
    const cJSON *items = cJSON_IsArray(root) ? root : cJSON_GetObjectItemCaseSensitive(root, "items");
    if (!cJSON_IsArray(items)) {
        snprintf(err, errlen, "%s", root ? "expected a JSON array of Pod objects or a List with items"
                                         : "not valid JSON");
        cJSON_Delete(root);
        return NULL;
    }
    policy_workload *w = policy_workload_new();
    if (!w) {
        snprintf(err, errlen, "out of memory");
        cJSON_Delete(root);
        return NULL;
    }
    int i = 0;
    const cJSON *pod;
    cJSON_ArrayForEach(pod, items) {
        model_request r;
        char why[256];
        bool ok = cJSON_IsObject(pod) && model_request_from_pod(pod, &r, why, sizeof why) == 0;
        if (ok && reservation_delivery) model_request_for_reservation_delivery(&r);
        if (!ok || policy_workload_add(w, &r, 1, why, sizeof why) != 0) {
            snprintf(err, errlen, "items[%d]: %s", i, cJSON_IsObject(pod) ? why : "expected a Pod object");
            policy_workload_free(w);
            cJSON_Delete(root);
            return NULL;
        }
        i++;
    }
    cJSON_Delete(root);
    if (policy_workload_finish(w, COVERAGE_PCT, err, errlen) != 0) {
        if (i == 0) snprintf(err, errlen, "no pods in the workload");
        policy_workload_free(w);
        return NULL;
    }
    return w;
}

policy_workload *ext_workload_from_state(const ext_state *st, bool reservation_delivery) {
    policy_workload *w = policy_workload_new();
    if (!w) return NULL;
    size_t it = 0;
    int n = 0;
    const ext_pod *p;
    while ((p = ext_state_pod_next(st, &it))) {
        model_request r = p->req;
        if (reservation_delivery) model_request_for_reservation_delivery(&r);
        if (model_request_wants_gpu(&r) && policy_workload_add(w, &r, 1, NULL, 0) == 0) n++;
    }
    if (n == 0 || policy_workload_finish(w, COVERAGE_PCT, NULL, 0) != 0) {
        policy_workload_free(w);
        return NULL;
    }
    return w;
}
