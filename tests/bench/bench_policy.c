/* bench_policy.c -- time to score one request against 5,000 nodes of 8 GPUs, for each
 * policy (score every node + select the winner), median of repeated runs, on one
 * thread and split over two threads. Run from the repository root (reads the openb
 * default pod list for the fgd target workload).
 *
 *   gcc -std=c11 -D_GNU_SOURCE -O2 -I. tests/bench/bench_policy.c policy/[a-z]*.c model/[a-z]*.c \
 *       build/gen/catalog_data.c -lcjson -lm -lpthread -o build/bench_policy && build/bench_policy
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/catalog.h"
#include "model/fit.h"
#include "model/node.h"
#include "policy/policy.h"
#include "tests/unit/policy_helpers.h"

#define NODES 5000
#define GPUS 8
#ifndef RUNS
#define RUNS 31
#endif

static uint64_t rng = 88172645463325252ull;
static int rnd(int m) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (int)(rng % (uint64_t)m);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* CPU time of this thread: on a shared machine, what the work costs without the
 * time other processes took the core away. */
static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct job {
    const policy *p;
    const policy_ctx *ctx;
    const model_request *r;
    model_node **nodes;
    policy_result *res;
    int from, to;
} job;

static void *score_range(void *arg) {
    job *j = arg;
    for (int i = j->from; i < j->to; i++) policy_score(j->p, j->r, j->nodes[i], j->ctx, &j->res[i], NULL, 0);
    return NULL;
}

/* One decision: score all nodes (on `threads` threads; 0 = one, timed in CPU time by
 * the caller), select. Returns wall ms. */
static double one_decision(const policy *p, const policy_ctx *ctx, const model_request *r, model_node **nodes,
                           policy_result *res, int threads, int *winner) {
    double t0 = now_ms();
    if (threads <= 1) {
        job j = {p, ctx, r, nodes, res, 0, NODES};
        score_range(&j);
    } else {
        pthread_t th;
        job a = {p, ctx, r, nodes, res, 0, NODES / 2}, b = {p, ctx, r, nodes, res, NODES / 2, NODES};
        pthread_create(&th, NULL, score_range, &b);
        score_range(&a);
        pthread_join(th, NULL);
    }
    *winner = policy_select(p, ctx, res, NODES);
    return now_ms() - t0;
}

static double median_ms(const policy *p, const policy_ctx *ctx, const model_request *r, model_node **nodes,
                        policy_result *res, int threads, int *winner, int *feasible) {
    double t[RUNS];
    for (int k = 0; k < RUNS; k++) {
        double c0 = cpu_ms();
        t[k] = one_decision(p, ctx, r, nodes, res, threads, winner);
        if (threads == 0) t[k] = cpu_ms() - c0;
    }
    qsort(t, RUNS, sizeof t[0], cmp_double);
    *feasible = 0;
    for (int i = 0; i < NODES; i++) *feasible += res[i].feasible;
    return t[RUNS / 2];
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : "";   /* "whole" or "mig": one part only */
    const char *pol = argc > 2 ? argv[2] : NULL;   /* one policy only */
    static model_gpu_product products[2];
    model_product_init_generic(&products[0], "V100M16", OPENB_GPU_MIB, 0);
    model_product_init_generic(&products[1], "T4", OPENB_GPU_MIB, 0);
    model_node **nodes = calloc(NODES, sizeof *nodes);
    policy_result *res = calloc(NODES, sizeof *res);
    char name[64], uid[64];

    /* Whole-mode cluster, about half allocated: shares, whole GPUs, CPU-only pods. */
    for (int i = 0; i < NODES; i++) {
        snprintf(name, sizeof name, "node-%05d", i);
        model_node *n = model_node_new(name);
        n->track_host = true;
        n->cpu_milli = 96000;
        n->memory_mib = 786432;
        for (int g = 0; g < GPUS; g++) model_node_add_gpu(n, &products[i % 2], MODEL_GPU_WHOLE, 1, 0);
        int pods = rnd(10);
        for (int k = 0; k < pods; k++) {
            int kind = rnd(4);
            model_request q = kind == 0 ? req_whole(1 + rnd(2), 4000)
                              : kind == 3 ? req_cpu(2000) : req_frac(100 * (1 + rnd(9)), 4000);
            snprintf(uid, sizeof uid, "p%d", k);
            place_on(n, &q, uid, rnd(GPUS));
        }
        nodes[i] = n;
    }
    policy_workload *w = openb_workload("default");
    if (!w) {
        fprintf(stderr, "cannot read data/openb/openb_pod_list_default.csv: run from the repository root\n");
        return 1;
    }
    policy_ctx ctx;
    policy_ctx_init(&ctx, 42);
    ctx.workload = w;

    struct { const char *what; model_request r; } reqs[] = {
        {"share 0.46 GPU", req_frac(460, 6000)},
        {"1 whole GPU", req_whole(1, 12000)},
        {"4 whole GPUs", req_whole(4, 32000)},
        {"CPU-only", req_cpu(4000)},
    };
    int nreq = (int)(sizeof reqs / sizeof reqs[0]);
    printf("%d nodes x %d GPUs (whole mode, ~half used); median of %d decisions (score all + select), ms\n", NODES,
           GPUS, RUNS);
    printf("%-14s %-16s %9s %9s %9s %9s\n", "policy", "request", "1thr CPU", "1thr wall", "2thr wall", "feasible");
    for (int pi = 0; pi < policy_count() && strcmp(only, "mig"); pi++) {
        const policy *p = policy_at(pi);
        if (pol && strcmp(pol, policy_name(p))) continue;
        for (int q = 0; q < nreq; q++) {
            int win, feas;
            double tc = median_ms(p, &ctx, &reqs[q].r, nodes, res, 0, &win, &feas);
            double t1 = median_ms(p, &ctx, &reqs[q].r, nodes, res, 1, &win, &feas);
            double t2 = median_ms(p, &ctx, &reqs[q].r, nodes, res, 2, &win, &feas);
            printf("%-14s %-16s %9.3f %9.3f %9.3f %9d\n", policy_name(p), reqs[q].what, tc, t1, t2, feas);
        }
    }

    /* MIG cluster: 8 dynamic A100-80GB per node, random instances already held. */
    const model_gpu_product *a100 = model_catalog_find(model_catalog_default(), "NVIDIA-A100-SXM4-80GB");
    if (a100 && strcmp(only, "whole")) {
        const char *profs[] = {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"};
        for (int i = 0; i < NODES; i++) {
            model_node_free(nodes[i]);
            snprintf(name, sizeof name, "mig-%05d", i);
            model_node *n = model_node_new(name);
            for (int g = 0; g < GPUS; g++) {
                model_gpu *gg = model_node_add_gpu(n, a100, MODEL_GPU_MIG, 1, 0);
                if (gg) gg->mig_dynamic = true;
            }
            int pods = rnd(12);
            for (int k = 0; k < pods; k++) {
                model_request q = req_mig(profs[rnd(3)]);
                snprintf(uid, sizeof uid, "p%d", k);
                place_on(n, &q, uid, rnd(GPUS));
            }
            nodes[i] = n;
        }
        policy_workload *mw = policy_workload_new();
        long counts[] = {40, 25, 20, 10, 5};
        for (int k = 0; k < 5; k++) {
            model_request q = req_mig(profs[k]);
            policy_workload_add(mw, &q, counts[k], NULL, 0);
        }
        policy_workload_finish(mw, 100, NULL, 0);
        policy_ctx mctx;
        policy_ctx_init(&mctx, 42);
        mctx.workload = mw;
        printf("\n%d nodes x %d A100-80GB, dynamic MIG, random instances held\n", NODES, GPUS);
        printf("%-14s %-16s %9s %9s %9s %9s\n", "policy", "request", "1thr CPU", "1thr wall", "2thr wall", "feasible");
        const char *mp[] = {"mig-aware", "bestfit", "spread"};
        const char *mr[] = {"1g.10gb", "3g.40gb"};
        for (int pi = 0; pi < 3; pi++) {
            for (int q = 0; q < 2; q++) {
                model_request r = req_mig(mr[q]);
                int win, feas;
                double tc = median_ms(policy_find(mp[pi]), &mctx, &r, nodes, res, 0, &win, &feas);
                double t1 = median_ms(policy_find(mp[pi]), &mctx, &r, nodes, res, 1, &win, &feas);
                double t2 = median_ms(policy_find(mp[pi]), &mctx, &r, nodes, res, 2, &win, &feas);
                printf("%-14s %-16s %9.3f %9.3f %9.3f %9d\n", mp[pi], mr[q], tc, t1, t2, feas);
            }
        }
        policy_workload_free(mw);
    }
    for (int i = 0; i < NODES; i++) model_node_free(nodes[i]);
    free(nodes);
    free(res);
    policy_workload_free(w);
    return 0;
}
