/* test_ext_converge.c -- two ways a cache used to stay different from a fresh list of the same objects, both
 * found by the soak (tests/support/soak.c): a pod whose assignment annotation collided with a stale holding
 * kept a derived placement on other GPUs after the holding went (so the GPUs its device really uses looked
 * free), and an assumed pod that a relist no longer showed came back as a pending ghost when its assumption
 * expired.
 */
#include <stdlib.h>
#include <string.h>

#include "ext_helpers.h"
#include "extender/base/annotation.h"
#include "extender/mirror/state.h"

static void apply_text(ext_state *st, kube_kind kind, kube_event ev, const char *json) {
    cJSON *o = cJSON_Parse(json);
    ext_state_apply(st, kind, ev, o);
    cJSON_Delete(o);
}

static ext_state *cluster_state(void) {
    ext_state_config sc = {.standalone = false, .assume_ttl_ms = 1000};
    ext_state *st = ext_state_new(&sc);
    cJSON *n = demo_node_as("gpu-a100-whole", "n1");
    char *nj = cJSON_PrintUnformatted(n);
    cJSON_Delete(n);
    ext_state_on_event(st, KUBE_NODE, KUBE_RELIST, NULL);
    apply_text(st, KUBE_NODE, KUBE_ADDED, nj);
    ext_state_on_event(st, KUBE_NODE, KUBE_SYNCED, NULL);
    ext_state_on_event(st, KUBE_POD, KUBE_RELIST, NULL);
    ext_state_on_event(st, KUBE_POD, KUBE_SYNCED, NULL);
    free(nj);
    return st;
}

#define ANN_GPU2 "\"" EXT_ANN_ASSIGNMENT "\":\"{\\\"version\\\":1,\\\"node\\\":\\\"n1\\\",\\\"policy\\\":\\\"binpack\\\"," \
                 "\\\"grants\\\":[{\\\"gpu\\\":2,\\\"whole\\\":true,\\\"memoryMiB\\\":81920,\\\"computePermille\\\":1000}]}\""

TEST(ext_converge_annotation_wins_once_the_colliding_holding_is_gone) {
    ext_state *st = cluster_state();
    /* a holds GPU 2 (in a real cluster: a stale assumption, or a pod deleted while the watch was away) */
    char *a = pod_json("a", "uid-a", 0, "\"nvidia.com/gpu\":\"1\"", ANN_GPU2, "n1");
    char *b = pod_json("b", "uid-b", 0, "\"nvidia.com/gpu\":\"1\"", ANN_GPU2, "n1");
    apply_text(st, KUBE_POD, KUBE_ADDED, a);
    apply_text(st, KUBE_POD, KUBE_ADDED, b);   /* b's annotation collides: b is derived elsewhere */
    ext_state_lock(st);
    const ext_pod *pb = ext_state_pod(st, "uid-b");
    bool derived_before = pb && pb->holds && pb->derived && pb->a.grant[0].gpu != 2;
    ext_state_unlock(st);
    apply_text(st, KUBE_POD, KUBE_DELETED, a);
    ext_state_lock(st);
    pb = ext_state_pod(st, "uid-b");
    bool holds = pb && pb->holds, derived = pb && pb->derived;
    int gpu = pb ? pb->a.grant[0].gpu : -1;
    const ext_node *n = ext_state_node(st, "n1");
    int busy = 0;
    for (int g = 0; n && n->m && g < n->m->ngpus; g++) busy += !model_gpu_idle(&n->m->gpus[g]);
    ext_state_unlock(st);
    char why[256] = "";
    bool ok = all_nodes_consistent(st, why, sizeof why);
    ext_state_free(st);
    free(a);
    free(b);
    CHECK(derived_before);
    CHECK(holds);
    CHECK(!derived);
    CHECK_INT(gpu, 2);   /* the GPU its device was given, not the guess */
    CHECK_INT(busy, 1);  /* and the guessed GPU is free again */
    CHECK_MSG(ok, "%s", why);
}

TEST(ext_converge_assumed_pod_missing_from_a_relist_goes_when_it_expires) {
    ext_state *st = cluster_state();
    char *p = pod_json("p", "uid-p", 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL);
    apply_text(st, KUBE_POD, KUBE_ADDED, p);
    free(p);
    /* our bind: reserve, the POST succeeds, the watch has not confirmed it */
    ext_state_lock(st);
    const ext_node *n = ext_state_node(st, "n1");
    model_request req;
    model_assignment a;
    char err[256] = "";
    int got = ext_state_pod_request(st, "uid-p", &req);
    int fits = got == 0 ? model_fit(n->m, &req, &a, 1, err, sizeof err) : 0;
    int rc = fits > 0 ? ext_state_reserve(st, "uid-p", "default", "p", "n1", &req, &a, err, sizeof err) : -1;
    if (rc == 0) ext_state_bind_done(st, "uid-p", true);
    ext_state_unlock(st);
    /* the pod is deleted while the watch is away; the relist does not show it */
    ext_state_on_event(st, KUBE_POD, KUBE_RELIST, NULL);
    ext_state_on_event(st, KUBE_POD, KUBE_SYNCED, NULL);
    ext_state_lock(st);
    const ext_pod *pp = ext_state_pod(st, "uid-p");
    bool held_after_relist = pp && pp->holds && pp->phase == EXT_POD_ASSUMED;   /* the list may predate the bind */
    int expired = ext_state_expire(st, ext_now_ms() + 60000);
    pp = ext_state_pod(st, "uid-p");
    size_t left = ext_state_pod_count(st);
    ext_state_unlock(st);
    ext_state_free(st);
    CHECK_MSG(rc == 0, "reserve: %s", err);
    CHECK(held_after_relist);
    CHECK_INT(expired, 1);
    CHECK(pp == NULL);   /* gone, not a pending ghost */
    CHECK_INT(left, 0);
}
