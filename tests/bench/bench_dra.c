/* bench_dra.c -- what Dynamic Resource Allocation costs the extender, in process. Prints figures; not a test.
 *
 *   A  a cluster of N DRA nodes (8 A100-40GB each, one ResourceSlice per node as NVIDIA's driver publishes)
 *      and 4 allocated claims per node, applied as a relist delivers them: time per slice and per claim event
 *      (each rebuilds its node from the Node model, its devices and its claims)
 *   B  filter and prioritize of a pod whose GPU is a claim from a template, over all N nodes: p50 and p99
 *
 *   make build/bench/bench_dra && build/bench/bench_dra   (BENCH_DRA_NODES=N, default 1000; BENCH_DRA_SHOW=1
 *   prints one prioritize answer)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "extender/log.h"
#include "extender/mirror/state.h"
#include "extender/verbs.h"
#include "policy/policy.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void apply(ext_state *st, ext_kube_kind kind, const char *json) {
    cJSON *o = cJSON_Parse(json);
    ext_state_apply(st, kind, EXT_KUBE_ADDED, o);
    cJSON_Delete(o);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void) {
    ext_log_set_level(EXT_LOG_OFF);
    const char *env = getenv("BENCH_DRA_NODES");
    int n = env ? atoi(env) : 1000;
    if (n < 1) n = 1000;
    ext_state_config cfg = {.standalone = true};
    ext_state *st = ext_state_new(&cfg);
    apply(st, EXT_KUBE_DEVICECLASS,
          "{\"metadata\":{\"name\":\"gpu.nvidia.com\"},\"spec\":{\"selectors\":[{\"cel\":{\"expression\":"
          "\"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'\"}}]}}");
    char *buf = malloc(1 << 16);
    char **names = malloc((size_t)n * sizeof *names);
    for (int i = 0; i < n; i++) {
        names[i] = malloc(32);
        snprintf(names[i], 32, "dra-%d", i);
        snprintf(buf, 1 << 16, "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"nvidia.com/gpu.present\":\"true\"}},"
                 "\"status\":{\"allocatable\":{\"cpu\":\"64\",\"memory\":\"512Gi\"}}}", names[i]);
        apply(st, EXT_KUBE_NODE, buf);
    }
    /* A: slices, then claims */
    double t0 = now_ms();
    for (int i = 0; i < n; i++) {
        size_t off = (size_t)snprintf(buf, 1 << 16, "{\"metadata\":{\"name\":\"%s-slice\"},\"spec\":{\"driver\":\"gpu.nvidia.com\","
                                      "\"nodeName\":\"%s\",\"pool\":{\"name\":\"%s\",\"generation\":1,\"resourceSliceCount\":1},"
                                      "\"devices\":[", names[i], names[i], names[i]);
        for (int g = 0; g < 8; g++)
            off += (size_t)snprintf(buf + off, (1 << 16) - off, "%s{\"name\":\"gpu-%d\",\"attributes\":{\"type\":{\"string\":\"gpu\"},"
                                    "\"uuid\":{\"string\":\"GPU-%d-%d\"},\"productName\":{\"string\":\"NVIDIA A100-SXM4-40GB\"}},"
                                    "\"capacity\":{\"memory\":{\"value\":\"40Gi\"}}}", g ? "," : "", g, i, g);
        snprintf(buf + off, (1 << 16) - off, "]}}");
        apply(st, EXT_KUBE_RESOURCESLICE, buf);
    }
    double t1 = now_ms();
    int claims = 0;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < 4; c++, claims++) {
            snprintf(buf, 1 << 16, "{\"metadata\":{\"name\":\"c-%d-%d\",\"namespace\":\"ml\",\"uid\":\"u-%d-%d\"},\"spec\":"
                     "{\"devices\":{\"requests\":[{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\"}}]}},"
                     "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"g\",\"driver\":\"gpu.nvidia.com\","
                     "\"pool\":\"%s\",\"device\":\"gpu-%d\"}]}}}}", i, c, i, c, names[i], (i + c) % 8);
            apply(st, EXT_KUBE_RESOURCECLAIM, buf);
        }
    double t2 = now_ms();
    printf("A  %d nodes x 8 GPUs: %d slices in %.1f ms (%.3f ms each), %d claims in %.1f ms (%.3f ms each)\n", n, n,
           t1 - t0, (t1 - t0) / n, claims, t2 - t1, (t2 - t1) / claims);
    /* B: the pod's claim, pending */
    apply(st, EXT_KUBE_RESOURCECLAIM,
          "{\"metadata\":{\"name\":\"p-gpu\",\"namespace\":\"ml\",\"uid\":\"u-p\"},\"spec\":{\"devices\":{\"requests\":"
          "[{\"name\":\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"count\":2}}]}}}");
    size_t cap = (size_t)n * 40 + 4096, off;
    char *args = malloc(cap);
    off = (size_t)snprintf(args, cap, "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"uid\":\"pod-p\"},\"spec\":"
                           "{\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"t\"}],\"containers\":[{\"name\":"
                           "\"m\",\"resources\":{\"claims\":[{\"name\":\"gpu\"}]}}]},\"status\":{\"resourceClaimStatuses\":"
                           "[{\"name\":\"gpu\",\"resourceClaimName\":\"p-gpu\"}]}},\"Nodes\":null,\"NodeNames\":[");
    for (int i = 0; i < n; i++) off += (size_t)snprintf(args + off, cap - off, "%s\"%s\"", i ? "," : "", names[i]);
    snprintf(args + off, cap - off, "]}");
    ext_verbs v;
    ext_verbs_init(&v, st, policy_find("binpack"), NULL, NULL);
    if (getenv("BENCH_DRA_SHOW")) {
        ext_reply rep = {0};
        ext_verb_prioritize(&v, args, strlen(args), &rep);
        printf("%.300s\n", rep.body);
        ext_reply_free(&rep);
    }
    enum { ROUNDS = 40 };
    double f[ROUNDS], p[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        ext_reply rep = {0};
        double a = now_ms();
        ext_verb_filter(&v, args, strlen(args), &rep);
        double b = now_ms();
        ext_reply_free(&rep);
        ext_verb_prioritize(&v, args, strlen(args), &rep);
        double c = now_ms();
        ext_reply_free(&rep);
        f[r] = b - a;
        p[r] = c - b;
    }
    qsort(f, ROUNDS, sizeof f[0], cmp);
    qsort(p, ROUNDS, sizeof p[0], cmp);
    printf("B  claim pod over %d nodes: filter p50 %.2f ms p99 %.2f ms; prioritize (binpack) p50 %.2f ms p99 %.2f ms\n", n,
           f[ROUNDS / 2], f[ROUNDS - 1], p[ROUNDS / 2], p[ROUNDS - 1]);
    free(args);
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    free(buf);
    ext_state_free(st);
    return 0;
}
