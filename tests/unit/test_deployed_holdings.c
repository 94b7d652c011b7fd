/* test_deployed_holdings.c -- the node agent's holdings record through tessera as `kubectl apply -k deploy/` runs
 * it (tests/support/deployed_cluster.h: two replicas, their kube-schedulers, the fake kubelet). The agent
 * itself is not run here: the test writes on the Node, as the agent would (a merge PATCH of the tessera.io/holdings
 * annotation), the record of what the fake kubelet really handed out -- its device plugin picks at random, so not
 * what tessera bound. Every replica's model follows (/debug/state), the metric counts each disagreement once, the
 * log says it once however many watch events repeat it, and the next pod is bound to the GPU the kubelet freed.
 */
#include <signal.h>
#include <stdint.h>
#include <time.h>

#include "agent/holdings.h"
#include "agent/protowire.h"
#include "ext_proc.h"
#include "ext_helpers.h"
#include "extender/base/annotation.h"
#include "tests/support/deployed_cluster.h"
#include "tests/support/fake_podresources.h"

#define NODE "gpu-h"
#define PREFIX "GPU-hold"   /* the fake device plugin's ids are PREFIX-<i>; the node's UUIDs say the same */

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void pause_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The demo's 8 x A100 node cut to 3 GPUs, with the tessera.io/gpus UUIDs the node agent publishes. */
static char *node_json(void) {
    cJSON *n = demo_node_as("gpu-a100-whole", NODE);
    cJSON *meta = cJSON_GetObjectItem(n, "metadata"), *st = cJSON_GetObjectItem(n, "status");
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(meta, "labels"), "nvidia.com/gpu.count", cJSON_CreateString("3"));
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(st, "allocatable"), "nvidia.com/gpu", cJSON_CreateString("3"));
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(st, "capacity"), "nvidia.com/gpu", cJSON_CreateString("3"));
    cJSON *ann = cJSON_GetObjectItem(meta, "annotations");
    if (!ann) ann = cJSON_AddObjectToObject(meta, "annotations");
    cJSON_AddStringToObject(ann, "tessera.io/gpus",
                            "[{\"index\":0,\"uuid\":\"" PREFIX "-0\"},{\"index\":1,\"uuid\":\"" PREFIX "-1\"},"
                            "{\"index\":2,\"uuid\":\"" PREFIX "-2\"}]");
    char *s = cJSON_PrintUnformatted(n);
    cJSON_Delete(n);
    return s;
}

/* A whole-GPU pod created through replica 0's webhook; waits until it is bound (false after 20 s). */
static bool create_whole(deployed_cluster *c, const char *name) {
    char pod[1024];
    snprintf(pod, sizeof pod,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\"},"
             "\"spec\":{\"schedulerName\":\"%s\",\"containers\":[{\"name\":\"app\",\"image\":"
             "\"nvidia/cuda:12.4.1-base-ubuntu22.04\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
             name, c->d->scheduler_name);
    cJSON *stored = deployed_create_pod(c->api, &c->rep[0], pod, c->err, sizeof c->err);
    if (!stored) return false;
    cJSON_Delete(stored);
    for (int64_t t0 = mono_ms(); mono_ms() - t0 < TEST_PATIENCE_MS; pause_ms(20))
        if (deployed_cluster_bound(c, name)) return true;
    snprintf(c->err, sizeof c->err, "pod %s never bound", name);
    return false;
}

/* The GPU index tessera's bind wrote in the pod's assignment annotation, -1 if none. */
static int bound_gpu(deployed_cluster *c, const char *name) {
    cJSON *p = deployed_cluster_get(c, "pods", "default", name);
    const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "annotations"),
                                         EXT_ANN_ASSIGNMENT);
    cJSON *j = cJSON_IsString(a) ? cJSON_Parse(a->valuestring) : NULL;
    const cJSON *g = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "grants"), 0), "gpu");
    int gpu = cJSON_IsNumber(g) ? g->valueint : -1;
    cJSON_Delete(j);
    cJSON_Delete(p);
    return gpu;
}

static const char *str_of(const cJSON *o, const char *key) {
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, key));
    return s ? s : "";
}

/* The "assignment" /debug/state of replica r shows for pod name on NODE ("" if none). */
static void debug_assignment(deployed_cluster *c, int r, const char *name, char *buf, size_t len) {
    long code = 0;
    cJSON *d = http(c->rep[r].verbs_port, "/debug/state", NULL, &code), *n, *p;
    buf[0] = 0;
    cJSON_ArrayForEach(n, cJSON_GetObjectItem(d, "nodes")) {
        if (strcmp(str_of(n, "name"), NODE)) continue;
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(n, "pods"))
            if (!strcmp(str_of(p, "name"), name)) snprintf(buf, len, "%s", str_of(p, "assignment"));
    }
    cJSON_Delete(d);
}

/* Until replica r's /debug/state shows pod name on "GPU <gpu> whole" (false after wait.h's patience). */
static bool wait_assignment(deployed_cluster *c, int r, const char *name, int gpu) {
    char want[64], got[256] = "";
    snprintf(want, sizeof want, "GPU %d whole", gpu);
    for (int64_t t0 = mono_ms(); mono_ms() - t0 < TEST_PATIENCE_MS; pause_ms(20)) {
        debug_assignment(c, r, name, got, sizeof got);
        if (!strcmp(got, want)) return true;
    }
    snprintf(c->err, sizeof c->err, "replica %d: pod %s shows \"%s\", not \"%s\"", r, name, got, want);
    return false;
}

/* The value of one sample line of replica r's /metrics ("name{labels}"), -1 when absent. */
static long long metric(deployed_cluster *c, int r, const char *sample) {
    long code = 0;
    char *t = http_text(c->rep[r].ops_port, "/metrics", &code);
    const char *s = t;
    long long v = -1;
    size_t n = strlen(sample);
    while (s && (s = strstr(s, sample))) {
        if ((s == t || s[-1] == '\n') && s[n] == ' ') {
            v = atoll(s + n + 1);
            break;
        }
        s += n;
    }
    free(t);
    return v;
}

/* deploy/'s cluster with the 3-GPU node; 0, or -1 with c->err (stop c all the same). */
static int start(deployed_cluster *c) {
    char bin[1024], dir[640], probe[700] = "";
    if (extender_path(bin, sizeof bin) && sibling_binary_path("../deploy", dir, sizeof dir))
        snprintf(probe, sizeof probe, "%s/kustomization.yaml", dir);
    if (!probe[0] || access(probe, R_OK) != 0) {
        memset(c, 0, sizeof *c);
        snprintf(c->err, sizeof c->err, "no build/tessera-extender or deploy/ next to the test binary");
        return -1;
    }
    char *nj = node_json();
    deployed_cluster_config cfg = {.extender_bin = bin, .deploy_dir = dir, .gpu_node_json = nj, .gpus = 3,
                                   .uuid_prefix = PREFIX};
    int rc = deployed_cluster_start(c, &cfg);
    free(nj);
    return rc;
}

/* The record the node agent would write from what the fake kubelet really handed out (its device plugin picks
 * at random here, so its choice differs from tessera's), for pods default/<names[i]>. */
static void write_kubelet_record(deployed_cluster *c, const char *const *names, int n) {
    /* what the kubelet's Pod Resources List says (fake_podresources.h's text form), written by the agent's own code */
    char spec[2048] = "";
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        cJSON *p = deployed_cluster_get(c, "pods", "default", names[i]);
        const char *uid = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "uid"));
        char *devs = uid ? fake_kubelet_devices(c->kl, uid) : NULL;
        cJSON_Delete(p);
        if (devs && off < sizeof spec)
            off += (size_t)snprintf(spec + off, sizeof spec - off, "default/%s app nvidia.com/gpu %s\n", names[i], devs);
        free(devs);
    }
    agent_pr_list l;
    char err[256];
    int prc = fake_pr_parse_pods(spec, &l, err, sizeof err);   /* on error l is freed already */
    char *text = prc == 0 ? agent_holdings_from_list(&l) : NULL;
    if (prc == 0) agent_pr_list_free(&l);
    cJSON *patch = cJSON_CreateObject();
    cJSON_AddStringToObject(cJSON_AddObjectToObject(cJSON_AddObjectToObject(patch, "metadata"), "annotations"),
                            "tessera.io/holdings", text ? text : "");
    char *pt = cJSON_PrintUnformatted(patch);
    fake_api_patch(c->api, "nodes", NULL, NODE, pt);
    free(pt);
    free(text);
    cJSON_Delete(patch);
}

/* The index of the device the fake kubelet gave the pod ("GPU-hold-<i>"), -1 if none. */
static int kubelet_gpu(deployed_cluster *c, const char *name) {
    cJSON *p = deployed_cluster_get(c, "pods", "default", name);
    const char *uid = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "metadata"), "uid"));
    char *devs = uid ? fake_kubelet_devices(c->kl, uid) : NULL;
    cJSON_Delete(p);
    int g = devs && !strncmp(devs, PREFIX "-", strlen(PREFIX) + 1) ? atoi(devs + strlen(PREFIX) + 1) : -1;
    free(devs);
    return g;
}

/* Until the fake kubelet has handed the pod a device (false after wait.h's patience). */
static bool wait_admitted(deployed_cluster *c, const char *name) {
    for (int64_t t0 = mono_ms(); mono_ms() - t0 < TEST_PATIENCE_MS; pause_ms(20))
        if (kubelet_gpu(c, name) >= 0) return true;
    snprintf(c->err, sizeof c->err, "the kubelet never gave %s a device", name);
    return false;
}

/* The node agent's record made from the kubelet's real choices (a device plugin that picks at random): after it is
 * written every pod's GPU in tessera's model is the one the kubelet gave it, and when a pod that the kubelet put
 * elsewhere than tessera bound it leaves, the next pod is bound to the GPU it really freed. */
TEST(deployed_holdings_model_follows_the_kubelets_real_choices) {
    deployed_cluster c;
    int rc = start(&c);
    if (rc == 0) fake_kubelet_set_random(c.kl, 7);
    const char *names[] = {"a", "b", "c"};
    bool ok = rc == 0;
    int bound[3] = {-1, -1, -1}, real[3] = {-1, -1, -1}, leaver = -1, tessera_d = -1, kubelet_d = -1;
    for (int i = 0; ok && i < 3; i++) ok = create_whole(&c, names[i]) && wait_admitted(&c, names[i]);
    for (int i = 0; ok && i < 3; i++) {
        bound[i] = bound_gpu(&c, names[i]);
        real[i] = kubelet_gpu(&c, names[i]);
        if (leaver < 0 && bound[i] != real[i]) leaver = i;
    }
    if (ok) write_kubelet_record(&c, names, 3);
    for (int r = 0; ok && r < 2; r++)
        for (int i = 0; ok && i < 3; i++) ok = wait_assignment(&c, r, names[i], real[i]);
    /* more watch events about the node, the record unchanged: nothing counted or said again */
    for (int i = 0; ok && i < 3; i++) {
        char patch[128];
        snprintf(patch, sizeof patch, "{\"metadata\":{\"labels\":{\"example.com/tick\":\"%d\"}}}", i);
        fake_api_patch(c.api, "nodes", NULL, NODE, patch);
        pause_ms(300);
    }
    int moved = 0;
    for (int i = 0; i < 3; i++) moved += bound[i] != real[i];
    long long applied_r[2] = {-1, -1}, logged_r[2] = {-1, -1}, standing = -1, nodes = -1;
    for (int r = 0; ok && r < 2; r++) {
        applied_r[r] = metric(&c, r, "tessera_holdings_mismatches_total{kind=\"applied\"}");
        logged_r[r] = deployed_replica_log_count(&c.rep[r], "event=holdings-mismatch", "action=applied");
    }
    if (ok) {
        standing = metric(&c, 0, "tessera_holdings_disagreements");
        nodes = metric(&c, 0, "tessera_holdings_nodes");
    }
    /* the leaver goes: the only GPU free is the one the kubelet had given it, not the one tessera had bound */
    if (ok && leaver >= 0) {
        /* A pod deleted with a grace period stays in the API until its kubelet has stopped it and freed its device:
         * only then do the schedulers see its GPU free. fake_api_delete removes it at once (a forced delete), so wait
         * for the kubelet as the API server would, or d may reach the kubelet before the device is free. */
        cJSON *lp = deployed_cluster_get(&c, "pods", "default", names[leaver]);
        const char *u = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(lp, "metadata"), "uid"));
        char luid[64];
        snprintf(luid, sizeof luid, "%s", u ? u : "");
        cJSON_Delete(lp);
        fake_api_delete(c.api, "pods", "default", names[leaver]);
        for (int64_t t0 = mono_ms(); mono_ms() - t0 < TEST_PATIENCE_MS; pause_ms(20)) {
            char *held = fake_kubelet_devices(c.kl, luid);
            free(held);
            if (!held) break;
        }
        const char *left[2];
        for (int i = 0, k = 0; i < 3; i++)
            if (i != leaver) left[k++] = names[i];
        write_kubelet_record(&c, left, 2);
        ok = create_whole(&c, "d") && wait_admitted(&c, "d");
        tessera_d = ok ? bound_gpu(&c, "d") : -1;
        kubelet_d = ok ? kubelet_gpu(&c, "d") : -1;
    }
    long long refused = metric(&c, 0, "tessera_holdings_mismatches_total{kind=\"refused\"}");
    long long applied = metric(&c, 0, "tessera_holdings_mismatches_total{kind=\"applied\"}");
    int doubles = c.kl ? fake_kubelet_double_holds(c.kl) : -1;
    char err[1024];
    snprintf(err, sizeof err, "%s", c.err);
    deployed_cluster_stop(&c);
    CHECK_MSG(ok, "%s", err);
    printf("    bound by tessera to %d %d %d, given by the kubelet %d %d %d; d: tessera %d, kubelet %d\n", bound[0],
           bound[1], bound[2], real[0], real[1], real[2], tessera_d, kubelet_d);
    CHECK_MSG(leaver >= 0, "the kubelet's seed gave every pod tessera's GPU: the test shows nothing; change the seed");
    CHECK(applied >= 2);   /* a permutation of 3 that is not the identity moves at least 2 */
    for (int r = 0; r < 2; r++) {
        CHECK_INT(applied_r[r], moved);   /* each pod the kubelet put elsewhere, once */
        CHECK_INT(logged_r[r], moved);    /* once, though the Node came four times */
    }
    CHECK_INT(standing, 0);
    CHECK_INT(nodes, 1);
    CHECK_INT(tessera_d, real[leaver]);
    CHECK_INT(kubelet_d, real[leaver]);
    CHECK_INT(refused, 0);
    CHECK_INT(doubles, 0);
}
