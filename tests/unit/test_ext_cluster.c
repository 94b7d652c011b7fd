/* test_ext_cluster.c -- cluster mode end to end on loopback: the real API client (kube.c)
 * lists and watches the fake API server into the cache, a bind posts a Binding that carries
 * the assignment annotation, the watch confirms it, and the cache rebuilt from the API by a
 * fresh extender equals the one that bound.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../support/fake_apiserver.h"
#include "ext_helpers.h"
#include "extender/base/annotation.h"
#include "kube/client.h"

static int kube_bind_fn(void *user, const char *ns, const char *name, const char *uid, const char *node,
                        const cJSON *annotations, char *err, size_t errlen) {
    int code = kube_bind(user, ns, name, uid, node, annotations, err, errlen);
    return code == 200 || code == 201 ? 0 : -1;
}

static bool wait_for(bool (*cond)(void *), void *arg) { return WAIT_FOR(cond(arg)); }

static bool is_ready(void *st) { return ext_state_ready(st); }
static bool pod_bound(void *st) {
    ext_state_lock(st);
    const ext_pod *p = ext_state_pod(st, "uid-c1");
    bool b = p && p->phase == EXT_POD_BOUND;
    ext_state_unlock(st);
    return b;
}

typedef struct ext_run { ext_state *st; kube_client *k; } ext_run;

static bool run_start(ext_run *r, const char *url) {
    ext_state_config sc = {.standalone = false};
    r->st = ext_state_new(&sc);
    kube_config kc;
    kube_config_defaults(&kc);
    snprintf(kc.api_url, sizeof kc.api_url, "%s", url);
    char err[256];
    r->k = kube_new(&kc, err, sizeof err);
    return r->k && kube_start(r->k, ext_state_on_event, r->st, err, sizeof err) == 0 && wait_for(is_ready, r->st);
}

static void run_stop(ext_run *r) {
    kube_free(r->k);
    ext_state_free(r->st);
}

/* (uid, GPU index) of every holding pod, as text, for comparing two caches. */
static void holdings(ext_state *st, char *out, size_t len) {
    size_t off = 0, it = 0;
    out[0] = 0;
    ext_state_lock(st);
    const ext_pod *p;
    while ((p = ext_state_pod_next(st, &it)) && off < len)
        if (p->holds) off += (size_t)snprintf(out + off, len - off, "%s@%s/%d ", p->uid, p->node, p->a.grant[0].gpu);
    ext_state_unlock(st);
}

TEST(ext_cluster_bind_through_api_and_rebuild_after_restart) {
    char err[256], url[128];
    fake_api *api = fake_api_start(0, err, sizeof err);
    CHECK_MSG(api, "%s", err);
    fake_api_url(api, url, sizeof url);
    cJSON *node = demo_node_as("gpu-a100-whole", "n1");
    char *nj = cJSON_PrintUnformatted(node);
    cJSON_Delete(node);
    fake_api_put(api, "nodes", nj);
    free(nj);
    char *other = pod_json("other", "uid-o", 0, "\"nvidia.com/gpu\":\"1\"", NULL, "n1");   /* default scheduler's */
    char *pend = pod_json("c1", "uid-c1", 0, "\"nvidia.com/gpumem\":\"30000\"", NULL, NULL);
    fake_api_put(api, "pods", other);
    fake_api_put(api, "pods", pend);
    free(other);
    ext_run a;
    bool started = run_start(&a, url);
    ext_verbs v;
    ext_verbs_init(&v, a.st, NULL, kube_bind_fn, a.k);
    const char *names[] = {"n1"};
    char *args = args_names(pend, names, 1);
    free(pend);
    cJSON *f = call_verb(&v, ext_verb_filter, args, NULL);
    int npass = cJSON_GetArraySize(cJSON_GetObjectItem(f, "NodeNames"));
    cJSON_Delete(f);
    free(args);
    char berr[512] = "?";
    if (started) bind_pod(&v, "c1", "uid-c1", "n1", berr, sizeof berr);
    bool confirmed = started && wait_for(pod_bound, a.st);
    char *stored = fake_api_get(api, "pods", "default", "c1");
    cJSON *sp = stored ? cJSON_Parse(stored) : NULL;
    free(stored);
    const cJSON *nn = cJSON_GetObjectItem(cJSON_GetObjectItem(sp, "spec"), "nodeName");
    const cJSON *an = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(sp, "metadata"), "annotations"),
                                          EXT_ANN_ASSIGNMENT);
    bool on_node = cJSON_IsString(nn) && !strcmp(nn->valuestring, "n1") && cJSON_IsString(an);
    cJSON_Delete(sp);
    char h1[512], h2[512];
    holdings(a.st, h1, sizeof h1);
    run_stop(&a);
    /* A restarted extender rebuilds the same holdings from the API alone. */
    ext_run b;
    bool restarted = run_start(&b, url);
    holdings(b.st, h2, sizeof h2);
    char why[256] = "";
    bool consistent = all_nodes_consistent(b.st, why, sizeof why);
    run_stop(&b);
    fake_api_free(api);
    CHECK(started);
    CHECK_INT(npass, 1);
    CHECK_STR(berr, "");
    CHECK(confirmed);
    CHECK(on_node);
    CHECK(restarted);
    CHECK_CONTAINS(h1, "uid-c1@n1/1");   /* the foreign pod holds GPU 0 whole (first fit), so the share goes next door */
    CHECK_CONTAINS(h1, "uid-o@n1/0");
    CHECK_INT((int)strlen(h1), (int)strlen(h2));
    CHECK_CONTAINS(h2, "uid-c1@n1/1");
    CHECK_CONTAINS(h2, "uid-o@n1/0");
    CHECK_MSG(consistent, "%s", why);
}
