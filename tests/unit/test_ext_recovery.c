/* test_ext_recovery.c -- rebuilding the cache trusts facts before guesses: every pod whose
 * tessera.io/assignment is valid is placed before tessera guesses (model_fit) the GPUs of pods
 * that carry none, whatever order the API lists them in. Seen after a kill -9: pods bound by
 * someone else were guessed onto GPUs 0..k first, and the annotated pods that really hold those
 * GPUs were then reported annotation-invalid and over-committed.
 *
 * The fake API server lists pods in key order (namespace/name), so naming the pods after a
 * shuffled position controls the order the real list delivers them in.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../support/fake_apiserver.h"
#include "ext_helpers.h"
#include "extender/base/annotation.h"
#include "kube/client.h"
#include "log_capture.h"

#define RC_NODE "gpu-a100-whole"   /* 8 x A100 80GB, whole GPUs */
#define RC_ANNOTATED 4             /* pods that hold GPUs 0..3 by annotation (what a guess would take first) */
#define RC_FOREIGN 4               /* whole-GPU pods another scheduler bound: no annotation */
#define RC_PODS (RC_ANNOTATED + RC_FOREIGN)

/* Pod spec i (0..RC_PODS-1) named `name`: the first RC_ANNOTATED carry an assignment of GPU i. */
static char *rc_pod(int i, const char *name) {
    char uid[32], ann[512] = "";
    snprintf(uid, sizeof uid, "uid-rc-%d", i);
    if (i < RC_ANNOTATED) {
        char val[256];
        snprintf(val, sizeof val, "{\"version\":1,\"node\":\"" RC_NODE "\",\"policy\":\"binpack\",\"grants\":[{\"gpu\":%d,"
                 "\"whole\":true,\"memoryMiB\":81920,\"computePermille\":1000}]}", i);
        cJSON *s = cJSON_CreateString(val);
        char *q = cJSON_PrintUnformatted(s);
        snprintf(ann, sizeof ann, "\"" EXT_ANN_ASSIGNMENT "\":%s", q);
        free(q);
        cJSON_Delete(s);
    }
    return pod_json(name, uid, 0, "\"nvidia.com/gpu\":\"1\"", ann, RC_NODE);
}

/* order[k] = the pod spec listed k-th. */
static void rc_shuffle(int *order, unsigned seed) {
    for (int i = 0; i < RC_PODS; i++) order[i] = i;
    for (int i = RC_PODS - 1; i > 0; i--) {
        int j = (int)(rand_r(&seed) % (unsigned)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* Every annotated pod holds exactly its annotated GPU, every foreign pod holds a GPU (guessed),
 * nothing is over-committed; "" or what is wrong. */
static void rc_verify(ext_state *st, char *why, size_t len) {
    why[0] = 0;
    ext_state_lock(st);
    for (int i = 0; i < RC_PODS && !why[0]; i++) {
        char uid[32];
        snprintf(uid, sizeof uid, "uid-rc-%d", i);
        const ext_pod *p = ext_state_pod(st, uid);
        if (!p) snprintf(why, len, "%s missing", uid);
        else if (p->overcommitted) snprintf(why, len, "%s over-committed", uid);
        else if (!p->holds) snprintf(why, len, "%s holds nothing", uid);
        else if (i < RC_ANNOTATED && (p->derived || p->a.ngrants != 1 || p->a.grant[0].gpu != i))
            snprintf(why, len, "%s: annotation says GPU %d, holds GPU %d (derived %d)", uid, i, p->a.grant[0].gpu,
                     p->derived);
    }
    ext_state_unlock(st);
}

static bool rc_ready(ext_state *st) { return WAIT_FOR(ext_state_ready(st)); }

/* The real list path: the client lists the fake API's pods in the shuffled order. */
TEST(ext_recovery_list_places_valid_assignments_before_guesses_any_order) {
    /* seed 0 is the adversarial order: every foreign pod listed before every annotated one */
    for (unsigned seed = 0; seed < 8; seed++) {
        char err[256], url[128];
        int order[RC_PODS];
        if (seed == 0)
            for (int k = 0; k < RC_PODS; k++) order[k] = (k + RC_ANNOTATED) % RC_PODS;
        else
            rc_shuffle(order, seed * 2654435761u);
        fake_api *api = fake_api_start(0, err, sizeof err);
        CHECK_MSG(api, "fake api: %s", err);
        cJSON *node = demo_node_as(RC_NODE, RC_NODE);
        char *ntxt = cJSON_PrintUnformatted(node);
        fake_api_put(api, "nodes", ntxt);
        free(ntxt);
        cJSON_Delete(node);
        for (int k = 0; k < RC_PODS; k++) {
            char name[32];
            snprintf(name, sizeof name, "p%02d", k);   /* key order = list order */
            char *pod = rc_pod(order[k], name);
            fake_api_put(api, "pods", pod);
            free(pod);
        }
        fake_api_url(api, url, sizeof url);
        logcap_start(KUBE_LOG_INFO);
        ext_state_config sc = {.standalone = false};
        ext_state *st = ext_state_new(&sc);
        kube_config kc;
        kube_config_defaults(&kc);
        snprintf(kc.api_url, sizeof kc.api_url, "%s", url);
        kube_client *k = kube_new(&kc, err, sizeof err);
        bool started = k && kube_start(k, ext_state_on_event, st, err, sizeof err) == 0;
        bool ready = started && rc_ready(st);
        char why[256];
        rc_verify(st, why, sizeof why);
        int invalid = logcap_count("annotation-invalid", NULL, NULL), over = logcap_count("event=overcommitted", NULL, NULL);
        kube_free(k);
        ext_state_free(st);
        logcap_stop();
        fake_api_free(api);
        CHECK_MSG(ready, "seed %u: not ready (%s)", seed, err);
        CHECK_MSG(!why[0], "seed %u: %s", seed, why);
        CHECK_MSG(invalid == 0 && over == 0, "seed %u: %d annotation-invalid, %d overcommitted lines", seed, invalid, over);
    }
}

/* The pods arrive before their node (the two lists race after a restart): the node's arrival
 * places the annotated pods first, whether the pod relist is still running or already done. */
TEST(ext_recovery_node_after_pods_places_valid_assignments_first) {
    for (int synced_first = 0; synced_first < 2; synced_first++) {
        ext_state_config sc = {.standalone = false};
        ext_state *st = ext_state_new(&sc);
        logcap_start(KUBE_LOG_INFO);
        ext_state_on_event(st, KUBE_POD, KUBE_RELIST, NULL);
        for (int k = 0; k < RC_PODS; k++) {   /* foreign pods first */
            char name[32];
            snprintf(name, sizeof name, "p%02d", k);
            char *pod = rc_pod((k + RC_ANNOTATED) % RC_PODS, name);
            cJSON *o = cJSON_Parse(pod);
            ext_state_on_event(st, KUBE_POD, KUBE_ADDED, o);
            cJSON_Delete(o);
            free(pod);
        }
        if (synced_first) ext_state_on_event(st, KUBE_POD, KUBE_SYNCED, NULL);
        cJSON *node = demo_node_as(RC_NODE, RC_NODE);
        ext_state_on_event(st, KUBE_NODE, KUBE_RELIST, NULL);
        ext_state_on_event(st, KUBE_NODE, KUBE_ADDED, node);
        ext_state_on_event(st, KUBE_NODE, KUBE_SYNCED, NULL);
        cJSON_Delete(node);
        if (!synced_first) ext_state_on_event(st, KUBE_POD, KUBE_SYNCED, NULL);
        char why[256];
        rc_verify(st, why, sizeof why);
        int invalid = logcap_count("annotation-invalid", NULL, NULL), over = logcap_count("event=overcommitted", NULL, NULL);
        bool ready = ext_state_ready(st);
        ext_state_free(st);
        logcap_stop();
        CHECK(ready);
        CHECK_MSG(!why[0], "pods synced %s the node: %s", synced_first ? "before" : "after", why);
        CHECK_MSG(invalid == 0 && over == 0, "%d annotation-invalid, %d overcommitted lines", invalid, over);
    }
}

/* The watch path is unchanged: a foreign pod that arrives on the watch is guessed at once. */
TEST(ext_recovery_watch_guesses_at_once) {
    ext_state_config sc = {.standalone = false};
    ext_state *st = ext_state_new(&sc);
    cJSON *node = demo_node_as(RC_NODE, RC_NODE);
    ext_state_on_event(st, KUBE_NODE, KUBE_RELIST, NULL);
    ext_state_on_event(st, KUBE_NODE, KUBE_ADDED, node);
    ext_state_on_event(st, KUBE_NODE, KUBE_SYNCED, NULL);
    cJSON_Delete(node);
    ext_state_on_event(st, KUBE_POD, KUBE_RELIST, NULL);
    ext_state_on_event(st, KUBE_POD, KUBE_SYNCED, NULL);
    char *pod = rc_pod(RC_PODS - 1, "late");
    cJSON *o = cJSON_Parse(pod);
    ext_state_on_event(st, KUBE_POD, KUBE_ADDED, o);
    cJSON_Delete(o);
    free(pod);
    ext_state_lock(st);
    const ext_pod *p = ext_state_pod(st, "uid-rc-7");
    bool ok = p && p->holds && p->derived && p->a.grant[0].gpu == 0;
    ext_state_unlock(st);
    ext_state_free(st);
    CHECK_MSG(ok, "a watched foreign pod is guessed onto GPU 0 at once");
}
