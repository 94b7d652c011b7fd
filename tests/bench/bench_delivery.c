/* bench_delivery.c -- how fast a soft share gets its GPU, in-process against the fake API server and
 * the fake kubelet (tests/support) on loopback. Prints figures; it is not a test.
 *
 *   A  share onto an already reserved GPU: 300 MiB shares that binpack puts on a GPU whose reservation
 *      is ready (the ConfigMap can be written at once)
 *   B  share onto a new GPU: 60,000 MiB shares, each needing a GPU of its own (a reservation pod is
 *      created, admitted by the fake kubelet, publishes its UUID, then the ConfigMap is written)
 *
 * For each: the bind verb (filter already done, as kube-scheduler does it) p50/p99, and the time from
 * the bind's answer to the share's delivery ConfigMap holding NVIDIA_VISIBLE_DEVICES, p50/p99. The fake
 * kubelet looks for new pods every 10 ms, so B's delivery time includes up to 10 ms of that polling;
 * a real kubelet's admission, image pull and container start come on top in a cluster.
 *
 *   C  an idle cluster, as deploy/ runs tessera: two replicas of the real binary started from deploy/'s
 *      Deployment, leader election and fake kube-schedulers as deployed (tests/support/deployed_cluster.h).
 *      Per round, 8 shares (one per GPU) are bound; their reservations' image takes BENCH_IDLE_PULL_MS
 *      (default 3000) to pull, so each UUID arrives after the last scheduling call. Measured, with no verb
 *      called meanwhile: UUID published -> ConfigMap written (p50/p99; targets 1 s), and, after all shares of
 *      the round are deleted at once, last share gone -> reservation deleted (deploy/'s grace is 30 s;
 *      target grace + 2 s). BENCH_IDLE_ROUNDS rounds (default 3; 0 skips C): about 40 s each.
 *
 *   make build/bench/bench_delivery && build/bench/bench_delivery      (BENCH_SAMPLES=N, default 200)
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cjson/cJSON.h>

#include "extender/base/delivery.h"
#include "extender/base/events.h"
#include "kube/client.h"
#include "kube/log.h"
#include "extender/delivery/reservation.h"
#include "extender/mirror/state.h"
#include "extender/verbs.h"
#include "policy/policy.h"
#include "tests/unit/ext_proc.h"
#include "tests/support/deployed_cluster.h"
#include "tests/support/fake_apiserver.h"
#include "tests/support/fake_kubelet.h"

#define NS_RSV "tessera"
#define GPUS_PER_NODE 8

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void nap_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

typedef struct env {
    fake_api *api;
    fake_kubelet *kl;
    ext_state *st;
    kube_client *k;
    ext_events *ev;
    ext_rsv *rsv;
    ext_verbs v;
} env;

static void on_event(void *user, kube_kind kind, kube_event ev, const cJSON *obj) {
    env *e = user;
    ext_state_on_event(e->st, kind, ev, obj);
    ext_rsv_on_event(e->rsv, kind, ev, obj);
}

/* An A100-80GB node with 8 whole GPUs, as GPU feature discovery labels it. */
static void put_node(fake_api *api, const char *name) {
    char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-80GB\","
             "\"nvidia.com/gpu.count\":\"%d\",\"nvidia.com/gpu.memory\":\"81920\",\"nvidia.com/mig.strategy\":\"none\"}},"
             "\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"%d\"},\"allocatable\":{\"nvidia.com/gpu\":\"%d\"}}}",
             name, GPUS_PER_NODE, GPUS_PER_NODE, GPUS_PER_NODE);
    fake_api_put(api, "nodes", buf);
}

static int env_up(env *e, int nodes) {
    char err[512], url[128];
    memset(e, 0, sizeof *e);
    if (!(e->api = fake_api_start(0, err, sizeof err))) { fprintf(stderr, "fake API: %s\n", err); return -1; }
    e->kl = fake_kubelet_start(e->api);
    for (int i = 0; i < nodes; i++) {
        char n[32], pre[32];
        snprintf(n, sizeof n, "n%d", i);
        snprintf(pre, sizeof pre, "GPU-n%d", i);
        put_node(e->api, n);
        fake_kubelet_add_node(e->kl, n, "nvidia.com/gpu", GPUS_PER_NODE, pre);
    }
    fake_api_url(e->api, url, sizeof url);
    ext_state_config sc = {.standalone = false};
    snprintf(sc.reservation_ns, sizeof sc.reservation_ns, NS_RSV);
    e->st = ext_state_new(&sc);
    kube_config kc;
    kube_config_defaults(&kc);
    snprintf(kc.api_url, sizeof kc.api_url, "%s", url);
    if (!e->st || !(e->k = kube_new(&kc, err, sizeof err))) { fprintf(stderr, "client: %s\n", err); return -1; }
    ext_events_config ec;
    ext_events_config_defaults(&ec);
    e->ev = ext_events_start(e->k, &ec, err, sizeof err);
    ext_rsv_config rc;
    ext_rsv_config_defaults(&rc);
    snprintf(rc.ns, sizeof rc.ns, NS_RSV);
    snprintf(rc.image, sizeof rc.image, "registry.example/tessera:bench");
    rc.grace_ms = 600000;
    if (!(e->rsv = ext_rsv_new(&rc, e->st, e->k, e->ev, NULL, err, sizeof err))) { fprintf(stderr, "%s\n", err); return -1; }
    ext_verbs_init(&e->v, e->st, policy_find("binpack"), kube_bind_fn, e->k);
    e->v.events = e->ev;
    e->v.rsv = e->rsv;
    e->v.fraction_no_mps = true;
    if (kube_start(e->k, on_event, e, err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); return -1; }
    for (int i = 0; i < 1000 && !ext_state_ready(e->st); i++) nap_us(10000);
    if (!ext_state_ready(e->st)) { fprintf(stderr, "never synced\n"); return -1; }
    return ext_rsv_start(e->rsv, err, sizeof err);
}

static void env_down(env *e) {
    ext_rsv_stop(e->rsv);
    ext_events_stop(e->ev);
    kube_free(e->k);
    ext_rsv_free(e->rsv);
    ext_state_free(e->st);
    fake_kubelet_stop(e->kl);
    fake_api_free(e->api);
}

static char *share_pod(const char *name, int mib) {
    char *s = malloc(1024);
    snprintf(s, 1024,
             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\",\"uid\":\"uid-%s\",\"annotations\":"
             "{\"" EXT_DLV_ANN_DELIVERY "\":\"" EXT_DLV_CM_PREFIX "%s\"}},\"spec\":{\"schedulerName\":\"tessera-scheduler\","
             "\"containers\":[{\"name\":\"main\",\"image\":\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpumem\":\"%d\"}}}]},"
             "\"status\":{\"phase\":\"Pending\"}}",
             name, name, name, mib);
    return s;
}

static bool pod_seen(env *e, const char *uid) {
    ext_state_lock(e->st);
    bool seen = ext_state_pod(e->st, uid) != NULL;
    ext_state_unlock(e->st);
    return seen;
}

/* The node the filter picks first among all (binpack prefers the fullest that fits; any feasible is fine). */
static int filter_and_pick(env *e, const char *pod, int nodes, char *node, size_t len) {
    char *body = malloc(8192 + strlen(pod));
    size_t o = (size_t)sprintf(body, "{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":[", pod);
    for (int i = 0; i < nodes; i++) o += (size_t)sprintf(body + o, "%s\"n%d\"", i ? "," : "", i);
    sprintf(body + o, "]}");
    ext_reply r = {0};
    ext_verb_prioritize(&e->v, body, strlen(body), &r);
    cJSON *arr = r.body ? cJSON_Parse(r.body) : NULL;
    ext_reply_free(&r);
    ext_reply f = {0};
    ext_verb_filter(&e->v, body, strlen(body), &f);
    cJSON *fr = f.body ? cJSON_Parse(f.body) : NULL;
    ext_reply_free(&f);
    free(body);
    /* the best-scored node that passed the filter */
    int best = -1;
    const char *best_name = NULL;
    const cJSON *it, *ok = cJSON_GetObjectItem(fr, "NodeNames");
    cJSON_ArrayForEach(it, arr) {
        const char *h = cJSON_GetObjectItem(it, "Host")->valuestring;
        int sc = cJSON_GetObjectItem(it, "Score")->valueint;
        bool passed = false;
        const cJSON *n;
        cJSON_ArrayForEach(n, ok) if (!strcmp(n->valuestring, h)) passed = true;
        if (passed && sc > best) best = sc, best_name = h;
    }
    if (best_name) snprintf(node, len, "%s", best_name);
    cJSON_Delete(arr);
    cJSON_Delete(fr);
    return best_name ? 0 : -1;
}

/* Put the pod, let the watch show it, filter it, then time the bind and the delivery. */
static int one_share(env *e, const char *name, int mib, int nodes, double *bind_us, double *deliver_us, char *uuid,
                     size_t uuidlen) {
    char uid[128], node[64], body[512], cm[160];
    snprintf(uid, sizeof uid, "uid-%s", name);
    snprintf(cm, sizeof cm, EXT_DLV_CM_PREFIX "%s", name);
    char *pod = share_pod(name, mib);
    fake_api_put(e->api, "pods", pod);
    for (int i = 0; i < 2000 && !pod_seen(e, uid); i++) nap_us(500);
    int rc = filter_and_pick(e, pod, nodes, node, sizeof node);
    free(pod);
    if (rc < 0) { fprintf(stderr, "%s: no node fits\n", name); return -1; }
    snprintf(body, sizeof body, "{\"PodName\":\"%s\",\"PodNamespace\":\"default\",\"PodUID\":\"%s\",\"Node\":\"%s\"}",
             name, uid, node);
    ext_reply r = {0};
    double t0 = now_us();
    ext_verb_bind(&e->v, body, strlen(body), &r);
    double t1 = now_us();
    bool ok = r.body && strstr(r.body, "\"Error\":\"\"");
    if (!ok) fprintf(stderr, "%s: bind: %s\n", name, r.body ? r.body : "(no body)");
    ext_reply_free(&r);
    if (!ok) return -1;
    *bind_us = t1 - t0;
    for (;;) {
        char *c = fake_api_get(e->api, "configmaps", "default", cm);
        if (c) {
            cJSON *j = cJSON_Parse(c);
            const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "data"), EXT_DLV_ENV_VISIBLE);
            if (cJSON_IsString(v)) snprintf(uuid, uuidlen, "%s", v->valuestring);
            cJSON_Delete(j);
            free(c);
            break;
        }
        if (now_us() - t1 > 10e6) { fprintf(stderr, "%s: no ConfigMap after 10 s\n", name); return -1; }
        nap_us(200);
    }
    *deliver_us = now_us() - t1;
    return 0;
}

static int count_reservations(env *e) {
    char *all = fake_api_list(e->api, "pods");
    int n = 0;
    for (char *p = all; p && (p = strstr(p, "\"tessera.io/reservation\":\"true\"")); p++) n++;
    free(all);
    return n;
}

static void report(const char *what, double *bind, double *deliver, int n) {
    printf("  %-34s bind p50 %7.2f ms  p99 %7.2f ms   delivery p50 %7.2f ms  p99 %7.2f ms   (%d shares)\n", what,
           pct(bind, n, 0.5) / 1e3, pct(bind, n, 0.99) / 1e3, pct(deliver, n, 0.5) / 1e3, pct(deliver, n, 0.99) / 1e3, n);
}

/* C: one round in an idle deployed cluster: 8 shares bound, their UUIDs and ConfigMaps watched every 2 ms,
 * then all deleted at once and their reservations watched until gone. Appends UUID -> ConfigMap and last share
 * gone -> reservation deleted (ms); *calls: verb calls made between the last bind and the end. -1 on failure. */
static int idle_round(deployed_cluster *c, int round, double *uuid_cm, int *nuc, double *gone, int *ngone, int *calls) {
    enum { N = 8 };
    char uid[N][128], cm[N][256], cmv[N][128] = {{0}};
    double t_cm[N] = {0};
    struct { char name[256], uuid[128]; double t; } sr[N * 2];
    int nsr = 0, done = 0, nres = 0;
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "idle-%d-%d", round, i);
        if (!deployed_cluster_create_share(c, i % 2, name, "0.75", uid[i], sizeof uid[i], cm[i], sizeof cm[i])) {
            fprintf(stderr, "C: %s\n", c->err);
            return -1;
        }
    }
    int calls_bound = -1;
    for (double t0 = now_us(); done < N && now_us() - t0 < 60e6; nap_us(2000)) {
        cJSON *rs = deployed_cluster_reservations(c);
        nres = cJSON_GetArraySize(rs);
        if (calls_bound < 0 && nres == N) calls_bound = deployed_cluster_calls(c);   /* all bound by now */
        const cJSON *r;
        cJSON_ArrayForEach(r, rs) {
            const cJSON *meta = cJSON_GetObjectItem(r, "metadata");
            const cJSON *u = cJSON_GetObjectItem(cJSON_GetObjectItem(meta, "annotations"), EXT_RSV_ANN_UUID);
            const char *nm = cJSON_GetObjectItem(meta, "name")->valuestring;
            bool known = false;
            for (int k = 0; k < nsr; k++) known |= !strcmp(sr[k].name, nm);
            if (!cJSON_IsString(u) || known || nsr == N * 2) continue;
            snprintf(sr[nsr].name, sizeof sr[nsr].name, "%s", nm);
            snprintf(sr[nsr].uuid, sizeof sr[nsr].uuid, "%s", u->valuestring);
            sr[nsr++].t = now_us();
        }
        cJSON_Delete(rs);
        for (int i = 0; i < N; i++) {
            if (t_cm[i] > 0) continue;
            deployed_cluster_cm_uuid(c, cm[i], cmv[i], sizeof cmv[i]);
            if (cmv[i][0]) { t_cm[i] = now_us(); done++; }
        }
    }
    if (done < N) { fprintf(stderr, "C: %d of %d shares delivered in 60 s (%d reservations)\n", done, N, nres); return -1; }
    for (int i = 0; i < N; i++)
        for (int k = 0; k < nsr; k++)
            if (!strcmp(sr[k].uuid, cmv[i])) uuid_cm[(*nuc)++] = (t_cm[i] - sr[k].t) / 1e3;
    /* release: every share of the round goes at once */
    double t_del = now_us();
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "idle-%d-%d", round, i);
        fake_api_delete(c->api, "pods", "default", name);
    }
    double t_gone[N * 2] = {0};
    int left = nsr;
    for (; left > 0 && now_us() - t_del < 90e6; nap_us(2000)) {
        cJSON *rs = deployed_cluster_reservations(c);
        for (int k = 0; k < nsr; k++) {
            if (t_gone[k] > 0) continue;
            bool live = false;
            const cJSON *r;
            cJSON_ArrayForEach(r, rs)
                live |= !strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "metadata"), "name")->valuestring, sr[k].name);
            if (!live) { t_gone[k] = now_us(); gone[(*ngone)++] = (t_gone[k] - t_del) / 1e3; left--; }
        }
        cJSON_Delete(rs);
    }
    *calls += deployed_cluster_calls(c) - calls_bound;
    return left == 0 ? 0 : -1;
}

static void report_ms(const char *what, double *v, int n) {
    if (n <= 0) return;
    printf("  %-44s n=%-4d p50 %8.1f ms   p99 %8.1f ms   max %8.1f ms\n", what, n, pct(v, n, 0.50), pct(v, n, 0.99),
           pct(v, n, 1.0));
}

/* C: the idle deployed cluster (header). 0, 1 on failure, 2 when it cannot be set up here. */
static int bench_idle(int rounds) {
    char bin[700], dir[700];   /* beside build/bench/ */
    if (!sibling_binary_path("../tessera-extender", bin, sizeof bin) || !sibling_binary_path("../../deploy", dir, sizeof dir))
        return 2;
    char *node = NULL;
    {   /* the demo cluster's whole-A100 node, as the GPU node */
        extern const unsigned char sim_demo_cluster_json[];
        extern const size_t sim_demo_cluster_json_len;
        char *txt = strndup((const char *)sim_demo_cluster_json, sim_demo_cluster_json_len);
        cJSON *all = txt ? cJSON_Parse(txt) : NULL, *it;
        free(txt);
        cJSON_ArrayForEach(it, cJSON_GetObjectItem(all, "items")) {
            cJSON *meta = cJSON_GetObjectItem(it, "metadata");
            if (strcmp(cJSON_GetObjectItem(meta, "name")->valuestring, "gpu-a100-whole") != 0) continue;
            cJSON_ReplaceItemInObject(meta, "name", cJSON_CreateString("gpu-1"));
            node = cJSON_PrintUnformatted(it);
        }
        cJSON_Delete(all);
    }
    const char *p = getenv("BENCH_IDLE_PULL_MS");
    deployed_cluster_config cfg = {.extender_bin = bin, .deploy_dir = dir, .gpu_node_json = node, .gpus = 8,
                                   .uuid_prefix = "GPU-b3nc", .pull_ms = p ? atoi(p) : 3000};
    deployed_cluster c;
    if (!node || deployed_cluster_start(&c, &cfg) != 0) {
        fprintf(stderr, "C: cannot start the deployed cluster: %s\n", node ? c.err : "no demo node");
        if (node) deployed_cluster_stop(&c);
        free(node);
        return 2;
    }
    double *uc = calloc((size_t)rounds * 8, sizeof *uc), *gone = calloc((size_t)rounds * 16, sizeof *gone);
    int nuc = 0, ngone = 0, calls = 0, rc = 0;
    for (int r = 0; r < rounds && rc == 0; r++)
        if (idle_round(&c, r, uc, &nuc, gone, &ngone, &calls) != 0) rc = 1;
    const char *grace = deployed_extender_arg(c.d, "--reservation-grace");
    printf("C idle cluster, as deployed (2 replicas, leader election, deploy/'s args; grace %s s; %d verb calls "
           "while delivering and releasing)\n", grace ? grace : "?", calls);
    report_ms("UUID published -> ConfigMap written", uc, nuc);
    report_ms("last share gone -> reservation deleted", gone, ngone);
    deployed_cluster_stop(&c);
    free(uc);
    free(gone);
    free(node);
    return rc;
}

int main(void) {
    kube_log_set_level(KUBE_LOG_ERROR);
    const char *s = getenv("BENCH_SAMPLES");
    int samples = s && atoi(s) > 0 ? atoi(s) : 200;
    double *bind = calloc((size_t)samples, sizeof *bind), *deliver = calloc((size_t)samples, sizeof *deliver);
    char uuid[256], first[256];
    printf("bench_delivery: soft-share bind and delivery on the fake API server + fake kubelet (loopback)\n");

    /* A: one reservation made by a warm-up share, then every share lands on that GPU. */
    env e;
    if (env_up(&e, 1) != 0) return 1;
    double b0, d0;
    if (one_share(&e, "warm", 300, 1, &b0, &d0, first, sizeof first) != 0) return 1;
    int n = 0;
    for (int i = 0; i < samples && i < 250; i++) {
        char name[32];
        snprintf(name, sizeof name, "a%d", i);
        if (one_share(&e, name, 300, 1, &bind[n], &deliver[n], uuid, sizeof uuid) != 0) return 1;
        if (strcmp(uuid, first) != 0) { fprintf(stderr, "A: share %s went to %s, not the reserved %s\n", name, uuid, first); return 1; }
        n++;
    }
    int rsv_a = count_reservations(&e);
    env_down(&e);
    report("A onto an already reserved GPU", bind, deliver, n);
    if (rsv_a != 1) { fprintf(stderr, "A: %d reservations, expected 1\n", rsv_a); return 1; }

    /* B: each share needs a GPU of its own, so each bind makes a new reservation. */
    int nodes = (samples + GPUS_PER_NODE - 1) / GPUS_PER_NODE;
    if (env_up(&e, nodes) != 0) return 1;
    n = 0;
    for (int i = 0; i < samples; i++) {
        char name[32];
        snprintf(name, sizeof name, "b%d", i);
        if (one_share(&e, name, 60000, nodes, &bind[n], &deliver[n], uuid, sizeof uuid) != 0) return 1;
        n++;
    }
    int rsv_b = count_reservations(&e);
    int doubles = fake_kubelet_double_holds(e.kl);
    env_down(&e);
    report("B onto a new GPU (new reservation)", bind, deliver, n);
    printf("  B made %d reservations for %d shares; devices held twice: %d\n", rsv_b, n, doubles);
    free(bind);
    free(deliver);
    if (rsv_b != n || doubles != 0) return 1;

    const char *r = getenv("BENCH_IDLE_ROUNDS");
    int rounds = r ? atoi(r) : 3;
    return rounds > 0 && bench_idle(rounds) == 1 ? 1 : 0;
}
