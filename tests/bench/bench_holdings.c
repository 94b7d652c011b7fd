/* bench_holdings.c -- what the node agent's holdings record (extender/mirror/holdings.h) costs the extender per Node
 * event, in process. Prints figures; not a test.
 *
 * One node of 8 A100s with UUIDs and 8 whole-GPU pods bound by tessera (GPU i to pod i); then Node MODIFIED events
 * (a label changes each time, as the kubelet's status updates do), in three cells:
 *   none     no record
 *   agree    a record that says what the model says
 *   swapped  a record that swaps pairs of pods (0<->1, 2<->3...): applied at the first event, then agreeing, the
 *            8 applied findings kept and shown
 * Each event re-reads the annotation (hashed: unchanged text is not parsed again) and sets the record against the
 * model, which the Node event rebuilt. The cells are alternated round by round in one run; ns per event, p50.
 *
 *   make build/bench/bench_holdings && build/bench/bench_holdings          (BENCH_HOLDINGS_ROUNDS, default 30)
 * Instruction counts (what the README quotes): one cell, 0 and 2000 events, the difference / 2000:
 *   valgrind --tool=callgrind build/bench/bench_holdings agree 2000       (and: ... agree 0)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/log.h"
#include "extender/mirror/state.h"

#define NGPU 8
#define EVENTS 200   /* per cell and round */

static const char *const modes[] = {"none", "agree", "swapped"};

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void ev(ext_state *st, kube_kind k, kube_event e, const char *json) {
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    ext_state_on_event(st, k, e, o);
    cJSON_Delete(o);
}

typedef struct cell { ext_state *st; cJSON *node; int tick; } cell;

static void cell_init(cell *c, int mode) {
    char gpus[1024] = "[", rec[2048] = "{\"v\":1,\"pods\":{", b[160];
    for (int i = 0; i < NGPU; i++) {
        snprintf(b, sizeof b, "%s{\"uuid\":\"GPU-bench-%d\"}", i ? "," : "", i);
        strcat(gpus, b);
        snprintf(b, sizeof b, "%s\"default/p%d\":{\"nvidia.com/gpu\":[\"GPU-bench-%d\"]}", i ? "," : "", i,
                 mode == 2 ? i ^ 1 : i);
        strcat(rec, b);
    }
    strcat(gpus, "]");
    strcat(rec, "}}");
    ext_state_config cfg = {0};
    c->st = ext_state_new(&cfg);
    c->tick = 0;
    c->node = cJSON_Parse("{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"labels\":{\"nvidia.com/gpu.product\":"
                          "\"NVIDIA-A100-SXM4-80GB\",\"nvidia.com/gpu.count\":\"8\",\"tick\":\"0\"},\"annotations\":{}},"
                          "\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"8\"}}}");
    cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(c->node, "metadata"), "annotations");
    cJSON_AddStringToObject(ann, "tessera.io/gpus", gpus);
    if (mode) cJSON_AddStringToObject(ann, "tessera.io/holdings", rec);
    ev(c->st, KUBE_NODE, KUBE_RELIST, NULL);
    ext_state_on_event(c->st, KUBE_NODE, KUBE_ADDED, c->node);
    ev(c->st, KUBE_NODE, KUBE_SYNCED, NULL);
    ev(c->st, KUBE_POD, KUBE_RELIST, NULL);
    for (int i = 0; i < NGPU; i++) {
        char p[1024];
        snprintf(p, sizeof p,
                 "{\"metadata\":{\"name\":\"p%d\",\"namespace\":\"default\",\"uid\":\"u%d\",\"annotations\":"
                 "{\"tessera.io/assignment\":\"{\\\"version\\\":1,\\\"node\\\":\\\"n1\\\",\\\"grants\\\":[{\\\"gpu\\\":%d,"
                 "\\\"whole\\\":true,\\\"memoryMiB\\\":81920,\\\"computePermille\\\":1000}]}\"}},\"spec\":{\"nodeName\":"
                 "\"n1\",\"containers\":[{\"name\":\"c\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},"
                 "\"status\":{\"phase\":\"Running\"}}",
                 i, i, i);
        ev(c->st, KUBE_POD, KUBE_ADDED, p);
    }
    ev(c->st, KUBE_POD, KUBE_SYNCED, NULL);
}

static void cell_events(cell *c, int n) {
    cJSON *labels = cJSON_GetObjectItem(cJSON_GetObjectItem(c->node, "metadata"), "labels");
    for (int i = 0; i < n; i++) {
        char t[16];
        snprintf(t, sizeof t, "%d", ++c->tick);
        cJSON_ReplaceItemInObject(labels, "tick", cJSON_CreateString(t));
        ext_state_on_event(c->st, KUBE_NODE, KUBE_MODIFIED, c->node);
    }
}

/* Pod 0's GPU: 1 once a swapping record was applied. */
static int gpu_of_p0(cell *c) {
    ext_state_lock(c->st);
    const ext_pod *p = ext_state_pod(c->st, "u0");
    int g = p && p->holds ? p->a.grant[0].gpu : -1;
    ext_state_unlock(c->st);
    return g;
}

static void cell_free(cell *c) {
    cJSON_Delete(c->node);
    ext_state_free(c->st);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    kube_log_set_level(KUBE_LOG_OFF);
    if (argc >= 2) {   /* one cell, for callgrind */
        int mode = -1;
        for (int m = 0; m < 3; m++)
            if (!strcmp(argv[1], modes[m])) mode = m;
        if (mode < 0) {
            fprintf(stderr, "usage: bench_holdings [none|agree|swapped EVENTS]\n");
            return 2;
        }
        cell c;
        cell_init(&c, mode);
        cell_events(&c, argc >= 3 ? atoi(argv[2]) : EVENTS);
        printf("%s: pod 0 on GPU %d\n", modes[mode], gpu_of_p0(&c));
        cell_free(&c);
        return 0;
    }
    const char *r = getenv("BENCH_HOLDINGS_ROUNDS");
    int rounds = r && atoi(r) > 0 ? atoi(r) : 30;
    cell cells[3];
    for (int m = 0; m < 3; m++) cell_init(&cells[m], m);
    double *ns[3];
    for (int m = 0; m < 3; m++) ns[m] = calloc((size_t)rounds, sizeof *ns[m]);
    for (int k = 0; k < rounds; k++)
        for (int m = 0; m < 3; m++) {
            double t0 = now_ns();
            cell_events(&cells[m], EVENTS);
            ns[m][k] = (now_ns() - t0) / EVENTS;
        }
    printf("Node events on a node of %d GPUs and %d whole-GPU pods, %d rounds x %d events per cell (alternated):\n",
           NGPU, NGPU, rounds, EVENTS);
    double p50[3];
    for (int m = 0; m < 3; m++) {
        qsort(ns[m], (size_t)rounds, sizeof *ns[m], cmp);
        p50[m] = ns[m][rounds / 2];
    }
    for (int m = 0; m < 3; m++) {
        printf("  %-8s p50 %7.0f ns/event (x%.2f of none)%s\n", modes[m], p50[m], p50[m] / p50[0],
               m == 2 && gpu_of_p0(&cells[2]) == 1 ? "  (swap applied)" : "");
        free(ns[m]);
        cell_free(&cells[m]);
    }
    return 0;
}
