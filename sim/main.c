/* main.c -- the tessera-sim command line: parses options and dispatches to the
 * subcommands. No simulation happens here. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/catalog.h"
#include "policy/policy.h"
#include "sim/cluster.h"
#include "sim/demo.h"
#include "sim/fgd_paper.h"
#include "sim/gen.h"
#include "sim/plan.h"
#include "sim/progress.h"
#include "sim/quota.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/slowdown.h"
#include "sim/sweep.h"
#include "sim/trace.h"

/* The bundled demo cluster and trace (data/sim/), compiled in by the Makefile. */
extern const unsigned char sim_demo_sim_cluster_json[];
extern const size_t sim_demo_sim_cluster_json_len;
extern const unsigned char sim_demo_sim_trace_json[];
extern const size_t sim_demo_sim_trace_json_len;

#define DEFAULT_POLICIES "fgd,bestfit,binpack,spread,mig-aware"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tessera-sim <command> [options]\n"
            "\n"
            "commands:\n"
            "  demo [--policy NAME]      place one pod of every request form on a built-in cluster\n"
            "                            and explain each decision; policy default binpack\n"
            "  gen [--seed N] [--workloads N] [--hours H] [--mix training=0.2,inference=0.4,...]\n"
            "      [--tenants N] [--training-sizes 1=0.6,2=0.25,4=0.1,8=0.05] [-o FILE]\n"
            "                            write a synthetic trace (distributions in sim/README.md)\n"
            "  replay [--cluster FILE] [--trace FILE] [--policies a,b,..] [--seed N] [--samples N]\n"
            "         [--no-frag] [--soft-share-delivery reservation|none] [--json | --csv] [-o FILE]\n"
            "         [--svg FILE] [--alloc-svg FILE] [--quota SPEC ...] [--tenant-namespace T=NS,...]\n"
"         [--quota-mode M] [--comm-share C] [--compute-sharing M]\n"
            "                            replay the trace per policy: waits, slowdown, allocation,\n"
            "                            fragmentation, GPU-hours (default: the bundled demo; policies\n"
            "                            " DEFAULT_POLICIES ", seed 42, 100 samples)\n"
            "  plan [--cluster FILE] [--trace FILE] --target METRIC<=VALUE ... [--policies a,b,..]\n"
            "       [--sharing-options whole,timeslice:4,...] [--seed N] [--json | --csv] [-o FILE]\n"
            "       [--soft-share-delivery reservation|none] [--compute-sharing M] [--svg FILE]\n"
            "                            the smallest node count per group (and sharing) meeting the\n"
            "                            targets, e.g. --target \"wait.p95.inference<=30s\" or, per\n"
            "                            tenant, \"wait.p95.tenant:team-7<=2h\"; policies\n"
            "                            default fgd,bestfit,binpack; sharing options are whole,\n"
            "                            timeslice:N, mps:N, mig:<layout>, mig:<layout>+timeslice:N\n"
            "                            (layered), mig:on-demand, and soft:timeslice, soft:mps,\n"
            "                            soft:mps:tenant (every shared group whole, the trace's soft\n"
            "                            shares time-sliced or MPS; compared only); exit status 3: no\n"
            "                            cluster tried meets the targets\n"
            "  fgd-paper ...             the FGD paper's experiment (tessera-sim fgd-paper --help)\n"
            "  sweep ... / merge DIR     that experiment over a grid, locally or as a Kubernetes Indexed Job\n"
            "  convert openb ...         openb CSVs to a cluster and a trace (tessera-sim convert --help)\n"
            "\n"
            "  --quota NS=gpu-milli:N[,gpu-memory-mib:M][;NS=...]\n"
            "                            replay, plan: a namespace's GPU quota in the units tessera's\n"
            "                            webhook declares (README, Quotas); repeatable. A trace tenant\n"
            "                            is its own namespace unless --tenant-namespace TENANT=NS maps it\n"
            "  --quota-mode wait|fifo|refuse\n"
            "                            a workload over its namespace's quota waits until its charge\n"
            "                            fits (wait, default), waits with nobody of its namespace passing\n"
            "                            it (fifo), or is refused as ResourceQuota refuses a pod\n"
            "  --comm-share C            replay, plan: share of a multi-GPU pod's step spent communicating\n"
            "                            when its GPUs are NVLink-connected (0..1, default 0.05); a slower\n"
            "                            set stretches it by the bandwidth ratio (sim/slowdown.h); a trace\n"
            "                            workload's \"commShare\" overrides it\n"
            "  --compute-sharing M       replay, plan: how the trace's soft shares share a GPU's compute:\n"
            "                            trace (default: as each pod's tessera.io/compute-sharing says),\n"
            "                            timeslice (all time-sliced), mps (all MPS shares, one uid),\n"
            "                            mps:tenant (all MPS shares, a uid per tenant); an MPS share is\n"
            "                            capped at its SMs, never time-sliced (sim/slowdown.h)\n"
            "  --soft-share-delivery M   replay, plan: as tessera-extender's flag. reservation (default):\n"
            "                            a fraction never goes onto an MPS replica, which its\n"
            "                            reservation cannot hold; none: it may\n"
            "  -h, --help                this text\n"
            "policies: ");
    for (int i = 0; i < policy_count(); i++) fprintf(f, "%s%s", i ? ", " : "", policy_name(policy_at(i)));
    fprintf(f, "\n");
}

/* Options shared by replay and plan. */
typedef struct common {
    const char *cluster, *trace, *policies, *svg, *alloc_svg, *out;
    uint64_t seed;
    sim_format fmt;
    bool delivery_none;   /* --soft-share-delivery none */
    int samples;
    bool frag;
    sim_quotas quotas;    /* --quota, --tenant-namespace, --quota-mode */
    sim_comm_model comm;  /* --comm-share */
    sim_compute compute;  /* --compute-sharing */
} common;

static int need_arg(int argc, char **argv, int i, const char *cmd) {
    if (i + 1 < argc) return 0;
    fprintf(stderr, "tessera-sim %s: %s needs a value\n", cmd, argv[i]);
    return -1;
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end || s[0] == '-') return -1;
    *out = v;
    return 0;
}

/* 1 consumed (with its value), 0 not a common option, -1 error. */
static int common_opt(int argc, char **argv, int *i, common *c, const char *cmd) {
    const char *a = argv[*i];
    const char **str = !strcmp(a, "--cluster") ? &c->cluster : !strcmp(a, "--trace") ? &c->trace
                     : !strcmp(a, "--policies") || !strcmp(a, "--policy") ? &c->policies
                     : !strcmp(a, "--svg") ? &c->svg : !strcmp(a, "--alloc-svg") ? &c->alloc_svg
                     : !strcmp(a, "-o") ? &c->out : NULL;
    if (str) {
        if (need_arg(argc, argv, *i, cmd)) return -1;
        *str = argv[++*i];
        return 1;
    }
    if (!strcmp(a, "--seed") || !strcmp(a, "--samples")) {
        bool seed = !strcmp(a, "--seed");
        uint64_t v;
        if (need_arg(argc, argv, *i, cmd)) return -1;
        if (parse_u64(argv[*i + 1], &v) != 0 || (!seed && (v < 2 || v > 100000))) {
            fprintf(stderr, "tessera-sim %s: %s expects a whole number%s\n", cmd, a, seed ? "" : " in 2..100000");
            return -1;
        }
        ++*i;
        if (seed) c->seed = v;
        else c->samples = (int)v;
        return 1;
    }
    if (!strcmp(a, "--soft-share-delivery")) {
        if (need_arg(argc, argv, *i, cmd)) return -1;
        const char *v = argv[++*i];
        if (strcmp(v, "reservation") != 0 && strcmp(v, "none") != 0) {
            fprintf(stderr, "tessera-sim %s: --soft-share-delivery: reservation or none, as tessera-extender's\n", cmd);
            return -1;
        }
        c->delivery_none = !strcmp(v, "none");
        return 1;
    }
    if (!strcmp(a, "--quota") || !strcmp(a, "--tenant-namespace") || !strcmp(a, "--quota-mode")) {
        char err[300];
        if (need_arg(argc, argv, *i, cmd)) return -1;
        const char *v = argv[++*i];
        int rc = !strcmp(a, "--tenant-namespace") ? sim_quotas_map(&c->quotas, v, err, sizeof err)
               : !strcmp(a, "--quota-mode")       ? sim_quotas_mode(&c->quotas, v, err, sizeof err)
                                                   : sim_quotas_parse(&c->quotas, v, err, sizeof err);
        if (rc != 0) {
            fprintf(stderr, "tessera-sim %s: %s: %s\n", cmd, a, err);
            return -1;
        }
        return 1;
    }
    if (!strcmp(a, "--comm-share")) {
        if (need_arg(argc, argv, *i, cmd)) return -1;
        char *end;
        const char *v = argv[++*i];
        double x = strtod(v, &end);
        if (end == v || *end || !(x >= 0 && x <= 1)) {
            fprintf(stderr, "tessera-sim %s: --comm-share: a number in 0..1 (the share of a multi-GPU step spent "
                    "communicating over NVLink), not \"%s\"\n", cmd, v);
            return -1;
        }
        c->comm.share = x;
        return 1;
    }
    if (!strcmp(a, "--compute-sharing")) {
        char err[160];
        if (need_arg(argc, argv, *i, cmd)) return -1;
        if (sim_compute_parse(argv[++*i], &c->compute, err, sizeof err) != 0) {
            fprintf(stderr, "tessera-sim %s: --compute-sharing: %s\n", cmd, err);
            return -1;
        }
        return 1;
    }
    if (!strcmp(a, "--json")) return c->fmt = SIM_FMT_JSON, 1;
    if (!strcmp(a, "--csv")) return c->fmt = SIM_FMT_CSV, 1;
    if (!strcmp(a, "--no-frag")) return c->frag = false, 1;
    return 0;
}

/* A quota whose namespace no tenant of the trace maps to limits nobody: most likely a misspelt
 * name, so say so (the run goes on). */
static void warn_unused_quotas(const common *c, const sim_trace *tr, const char *cmd) {
    for (int i = 0; i < c->quotas.n; i++) {
        bool used = false;
        for (int k = 0; k < tr->ntenants && !used; k++)
            used = !strcmp(sim_quotas_namespace(&c->quotas, tr->tenants[k]), c->quotas.q[i].ns);
        if (!used)
            fprintf(stderr, "tessera-sim %s: warning: no tenant of the trace is in namespace \"%s\": its quota limits "
                            "nobody (tenants are their own namespace unless --tenant-namespace maps them)\n",
                    cmd, c->quotas.q[i].ns);
    }
}

static int load_inputs(const common *c, sim_cluster **cl, sim_trace **tr, const char *cmd) {
    char err[600];
    *cl = NULL;
    *tr = NULL;
    *cl = c->cluster ? sim_cluster_from_file(c->cluster, NULL, err, sizeof err)
                     : sim_cluster_from_json((const char *)sim_demo_sim_cluster_json, sim_demo_sim_cluster_json_len,
                                             NULL, err, sizeof err);
    if (!*cl) {
        fprintf(stderr, "tessera-sim %s: %s\n", cmd, err);
        return -1;
    }
    *tr = c->trace ? sim_trace_from_file(c->trace, err, sizeof err)
                   : sim_trace_from_json((const char *)sim_demo_sim_trace_json, sim_demo_sim_trace_json_len, err,
                                         sizeof err);
    if (*tr && c->compute != SIM_COMPUTE_TRACE) {
        sim_trace *as = sim_trace_compute_sharing(*tr, c->compute, err, sizeof err);
        sim_trace_free(*tr);
        *tr = as;
    }
    if (!*tr) {
        fprintf(stderr, "tessera-sim %s: %s\n", cmd, err);
        sim_cluster_free(*cl);
        *cl = NULL;
        return -1;
    }
    return 0;
}

/* Split "a,b,c" into at most max policy names, each checked against the registry. */
static int split_policies(const char *s, char names[][32], int max, const char *cmd) {
    int n = 0;
    const char *p = s;
    while (*p) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= 32 || n == max) {
            fprintf(stderr, "tessera-sim %s: bad --policies \"%s\"\n", cmd, s);
            return -1;
        }
        memcpy(names[n], p, len);
        names[n][len] = 0;
        if (!sim_fgd_policy_find(names[n], NULL)) {
            fprintf(stderr, "tessera-sim %s: unknown policy \"%s\" (NAME@online: estimate the target workload "
                            "from arrivals); known:", cmd, names[n]);
            for (int i = 0; i < policy_count(); i++) fprintf(stderr, " %s", policy_name(policy_at(i)));
            fputc('\n', stderr);
            return -1;
        }
        n++;
        p += len + (p[len] == ',');
    }
    return n;
}

static FILE *open_out(const char *path, const char *cmd) {
    if (!path || !strcmp(path, "-")) return stdout;
    FILE *f = fopen(path, "w");
    if (!f) perror(path), fprintf(stderr, "tessera-sim %s: cannot write %s\n", cmd, path);
    return f;
}

static int cmd_gen(int argc, char **argv) {
    sim_gen_opts o;
    sim_gen_defaults(&o);
    const char *out = NULL;
    char err[300];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        if (need_arg(argc, argv, i, "gen")) return 2;
        const char *v = argv[++i];
        char *end;
        if (!strcmp(a, "--seed")) { uint64_t s; if (parse_u64(v, &s)) goto bad; o.seed = s; }
        else if (!strcmp(a, "--workloads")) { o.workloads = strtol(v, &end, 10); if (*end || end == v) goto bad; }
        else if (!strcmp(a, "--hours")) { o.hours = strtod(v, &end); if (*end || end == v) goto bad; }
        else if (!strcmp(a, "--tenants")) { o.tenants = (int)strtol(v, &end, 10); if (*end || end == v) goto bad; }
        else if (!strcmp(a, "--mix")) {
            if (sim_gen_parse_mix(v, &o, err, sizeof err) != 0) { fprintf(stderr, "tessera-sim gen: %s\n", err); return 2; }
        } else if (!strcmp(a, "--training-sizes")) {
            if (sim_gen_parse_training_sizes(v, &o, err, sizeof err) != 0) {
                fprintf(stderr, "tessera-sim gen: %s\n", err);
                return 2;
            }
        } else if (!strcmp(a, "-o")) out = v;
        else { fprintf(stderr, "tessera-sim gen: unknown option \"%s\"\n", a); return 2; }
        continue;
    bad:
        fprintf(stderr, "tessera-sim gen: %s: \"%s\" is not a number\n", a, v);
        return 2;
    }
    sim_trace *t = sim_gen(&o, err, sizeof err);
    if (!t) { fprintf(stderr, "tessera-sim gen: %s\n", err); return 2; }
    FILE *f = open_out(out, "gen");
    int rc = f && sim_trace_write(t, f) == 0 ? 0 : 1;
    if (f && f != stdout && fclose(f) != 0) rc = 1;
    if (out && rc == 0) fprintf(stderr, "wrote %d workloads to %s\n", t->n, out);
    sim_trace_free(t);
    return rc;
}

/* Run fn(ctx, 0..n-1) on as many threads as there are cores (policies are independent
 * runs over read-only inputs). */
typedef struct pool {
    atomic_int next;
    int n;
    void (*fn)(void *ctx, int i);
    void *ctx;
} pool;

static void *pool_worker(void *arg) {
    pool *p = arg;
    for (int i; (i = atomic_fetch_add(&p->next, 1)) < p->n;) p->fn(p->ctx, i);
    return NULL;
}

static void run_parallel(int n, void (*fn)(void *ctx, int i), void *ctx) {
    pool p = {.n = n, .fn = fn, .ctx = ctx};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nthreads = ncpu < 1 ? 1 : ncpu < n ? (int)ncpu : n;
    pthread_t th[64];
    if (nthreads > 64) nthreads = 64;
    int started = 1;
    for (; started < nthreads; started++)
        if (pthread_create(&th[started], NULL, pool_worker, &p) != 0) break;
    pool_worker(&p);
    for (int i = 1; i < started; i++) pthread_join(th[i], NULL);
}

typedef struct replay_job {
    const sim_cluster *cl;
    const sim_trace *tr;
    const common *c;
    char (*names)[32];
    sim_progress progress;
    sim_replay_result res[16];
    bool failed[16];
    char err[16][600];
} replay_job;

static void replay_one(void *arg, int i) {
    replay_job *j = arg;
    sim_replay_opts o;
    sim_replay_defaults(&o);
    o.policy = j->names[i];
    o.seed = j->c->seed;
    o.samples = j->c->samples;
    o.frag = j->c->frag;
    o.soft_share_delivery_none = j->c->delivery_none;
    o.quotas = j->c->quotas.n ? &j->c->quotas : NULL;
    o.comm = &j->c->comm;
    o.progress = &j->progress;
    j->failed[i] = sim_replay(j->cl, j->tr, &o, &j->res[i], j->err[i], sizeof j->err[i]) != 0;
}

static int cmd_replay(int argc, char **argv) {
    common c = {.policies = DEFAULT_POLICIES, .seed = 42, .samples = 100, .frag = true};
    sim_comm_defaults(&c.comm);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        int rc = common_opt(argc, argv, &i, &c, "replay");
        if (rc < 0) return 2;
        if (rc == 0) { fprintf(stderr, "tessera-sim replay: unknown option \"%s\"\n", argv[i]); return 2; }
    }
    char names[16][32], err[600];
    int np = split_policies(c.policies, names, 16, "replay");
    if (np <= 0) return 2;
    sim_cluster *cl;
    sim_trace *tr;
    if (load_inputs(&c, &cl, &tr, "replay") != 0) return 2;
    warn_unused_quotas(&c, tr, "replay");
    replay_job job = {.cl = cl, .tr = tr, .c = &c, .names = names};
    sim_progress_start(&job.progress, "replay", (long)np * tr->n);
    run_parallel(np, replay_one, &job);
    sim_progress_end(&job.progress);
    sim_replay_result *res = job.res;
    int rc = 0;
    for (int i = 0; i < np; i++)
        if (job.failed[i]) {
            fprintf(stderr, "tessera-sim replay: %s: %s\n", names[i], job.err[i]);
            rc = 1;
        }
    if (rc == 0) {
        FILE *f = open_out(c.out, "replay");
        if (!f) rc = 1;
        else {
            if (c.fmt == SIM_FMT_TABLE)
                fprintf(f, "replay: %d workloads on %d nodes (%d GPUs), seed %llu\n", tr->n, sim_cluster_nodes(cl),
                        sim_cluster_gpus(cl), (unsigned long long)c.seed);
            sim_report_replay(f, c.fmt, res, np);
            if (f != stdout) fclose(f);
        }
        if (c.svg && sim_report_replay_svg(c.svg, c.alloc_svg, res, np, err, sizeof err) != 0) {
            fprintf(stderr, "tessera-sim replay: chart: %s\n", err);
            rc = 1;
        } else if (c.svg) {
            fprintf(c.fmt == SIM_FMT_TABLE && !c.out ? stdout : stderr, "chart: %s%s%s\n", c.svg,
                    c.alloc_svg ? ", " : "", c.alloc_svg ? c.alloc_svg : "");
        }
    }
    for (int i = 0; i < np; i++)
        if (!job.failed[i]) sim_replay_result_free(&res[i]);
    sim_cluster_free(cl);
    sim_trace_free(tr);
    return rc;
}

static int parse_sharing_list(const char *s, sim_plan_opts *o) {
    char buf[512], err[256];
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (o->nsharing == SIM_PLAN_MAX_SHARING) {
            fprintf(stderr, "tessera-sim plan: at most %d --sharing-options\n", SIM_PLAN_MAX_SHARING);
            return -1;
        }
        int k = o->nsharing++, soft = sim_plan_soft_parse(tok, &o->soft[k], err, sizeof err);
        if (soft < 0 || sim_sharing_parse(soft ? "whole" : tok, &o->sharing[k], err, sizeof err) != 0) {
            fprintf(stderr, "tessera-sim plan: --sharing-options: %s\n", err);
            return -1;
        }
    }
    return 0;
}

typedef struct plan_job {
    const sim_cluster *cl;
    const sim_trace *tr;
    const sim_plan_opts *o;
    char (*names)[32];
    sim_progress progress;
    sim_plan_result res[16];
    bool failed[16];
    char err[16][600];
} plan_job;

static void plan_one(void *arg, int i) {
    plan_job *j = arg;
    j->failed[i] = sim_plan(j->cl, j->tr, j->names[i], j->o, &j->res[i], j->err[i], sizeof j->err[i]) != 0;
    sim_progress_add(&j->progress, 1);
}

static int cmd_plan(int argc, char **argv) {
    common c = {.policies = "fgd,bestfit,binpack", .seed = 42, .samples = 2, .frag = false};
    sim_comm_defaults(&c.comm);
    sim_plan_opts po = {0};
    char err[600];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        if (!strcmp(a, "--target")) {
            if (need_arg(argc, argv, i, "plan")) return 2;
            if (po.ntargets == SIM_PLAN_MAX_TARGETS) { fprintf(stderr, "tessera-sim plan: too many --target\n"); return 2; }
            if (sim_target_parse(argv[++i], &po.targets[po.ntargets++], err, sizeof err) != 0) {
                fprintf(stderr, "tessera-sim plan: %s\n", err);
                return 2;
            }
            continue;
        }
        if (!strcmp(a, "--sharing-options")) {
            if (need_arg(argc, argv, i, "plan") || parse_sharing_list(argv[++i], &po) != 0) return 2;
            continue;
        }
        int rc = common_opt(argc, argv, &i, &c, "plan");
        if (rc < 0) return 2;
        if (rc == 0) { fprintf(stderr, "tessera-sim plan: unknown option \"%s\"\n", a); return 2; }
    }
    if (po.ntargets == 0) {
        fprintf(stderr, "tessera-sim plan: give at least one --target, e.g. --target \"wait.p95.inference<=30s\"\n");
        return 2;
    }
    po.seed = c.seed;
    po.soft_share_delivery_none = c.delivery_none;
    po.quotas = c.quotas.n ? &c.quotas : NULL;
    po.comm = &c.comm;
    char names[16][32];
    int np = split_policies(c.policies, names, 16, "plan");
    if (np <= 0) return 2;
    sim_cluster *cl;
    sim_trace *tr;
    if (load_inputs(&c, &cl, &tr, "plan") != 0) return 2;
    warn_unused_quotas(&c, tr, "plan");
    plan_job job = {.cl = cl, .tr = tr, .o = &po, .names = names};
    sim_progress_start(&job.progress, "plan", np);
    run_parallel(np, plan_one, &job);
    sim_progress_end(&job.progress);
    sim_plan_result *res = job.res;
    int rc = 0;
    for (int i = 0; i < np; i++)
        if (job.failed[i]) {
            fprintf(stderr, "tessera-sim plan: %s: %s\n", names[i], job.err[i]);
            rc = 1;
        }
    if (rc == 0) {
        FILE *f = open_out(c.out, "plan");
        if (!f) rc = 1;
        else {
            if (c.fmt == SIM_FMT_TABLE) {
                fprintf(f, "plan: %d workloads; targets:", tr->n);
                for (int t = 0; t < po.ntargets; t++) fprintf(f, " %s", po.targets[t].text);
                fprintf(f, "\n");
            }
            sim_report_plan(f, c.fmt, res, np);
            if (f != stdout) fclose(f);
        }
        if (c.svg && sim_report_plan_svg(c.svg, res, np, err, sizeof err) != 0) {
            fprintf(stderr, "tessera-sim plan: chart: %s\n", err);
            rc = 1;
        } else if (c.svg) {
            fprintf(c.fmt == SIM_FMT_TABLE && !c.out ? stdout : stderr, "chart: %s\n", c.svg);
        }
        for (int i = 0; i < np && rc == 0; i++)
            if (!res[i].met) rc = 3;   /* scripts can tell "no cluster meets the targets" */
    }
    for (int i = 0; i < np; i++)
        if (!job.failed[i]) sim_plan_result_free(&res[i]);
    sim_cluster_free(cl);
    sim_trace_free(tr);
    return rc;
}

static int cmd_demo(int argc, char **argv) {
    const char *pol = "binpack";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--policy") && i + 1 < argc) pol = argv[++i];
        else if (!strncmp(argv[i], "--policy=", 9)) pol = argv[i] + 9;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { usage(stdout); return 0; }
        else {
            fprintf(stderr, "tessera-sim demo: unknown option \"%s\"\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    return sim_demo_run(pol, stdout);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "demo")) return cmd_demo(argc - 1, argv + 1);
    if (!strcmp(cmd, "gen")) return cmd_gen(argc - 1, argv + 1);
    if (!strcmp(cmd, "replay")) return cmd_replay(argc - 1, argv + 1);
    if (!strcmp(cmd, "plan")) return cmd_plan(argc - 1, argv + 1);
    if (!strcmp(cmd, "fgd-paper")) return sim_cmd_fgd_paper(argc - 1, argv + 1);
    if (!strcmp(cmd, "convert")) return sim_cmd_convert(argc - 1, argv + 1);
    if (!strcmp(cmd, "sweep")) return sim_cmd_sweep(argc - 1, argv + 1);
    if (!strcmp(cmd, "merge")) return sim_cmd_merge(argc - 1, argv + 1);
    fprintf(stderr, "tessera-sim: unknown command \"%s\"\n", cmd);
    usage(stderr);
    return 2;
}
