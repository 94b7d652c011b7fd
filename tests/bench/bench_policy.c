/* bench_policy.c -- time to score ONE request against 5,000 nodes of 8 GPUs, for every
 * policy (score every node + select the winner), on one thread and split over two
 * threads (a long-lived second thread, handed half the nodes per decision), as the
 * median and the minimum of RUNS decisions. Requests: a fractional share (compute only,
 * and HAMi-style memory + compute: gpumem 10240 MiB, gpucores 30) and a whole GPU on a
 * whole-mode cluster about half allocated, and MIG 1g.10gb / 3g.40gb on a cluster of
 * A100-80GB nodes under dynamic MIG with random instances held. Then the extender's
 * path: what extender/verbs.c calls for one pod -- filter (model_fit_any on every node)
 * and prioritize (policy_score on the nodes that passed, then policy_scores_0_10). Last, a
 * cluster whose nodes publish their GPU topology (the reference DGX A100, 8-GPU PCIe server
 * with NVLink pairs and an 8-GPU two-socket server without NVLink, in turn), about half
 * allocated by 1- and 2-GPU pods: what topology costs the policies that weigh it.
 *
 * "topo-hidden" scores the same topology cluster with every node's topology hidden (as a node
 * without the annotation): the difference is what weighing topology costs.
 *
 * "topo-cost" measures that difference side by side, in one run, on the cluster of issue 30: 5,000
 * idle nodes alternating a DGX A100 and an 8-GPU PCIe server with NVLink pairs, with their topology
 * and the same nodes without it, calls on the two alternated. Per call, what extender/verbs.c runs on
 * every node when its answer cache has none: prioritize (policy_score, then policy_scores_0_10) and
 * filter (model_fit_any); for binpack and fgd-pack (target: bench_extender's five shapes), for pods
 * on 1..5 whole GPUs in turn and for shares of 0.1..0.5 GPU in turn. Prioritize twice: on nodes
 * unchanged since they were last scored (what topo.c remembers of a node serves the repeated
 * shapes, as it does for all nodes but one between two pods), and on nodes every one of which
 * changed since it was last scored for that shape (before every call a one-GPU pod is placed on
 * GPU 7 of each node, or leaves it again: topo.c's answers are all for another idle set, the
 * most a pod can find to work out again). The extender's answer cache itself is
 * bench_extender's cell H.
 *
 *   make build/bench/bench_policy && build/bench/bench_policy [whole|mig|topo|topo-hidden|ext] [policy]
 *   build/bench/bench_policy topo-cost [binpack|fgd-pack] [prioritize|changed|filter] [whole|share] [topo|plain]
 *   valgrind --tool=callgrind --toggle-collect=timed_call build/bench/bench_policy topo-cost binpack prioritize whole topo
 *     (the last three arguments pick one cell and one side, for callgrind's instruction counts)
 *
 * Run from the repository root (fgd's target workload is the openb default pod list).
 * Wall-clock ms; on a shared machine take the median of several runs of the program.
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
#include "tests/unit/topo_helpers.h"

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

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One thread's share of a decision. ext: the extender's path (filter, then score the
 * nodes that pass); otherwise score every node. */
typedef struct job {
    const policy *p;
    const policy_ctx *ctx;
    const model_request *r;
    model_node **nodes;
    policy_result *res;
    bool ext;
    int from, to;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    for (int i = j->from; i < j->to; i++) {
        if (j->ext && !model_fit_any(j->nodes[i], j->r, NULL, 0)) {
            memset(&j->res[i], 0, sizeof j->res[i]);
            j->res[i].rank = policy_node_rank(j->ctx, j->nodes[i]->name);
            continue;
        }
        policy_score(j->p, j->r, j->nodes[i], j->ctx, &j->res[i], NULL, 0);
    }
    return NULL;
}

typedef struct timing {
    double med1, min1, med2, min2;
    int feasible, winner;
} timing;

/* The second thread lives for the whole run, as a scheduler's worker pool would (and
 * keeps its per-thread memos warm); two barrier waits per decision hand it a job. */
static pthread_barrier_t go, done;
static job worker_job;
static bool worker_quit;

static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        pthread_barrier_wait(&go);
        if (worker_quit) return NULL;
        run_job(&worker_job);
        pthread_barrier_wait(&done);
    }
}

/* One decision on `threads` threads; returns wall ms. */
static double one_decision(job base, int threads, int *scores, int *winner) {
    double t0 = now_ms();
    if (threads <= 1) {
        base.from = 0;
        base.to = NODES;
        run_job(&base);
    } else {
        job a = base;
        a.from = 0;
        a.to = NODES / 2;
        worker_job = base;
        worker_job.from = NODES / 2;
        worker_job.to = NODES;
        pthread_barrier_wait(&go);
        run_job(&a);
        pthread_barrier_wait(&done);
    }
    if (base.ext) {
        policy_scores_0_10(base.p, base.ctx, base.res, NODES, scores);
        *winner = -1;
        for (int i = 0; i < NODES; i++)
            if (scores[i] == 10) *winner = i;
    } else {
        *winner = policy_select(base.p, base.ctx, base.res, NODES);
    }
    return now_ms() - t0;
}

static timing measure(const policy *p, const policy_ctx *ctx, const model_request *r, model_node **nodes,
                      policy_result *res, int *scores, bool ext) {
    job base = {p, ctx, r, nodes, res, ext, 0, NODES};
    timing tm;
    double t[RUNS];
    for (int threads = 1; threads <= 2; threads++) {
        for (int k = 0; k < RUNS; k++) t[k] = one_decision(base, threads, scores, &tm.winner);
        qsort(t, RUNS, sizeof t[0], cmp_double);
        if (threads == 1) tm.med1 = t[RUNS / 2], tm.min1 = t[0];
        else tm.med2 = t[RUNS / 2], tm.min2 = t[0];
    }
    tm.feasible = 0;
    for (int i = 0; i < NODES; i++) tm.feasible += res[i].feasible;
    return tm;
}

static void header(const char *title) {
    printf("\n%s\n%-14s %-16s %8s %8s %8s %8s %8s %7s\n", title, "policy", "request", "1thr med", "1thr min", "2thr med",
           "2thr min", "feasible", "winner");
}

static void row(const char *pol, const char *what, const timing *tm) {
    printf("%-14s %-16s %8.3f %8.3f %8.3f %8.3f %8d %7d\n", pol, what, tm->med1, tm->min1, tm->med2, tm->min2,
           tm->feasible, tm->winner);
}

/* Whole-mode cluster, about half allocated: shares, whole GPUs, CPU-only pods. */
static void build_whole(model_node **nodes, model_gpu_product *products) {
    char name[64], uid[64];
    model_product_init_generic(&products[0], "V100M16", OPENB_GPU_MIB, 0);
    model_product_init_generic(&products[1], "T4", OPENB_GPU_MIB, 0);
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
}

/* 8 dynamic-MIG A100-80GB per node, random 1g/2g/3g instances held. */
static void build_mig(model_node **nodes, const model_gpu_product *a100) {
    const char *profs[] = {"1g.10gb", "2g.20gb", "3g.40gb"};
    char name[64], uid[64];
    for (int i = 0; i < NODES; i++) {
        snprintf(name, sizeof name, "mig-%05d", i);
        model_node *n = model_node_new(name);
        n->mig_strategy = MODEL_MIG_MIXED;
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
}

/* Nodes with topology: DGX A100, PCIe with NVLink pairs, and the PCIe server's links without
 * its bridges (two sockets of four, NODE within) in turn; random 1- and 2-GPU pods held. */
static void build_topo(model_node **nodes) {
    char name[64], uid[64];
    for (int i = 0; i < NODES; i++) {
        snprintf(name, sizeof name, "topo-%05d", i);
        test_server kind = i % 3 == 0 ? TEST_DGX_A100 : i % 3 == 1 ? TEST_PCIE8 : TEST_NUMA8;
        model_node *n = test_server_node(name, kind, MODEL_GPU_WHOLE, 1);
        n->track_host = true;
        n->cpu_milli = 96000;
        n->memory_mib = 786432;
        int pods = rnd(6);
        for (int k = 0; k < pods; k++) {
            model_request q = req_whole(1 + rnd(2), 4000);
            snprintf(uid, sizeof uid, "p%d", k);
            place_on(n, &q, uid, rnd(GPUS));
        }
        nodes[i] = n;
    }
}

static void free_nodes(model_node **nodes) {
    for (int i = 0; i < NODES; i++) model_node_free(nodes[i]);
}

/* ------------------------------------------------------------ topo-cost (issue 30) */

/* The cluster: idle nodes alternating dgx-a100 and pcie8-nvlink-pairs; topo false: the same nodes
 * without their matrix. */
static void build_topo_cost(model_node **nodes, bool topo) {
    char name[64];
    for (int i = 0; i < NODES; i++) {
        snprintf(name, sizeof name, "topo-%05d", i);
        nodes[i] = test_server_node(name, i % 2 ? TEST_PCIE8 : TEST_DGX_A100, MODEL_GPU_WHOLE, 1);
        if (!topo) {
            free(nodes[i]->topo);
            nodes[i]->topo = NULL;
        }
    }
}

/* bench_extender.c's fgd target: gpumem 10240 + 30 cores, gpumem 20480 + 50 cores, 1, 2 and 8 GPUs. */
static policy_workload *topo_cost_target(void) {
    policy_workload *w = policy_workload_new();
    model_request a = req_frac(300, 0), b = req_frac(500, 0);
    a.memory_mib = 10240;
    b.memory_mib = 20480;
    model_request shapes[] = {a, b, req_whole(1, 0), req_whole(2, 0), req_whole(8, 0)};
    for (int i = 0; i < 5; i++) policy_workload_add(w, &shapes[i], 1, NULL, 0);
    policy_workload_finish(w, 100, NULL, 0);
    return w;
}

/* One call of the verb over every node, as the extender makes it with no answer cached. */
static __attribute__((noinline)) long topo_cost_call(const policy *p, const policy_ctx *ctx, const model_request *r,
                                                     model_node **nodes, policy_result *res, int *scores, bool filter) {
    long sum = 0;
    for (int i = 0; i < NODES; i++) {
        if (filter) sum += model_fit_any(nodes[i], r, NULL, 0);
        else policy_score(p, r, nodes[i], ctx, &res[i], NULL, 0);
    }
    if (!filter) {
        policy_scores_0_10(p, ctx, res, NODES, scores);
        for (int i = 0; i < NODES; i++) sum += scores[i];
    }
    return sum;
}

/* The call timed: what callgrind counts (--toggle-collect=timed_call), the warm-up left out. */
static __attribute__((noinline)) long timed_call(const policy *p, const policy_ctx *ctx, const model_request *r,
                                                 model_node **nodes, policy_result *res, int *scores, bool filter) {
    return topo_cost_call(p, ctx, r, nodes, res, scores, filter);
}

/* Every node changes: a one-GPU pod arrives on GPU 7, or leaves it. */
static void change_all(model_node **nodes) {
    model_request one = req_whole(1, 0);
    for (int i = 0; i < NODES; i++)
        if (model_release(nodes[i], "churn") != 0 && place_on(nodes[i], &one, "churn", 7) != 0) {
            fprintf(stderr, "bench_policy: cannot place the churn pod\n");
            exit(1);
        }
}

static int topo_cost(int argc, char **argv, policy_result *res, int *scores) {
    const char *only_pol = argc > 2 ? argv[2] : NULL, *only_verb = argc > 3 ? argv[3] : NULL;
    const char *only_req = argc > 4 ? argv[4] : NULL, *only_side = argc > 5 ? argv[5] : NULL;
    model_node **side_nodes[2] = {calloc(NODES, sizeof(model_node *)), calloc(NODES, sizeof(model_node *))};
    policy_workload *w = topo_cost_target();
    if (!side_nodes[0] || !side_nodes[1] || !w) return 1;
    build_topo_cost(side_nodes[0], true);
    build_topo_cost(side_nodes[1], false);
    policy_ctx ctx;
    policy_ctx_init(&ctx, 42);
    ctx.workload = w;
    printf("topo-cost: %d idle nodes alternating dgx-a100 and pcie8-nvlink-pairs, with their topology and without;\n"
           "wall ms per call over every node, median of %d calls, the two sides alternated\n", NODES, RUNS);
    printf("%-9s %-6s %-22s %10s %10s %7s\n", "policy", "pods", "verb", "topo ms", "plain ms", "ratio");
    static const char *const pols[] = {"binpack", "fgd-pack"};
    static const char *const verbs[] = {"prioritize", "changed", "filter"};
    static const char *const verb_text[] = {"prioritize", "prioritize (changed)", "filter"};
    static const char *const reqs[] = {"whole", "share"};
    for (int pi = 0; pi < 2; pi++) {
        if (only_pol && strcmp(only_pol, pols[pi])) continue;
        const policy *p = policy_find(pols[pi]);
        for (int q = 0; q < 2; q++) {
            if (only_req && strcmp(only_req, reqs[q])) continue;
            for (int v = 0; v < 3; v++) {
                if (only_verb && strcmp(only_verb, verbs[v])) continue;
                double t[2][RUNS];
                long check = 0;
                for (int k = -5; k < RUNS; k++)   /* five calls to warm up: each shape once */
                    for (int side = 0; side < 2; side++) {
                        if (only_side && strcmp(only_side, side ? "plain" : "topo")) continue;
                        int shape = (k + 5) % 5;
                        model_request r = q ? req_frac(100 * (1 + shape), 0) : req_whole(1 + shape, 0);
                        if (v == 1) change_all(side_nodes[side]);
                        double t0 = now_ms();
                        check += k < 0 ? topo_cost_call(p, &ctx, &r, side_nodes[side], res, scores, v == 2)
                                       : timed_call(p, &ctx, &r, side_nodes[side], res, scores, v == 2);
                        if (k >= 0) t[side][k] = now_ms() - t0;
                    }
                if (only_side) continue;
                qsort(t[0], RUNS, sizeof t[0][0], cmp_double);
                qsort(t[1], RUNS, sizeof t[1][0], cmp_double);
                double a = t[0][RUNS / 2], b = t[1][RUNS / 2];
                printf("%-9s %-6s %-22s %10.3f %10.3f %7.2f%s\n", pols[pi], reqs[q], verb_text[v], a, b, a / b,
                       check < 0 ? " (checksum)" : "");
                fflush(stdout);
            }
        }
    }
    free_nodes(side_nodes[0]);
    free_nodes(side_nodes[1]);
    free(side_nodes[0]);
    free(side_nodes[1]);
    policy_workload_free(w);
    return 0;
}

int main(int argc, char **argv) {
    const char *part = argc > 1 ? argv[1] : "";   /* "whole", "mig" or "ext": one part only */
    const char *pol = argc > 2 ? argv[2] : NULL;  /* one policy only */
    static model_gpu_product products[2];
    model_node **nodes = calloc(NODES, sizeof *nodes);
    policy_result *res = calloc(NODES, sizeof *res);
    int *scores = calloc(NODES, sizeof *scores);
    if (!strcmp(part, "topo-cost")) {
        int rc = nodes && res && scores ? topo_cost(argc, argv, res, scores) : 1;
        free(nodes);
        free(res);
        free(scores);
        return rc;
    }
    policy_workload *w = openb_workload("default");
    const model_gpu_product *a100 = model_catalog_find(model_catalog_default(), "NVIDIA-A100-SXM4-80GB");
    if (!nodes || !res || !scores || !w || !a100) {
        fprintf(stderr, "setup failed (run from the repository root: data/openb/openb_pod_list_default.csv)\n");
        return 1;
    }
    /* MIG target workload for fgd / mig-aware on the MIG cluster */
    policy_workload *mw = policy_workload_new();
    const char *mprofs[] = {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"};
    long mcounts[] = {40, 25, 20, 10, 5};
    for (int k = 0; k < 5; k++) {
        model_request q = req_mig(mprofs[k]);
        policy_workload_add(mw, &q, mcounts[k], NULL, 0);
    }
    policy_workload_finish(mw, 100, NULL, 0);
    policy_ctx ctx, mctx;
    policy_ctx_init(&ctx, 42);
    ctx.workload = w;
    policy_ctx_init(&mctx, 42);
    mctx.workload = mw;

    model_request hami = req_frac(300, 6000);   /* nvidia.com/gpumem: 10240, gpucores: 30 */
    hami.memory_mib = 10240;
    model_request nvl2 = req_whole(2, 12000);   /* tessera.io/topology: nvlink */
    nvl2.topology = MODEL_ALIGN_NVLINK;
    enum { CL_WHOLE, CL_MIG, CL_TOPO, NCL };
    struct { const char *what; model_request r; int cl; } reqs[] = {
        {"share 0.46 GPU", req_frac(460, 6000), CL_WHOLE},
        {"10240MiB+30%", hami, CL_WHOLE},
        {"1 whole GPU", req_whole(1, 12000), CL_WHOLE},
        {"MIG 1g.10gb", req_mig("1g.10gb"), CL_MIG},
        {"MIG 3g.40gb", req_mig("3g.40gb"), CL_MIG},
        {"share 0.46 GPU", req_frac(460, 6000), CL_TOPO},
        {"1 whole GPU", req_whole(1, 12000), CL_TOPO},
        {"2 whole GPUs", req_whole(2, 12000), CL_TOPO},
        {"4 whole GPUs", req_whole(4, 12000), CL_TOPO},
        {"2 GPUs nvlink", nvl2, CL_TOPO},
    };
    int nreq = (int)(sizeof reqs / sizeof reqs[0]);
    pthread_t th;
    pthread_barrier_init(&go, NULL, 2);
    pthread_barrier_init(&done, NULL, 2);
    pthread_create(&th, NULL, worker, NULL);
    printf("score one request against %d nodes x %d GPUs (score all + select); wall ms over %d decisions\n", NODES,
           GPUS, RUNS);
    static const char *const part_of[NCL] = {"whole", "mig", "topo"};
    static const char *const title_of[NCL] = {
        "whole-mode cluster: 8 GPUs per node, about half allocated (fgd target: openb default)",
        "MIG cluster: 8 x A100-80GB per node, dynamic MIG, random 1g/2g/3g instances held "
        "(fgd/mig-aware target: 1g..7g MIG shapes)",
        "topology cluster: DGX A100 / PCIe NVLink pairs / two-socket PCIe nodes in turn, 1-2 GPU pods held "
        "(fgd target: openb default)"};
    for (int cl = 0; cl < NCL; cl++) {
        /* the whole and MIG clusters are always built, in this order, so each is the same random
         * cluster whichever part runs (and as before the topology cluster was added) */
        bool hidden = !strcmp(part, "topo-hidden");
        /* (the "ext" part is the whole and MIG clusters' only, as before the topology cluster came) */
        if (cl == CL_TOPO && *part && strcmp(part, "topo") && !hidden) continue;
        if (cl == CL_MIG) build_mig(nodes, a100);
        else if (cl == CL_TOPO) build_topo(nodes);
        else build_whole(nodes, products);
        for (int i = 0; i < NODES && cl == CL_TOPO && hidden; i++) {
            free(nodes[i]->topo);
            nodes[i]->topo = NULL;
        }
        const policy_ctx *c = cl == CL_MIG ? &mctx : &ctx;
        if (!*part || !strcmp(part, part_of[cl]) || (cl == CL_TOPO && hidden)) {
            header(cl == CL_TOPO && hidden ? "the topology cluster with every node's topology hidden" : title_of[cl]);
            for (int pi = 0; pi < policy_count(); pi++) {
                const policy *p = policy_at(pi);
                if (pol && strcmp(pol, policy_name(p))) continue;
                for (int q = 0; q < nreq; q++) {
                    if (reqs[q].cl != cl) continue;
                    timing tm = measure(p, c, &reqs[q].r, nodes, res, scores, false);
                    row(policy_name(p), reqs[q].what, &tm);
                }
            }
        }
        if (!*part || (!strcmp(part, "ext") && cl != CL_TOPO)) {
            char title[160];
            snprintf(title, sizeof title,
                     "extender path (filter: model_fit_any; prioritize: policy_score + policy_scores_0_10), %s cluster",
                     part_of[cl]);
            header(title);
            const char *ep[] = {"binpack", "fgd", "mig-aware"};
            for (int e = 0; e < 3; e++) {
                if (pol && strcmp(pol, ep[e])) continue;
                for (int q = 0; q < nreq; q++) {
                    if (reqs[q].cl != cl) continue;
                    timing tm = measure(policy_find(ep[e]), c, &reqs[q].r, nodes, res, scores, true);
                    row(ep[e], reqs[q].what, &tm);
                }
            }
        }
        free_nodes(nodes);
    }
    worker_quit = true;
    pthread_barrier_wait(&go);
    pthread_join(th, NULL);
    free(nodes);
    free(res);
    free(scores);
    policy_workload_free(w);
    policy_workload_free(mw);
    return 0;
}
