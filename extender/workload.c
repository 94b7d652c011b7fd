/* workload.c -- target workloads from Pod objects (a file) or from the cache. */
#include "extender/workload.h"

#include "extender/mirror/dra.h"
#include "model/dra.h"

#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#define COVERAGE_PCT 95.0

typedef struct file_objs { const cJSON *items, *chart; } file_objs;

static const char *kind_of(const cJSON *o) {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(o, "kind");
    return cJSON_IsString(k) ? k->valuestring : "Pod";
}

static const char *meta_str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"), key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The object of kind called ns/name among the file's items (ns NULL: cluster-scoped). */
static const cJSON *find_obj(const cJSON *items, const char *kind, const char *ns, const char *name) {
    const cJSON *o;
    cJSON_ArrayForEach(o, items) {
        const char *n = meta_str(o, "name"), *s = meta_str(o, "namespace");
        if (strcmp(kind_of(o), kind) != 0 || !n || strcmp(n, name) != 0) continue;
        if (!ns || !strcmp(s ? s : "default", ns)) return o;
    }
    return NULL;
}

static const cJSON *file_class(void *user, const char *name) {
    const file_objs *f = user;
    const cJSON *c = find_obj(f->items, "DeviceClass", NULL, name);
    return c ? c : cJSON_GetObjectItemCaseSensitive(f->chart, name);   /* the driver chart's */
}

/* A pod whose GPUs are claims: its request from the claims and templates the file holds (model_dra_request), so
 * it counts as the GPU work it is. false when they are not there or not judged (the pod counts as CPU-only). */
static bool claim_request(const file_objs *f, const cJSON *pod, const model_request *pr, model_request *out) {
    const char *ns = meta_str(pod, "namespace");
    if (!ns) ns = "default";
    model_request dr = {0};
    const cJSON *rc;
    bool any = false;
    cJSON_ArrayForEach(rc, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "spec"), "resourceClaims")) {
        const cJSON *cn = cJSON_GetObjectItemCaseSensitive(rc, "resourceClaimName");
        const cJSON *tn = cJSON_GetObjectItemCaseSensitive(rc, "resourceClaimTemplateName");
        const cJSON *spec = NULL;
        if (cJSON_IsString(cn)) spec = cJSON_GetObjectItemCaseSensitive(find_obj(f->items, "ResourceClaim", ns, cn->valuestring), "spec");
        else if (cJSON_IsString(tn))
            spec = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(find_obj(f->items, "ResourceClaimTemplate", ns, tn->valuestring), "spec"), "spec");
        char why[256];
        model_dra_verdict v = spec ? model_dra_request(spec, file_class, (void *)f, &dr, why, sizeof why) : MODEL_DRA_UNJUDGED;
        if (v == MODEL_DRA_UNJUDGED) return false;
        any |= v == MODEL_DRA_JUDGED;
    }
    if (!any) return false;
    model_dra_request_of_pod(&dr, pr);
    *out = dr;
    return true;
}

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
    cJSON *chart = model_dra_chart_classes();
    if (!w || !chart) {
        snprintf(err, errlen, "out of memory");
        policy_workload_free(w);
        cJSON_Delete(chart);
        cJSON_Delete(root);
        return NULL;
    }
    file_objs f = {items, chart};
    int i = -1, pods = 0;
    const cJSON *pod;
    cJSON_ArrayForEach(pod, items) {
        i++;
        const char *kind = cJSON_IsObject(pod) ? kind_of(pod) : "Pod";
        /* what the pods' claims are made of: read when a pod names them */
        if (!strcmp(kind, "ResourceClaim") || !strcmp(kind, "ResourceClaimTemplate") || !strcmp(kind, "DeviceClass")) continue;
        model_request r;
        char why[256];
        bool ok = cJSON_IsObject(pod) && !strcmp(kind, "Pod") && model_request_from_pod(pod, &r, why, sizeof why) == 0;
        if (ok && !model_request_wants_gpu(&r)) claim_request(&f, pod, &r, &r);
        if (ok && reservation_delivery) model_request_for_reservation_delivery(&r);
        if (!ok || policy_workload_add(w, &r, 1, why, sizeof why) != 0) {
            snprintf(err, errlen, "items[%d]: %s", i,
                     !cJSON_IsObject(pod) || strcmp(kind, "Pod") != 0 ? "expected a Pod object (or a ResourceClaim, "
                     "ResourceClaimTemplate or DeviceClass its claims name)" : why);
            policy_workload_free(w);
            cJSON_Delete(chart);
            cJSON_Delete(root);
            return NULL;
        }
        pods++;
    }
    cJSON_Delete(chart);
    cJSON_Delete(root);
    if (policy_workload_finish(w, COVERAGE_PCT, err, errlen) != 0) {
        if (pods == 0) snprintf(err, errlen, "no pods in the workload");
        policy_workload_free(w);
        return NULL;
    }
    return w;
}

/* A claim's request into the workload (its shape; which path it takes is no part of a task type). */
typedef struct claim_add { policy_workload *w; int n; } claim_add;
static void add_claim(void *user, const model_request *r) {
    claim_add *c = user;
    if (policy_workload_add(c->w, r, 1, NULL, 0) == 0) c->n++;
}

policy_workload *ext_workload_from_state(const ext_state *st, bool reservation_delivery) {
    policy_workload *w = policy_workload_new();
    if (!w) return NULL;
    size_t it = 0;
    claim_add ca = {w, 0};
    ext_dra_each_request(ext_state_dra(st), add_claim, &ca);   /* pods whose GPUs are claims */
    int n = ca.n;
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
