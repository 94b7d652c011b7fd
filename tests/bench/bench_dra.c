/* bench_dra.c -- what Dynamic Resource Allocation costs the extender, in process. Prints figures; not a test.
 *
 *   A  a cluster of N DRA nodes (8 A100-40GB each, one ResourceSlice per node as NVIDIA's driver publishes)
 *      and 4 allocated claims per node, applied as a relist delivers them: time per slice and per claim event
 *      (each rebuilds its node from the Node model, its devices and its claims)
 *   B  a claim pod (2 GPUs from a template's claim) against the device-plugin pod asking nvidia.com/gpu: 2, each
 *      on its own cluster of K nodes x 8 A100-40GB with 4 GPUs taken per node (claims there, pods here), K = 100,
 *      1,000, 5,000: filter and prioritize (binpack; the verbs split the nodes over two threads as in production),
 *      warm (the same pod again: the answer cache holds) and cold (every call a new shape: a new CPU request), p50
 *      and p99 per cell and the DRA/device-plugin ratio of the p50s. The cells are alternated round by round in
 *      one run, so machine noise hits both alike.
 *
 *   make build/bench/bench_dra && build/bench/bench_dra   (BENCH_DRA_NODES=N: part A's N, default 1000;
 *   BENCH_DRA_KS=100,1000 the Ks of B; BENCH_DRA_ROUNDS=R rounds per cell, default 40)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <time.h>

#include "kube/log.h"
#include "extender/mirror/state.h"
#include "extender/verbs.h"
#include "policy/policy.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void apply(ext_state *st, kube_kind kind, const char *json) {
    cJSON *o = cJSON_Parse(json);
    ext_state_apply(st, kind, KUBE_ADDED, o);
    cJSON_Delete(o);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static const char *GPU_CLASS =
    "{\"metadata\":{\"name\":\"gpu.nvidia.com\"},\"spec\":{\"selectors\":[{\"cel\":{\"expression\":"
    "\"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'\"}}]}}";

/* K DRA nodes dra-<i> (8 A100-40GB in one ResourceSlice each) with 4 allocated one-GPU claims per node; the time
 * the slices and the claims took into *ts, *tc (ms). */
static ext_state *dra_cluster(int n, double *ts, double *tc) {
    ext_state_config cfg = {.standalone = true};
    ext_state *st = ext_state_new(&cfg);
    apply(st, KUBE_DEVICECLASS, GPU_CLASS);
    char *buf = malloc(1 << 16);
    for (int i = 0; i < n; i++) {
        snprintf(buf, 1 << 16, "{\"metadata\":{\"name\":\"dra-%d\",\"labels\":{\"nvidia.com/gpu.present\":\"true\"}},"
                 "\"status\":{\"allocatable\":{\"cpu\":\"64\",\"memory\":\"512Gi\"}}}", i);
        apply(st, KUBE_NODE, buf);
    }
    double t0 = now_ms();
    for (int i = 0; i < n; i++) {
        size_t off = (size_t)snprintf(buf, 1 << 16, "{\"metadata\":{\"name\":\"dra-%d-slice\"},\"spec\":{\"driver\":\"gpu.nvidia.com\","
                                      "\"nodeName\":\"dra-%d\",\"pool\":{\"name\":\"dra-%d\",\"generation\":1,\"resourceSliceCount\":1},"
                                      "\"devices\":[", i, i, i);
        for (int g = 0; g < 8; g++)
            off += (size_t)snprintf(buf + off, (1 << 16) - off, "%s{\"name\":\"gpu-%d\",\"attributes\":{\"type\":{\"string\":\"gpu\"},"
                                    "\"uuid\":{\"string\":\"GPU-%d-%d\"},\"productName\":{\"string\":\"NVIDIA A100-SXM4-40GB\"}},"
                                    "\"capacity\":{\"memory\":{\"value\":\"40Gi\"}}}", g ? "," : "", g, i, g);
        snprintf(buf + off, (1 << 16) - off, "]}}");
        apply(st, KUBE_RESOURCESLICE, buf);
    }
    double t1 = now_ms();
    for (int i = 0; i < n; i++)
        for (int c = 0; c < 4; c++) {
            snprintf(buf, 1 << 16, "{\"metadata\":{\"name\":\"c-%d-%d\",\"namespace\":\"ml\",\"uid\":\"u-%d-%d\"},\"spec\":"
                     "{\"devices\":{\"requests\":[{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\"}}]}},"
                     "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"g\",\"driver\":\"gpu.nvidia.com\","
                     "\"pool\":\"dra-%d\",\"device\":\"gpu-%d\"}]}}}}", i, c, i, c, i, (i + c) % 8);
            apply(st, KUBE_RESOURCECLAIM, buf);
        }
    double t2 = now_ms();
    if (ts) *ts = t1 - t0;
    if (tc) *tc = t2 - t1;
    /* the benchmarked pod's claim, made from its template and pending */
    apply(st, KUBE_RESOURCECLAIM,
          "{\"metadata\":{\"name\":\"p-gpu\",\"namespace\":\"ml\",\"uid\":\"u-p\"},\"spec\":{\"devices\":{\"requests\":"
          "[{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"count\":2}}]}}}");
    free(buf);
    return st;
}

/* The same K nodes (named alike) with the device plugin: GFD labels, nvidia.com/gpu: 8, and 4 one-GPU pods each. */
static ext_state *plugin_cluster(int n) {
    ext_state_config cfg = {.standalone = true};
    ext_state *st = ext_state_new(&cfg);
    char *buf = malloc(1 << 16);
    for (int i = 0; i < n; i++) {
        snprintf(buf, 1 << 16, "{\"metadata\":{\"name\":\"dra-%d\",\"labels\":{\"nvidia.com/gpu.present\":\"true\","
                 "\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-40GB\",\"nvidia.com/gpu.count\":\"8\",\"nvidia.com/gpu.memory\":"
                 "\"40960\",\"nvidia.com/gpu.replicas\":\"1\"}},\"status\":{\"allocatable\":{\"cpu\":\"64\",\"memory\":\"512Gi\","
                 "\"nvidia.com/gpu\":\"8\"}}}", i);
        apply(st, KUBE_NODE, buf);
        for (int c = 0; c < 4; c++) {
            snprintf(buf, 1 << 16, "{\"metadata\":{\"name\":\"q-%d-%d\",\"namespace\":\"ml\",\"uid\":\"q-%d-%d\"},\"spec\":"
                     "{\"nodeName\":\"dra-%d\",\"containers\":[{\"name\":\"m\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},"
                     "\"status\":{\"phase\":\"Running\"}}", i, c, i, c, i);
            apply(st, KUBE_POD, buf);
        }
    }
    free(buf);
    return st;
}

/* ExtenderArgs for the claim pod (dra) or the device-plugin pod over dra-0..dra-(k-1), asking cpu_milli. */
static char *pod_args(bool dra, int k, int cpu_milli) {
    size_t cap = (size_t)k * 16 + 4096, off;
    char *args = malloc(cap);
    if (dra)
        off = (size_t)snprintf(args, cap, "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"uid\":\"pod-p\"},\"spec\":"
                               "{\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"t\"}],\"containers\":[{\"name\":"
                               "\"m\",\"resources\":{\"requests\":{\"cpu\":\"%dm\"},\"claims\":[{\"name\":\"gpu\"}]}}]},\"status\":"
                               "{\"resourceClaimStatuses\":[{\"name\":\"gpu\",\"resourceClaimName\":\"p-gpu\"}]}},\"Nodes\":null,"
                               "\"NodeNames\":[", cpu_milli);
    else
        off = (size_t)snprintf(args, cap, "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"uid\":\"pod-p\"},\"spec\":"
                               "{\"containers\":[{\"name\":\"m\",\"resources\":{\"requests\":{\"cpu\":\"%dm\"},\"limits\":"
                               "{\"nvidia.com/gpu\":\"2\"}}}]}},\"Nodes\":null,\"NodeNames\":[", cpu_milli);
    for (int i = 0; i < k; i++) off += (size_t)snprintf(args + off, cap - off, "%s\"dra-%d\"", i ? "," : "", i);
    snprintf(args + off, cap - off, "]}");
    return args;
}

static double time_verb(void (*verb)(ext_verbs *, const char *, size_t, ext_reply *), ext_verbs *v, const char *args) {
    ext_reply rep = {0};
    double a = now_ms();
    verb(v, args, strlen(args), &rep);
    double b = now_ms();
    ext_reply_free(&rep);
    return b - a;
}

/* p50 and p99 of x[0..n) (sorted in place). */
static void pct(double *x, int n, double *p50, double *p99) {
    qsort(x, (size_t)n, sizeof x[0], cmp);
    *p50 = x[n / 2];
    *p99 = x[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
}

static void bench_b(void) {
    const char *ks = getenv("BENCH_DRA_KS");
    const char *re = getenv("BENCH_DRA_ROUNDS");
    int rounds = re ? atoi(re) : 40;
    if (rounds < 2) rounds = 40;
    char kbuf[128];
    snprintf(kbuf, sizeof kbuf, "%s", ks ? ks : "100,1000,5000");
    printf("B  claim pod (2 GPUs) vs device-plugin pod (nvidia.com/gpu: 2), binpack, %d rounds per cell, cells "
           "alternated; ms\n", rounds);
    printf("   %-6s %-10s %-5s %-21s %-21s %s\n", "K", "verb", "cache", "DRA p50 / p99", "device plugin p50 / p99",
           "ratio p50");
    for (char *save = NULL, *t = strtok_r(kbuf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = atoi(t);
        if (k < 1) continue;
        ext_state *sd = dra_cluster(k, NULL, NULL), *sp = plugin_cluster(k);
        ext_state_lock(sd);
        ext_state_lock(sp);
        const ext_node *nd = ext_state_node(sd, "dra-0"), *np = ext_state_node(sp, "dra-0");
        if (!nd || !np || nd->m->reason[0] || np->m->reason[0] || nd->m->nlive != 4 || np->m->nlive != 4 ||
            nd->m->ngpus != 8 || np->m->ngpus != 8)
            printf("   (K=%d: the two clusters are not alike: %s / %s)\n", k, nd ? nd->m->reason : "?", np ? np->m->reason : "?");
        ext_state_unlock(sp);
        ext_state_unlock(sd);
        ext_verbs vd, vp;
        ext_verbs_init(&vd, sd, policy_find("binpack"), NULL, NULL);
        ext_verbs_init(&vp, sp, policy_find("binpack"), NULL, NULL);
        char *warm[2] = {pod_args(true, k, 1000), pod_args(false, k, 1000)};
        /* 8 cells: {filter, prioritize} x {warm, cold} x {dra, plugin} */
        double *x[8];
        for (int c = 0; c < 8; c++) x[c] = malloc((size_t)rounds * sizeof *x[c]);
        for (int path = 0; path < 2; path++) {   /* prime the warm cells */
            ext_verbs *v = path ? &vp : &vd;
            time_verb(ext_verb_filter, v, warm[path]);
            time_verb(ext_verb_prioritize, v, warm[path]);
        }
        for (int r = 0; r < rounds; r++) {
            for (int path = 0; path < 2; path++) {
                ext_verbs *v = path ? &vp : &vd;
                char *cold = pod_args(path == 0, k, 2000 + r);   /* a shape not asked before */
                x[0 + path][r] = time_verb(ext_verb_filter, v, warm[path]);
                x[2 + path][r] = time_verb(ext_verb_prioritize, v, warm[path]);
                x[4 + path][r] = time_verb(ext_verb_filter, v, cold);
                x[6 + path][r] = time_verb(ext_verb_prioritize, v, cold);
                free(cold);
            }
        }
        const char *verb[] = {"filter", "prioritize", "filter", "prioritize"};
        for (int c = 0; c < 4; c++) {
            double d50, d99, p50, p99;
            pct(x[2 * c], rounds, &d50, &d99);
            pct(x[2 * c + 1], rounds, &p50, &p99);
            printf("   %-6d %-10s %-5s %7.3f / %-11.3f %7.3f / %-13.3f %.2f\n", k, verb[c], c < 2 ? "warm" : "cold", d50, d99,
                   p50, p99, p50 > 0 ? d50 / p50 : 0);
        }
        for (int c = 0; c < 8; c++) free(x[c]);
        free(warm[0]);
        free(warm[1]);
        ext_state_free(sd);
        ext_state_free(sp);
    }
}

int main(void) {
    kube_log_set_level(KUBE_LOG_OFF);
    const char *env = getenv("BENCH_DRA_NODES");
    int n = env ? atoi(env) : 1000;
    if (n < 1) n = 1000;
    /* A: slices, then claims */
    double ts, tc;
    ext_state *st = dra_cluster(n, &ts, &tc);
    printf("A  %d nodes x 8 GPUs: %d slices in %.1f ms (%.3f ms each), %d claims in %.1f ms (%.3f ms each)\n", n, n, ts,
           ts / n, 4 * n, tc, tc / (4 * n));
    ext_state_free(st);
    bench_b();
    return 0;
}
