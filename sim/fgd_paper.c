/* fgd_paper.c -- the FGD paper's arrival-only experiment (see fgd_paper.h): arrival
 * sequences, one run per thread, bucketed measures, the authors' CSV layout, the chart
 * and the command line. Placement itself is policy_inc_place; nothing here decides
 * where a pod goes.
 */
#include "sim/fgd_paper.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "model/fit.h"
#include "policy/incremental.h"
#include "policy/policy.h"
#include "sim/openb.h"
#include "sim/progress.h"
#include "sim/svg.h"

#define DEFAULT_TUNE 1.3

/* ---------------------------------------------------------------- seeded stream */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n). */
static int draw(uint64_t *s, int n) { return (int)(((unsigned __int128)splitmix(s) * (unsigned)n) >> 64); }

/* ---------------------------------------------------------------- inputs */

typedef struct list_data {
    const char *name;
    int npods;
    sim_openb_pod *pods;        /* sorted by name */
    model_request *req;
    int64_t total_milli;        /* GPU milli the whole list asks for */
    policy_workload *w;         /* its target workload (fgd) */
} list_data;

typedef struct job {
    int list, policy;
    uint64_t seed;
    int ntasks;
    int *seq;                   /* pod indices in arrival order */
} job;

typedef struct grid {
    const sim_fgd_opts *o;
    const policy **pol;
    bool *online;               /* per policy: "@online", the estimate instead of the list's workload */
    list_data *lists;
    sim_openb_node *nodes;
    int nnodes, gpus;
    job *jobs;
    int njobs;
    atomic_int next;
    sim_fgd_result *out;
    sim_progress prog;
    atomic_int failed_runs;
    char err[256];              /* first run error (guarded by errlock) */
    pthread_mutex_t errlock;
} grid;

static int by_name(const void *a, const void *b) {
    return strcmp(((const sim_openb_pod *)a)->name, ((const sim_openb_pod *)b)->name);
}

static int load_list(const sim_fgd_opts *o, const char *name, list_data *L, char *err, size_t errlen) {
    memset(L, 0, sizeof *L);
    L->name = name;
    if (sim_openb_load_pod_list(o->data_dir, name, &L->pods, &L->npods, err, errlen) < 0) return -1;
    qsort(L->pods, (size_t)L->npods, sizeof *L->pods, by_name);
    L->req = malloc((size_t)L->npods * sizeof *L->req);
    L->w = policy_workload_new();
    if (!L->req || !L->w) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < L->npods; i++) {
        sim_openb_request(&L->pods[i], &L->req[i]);
        L->total_milli += sim_openb_pod_gpu_milli(&L->pods[i]);
        if (policy_workload_add(L->w, &L->req[i], 1, err, errlen) < 0) return -1;
    }
    return policy_workload_finish(L->w, 95.0, err, errlen);
}

static void free_list(list_data *L) {
    free(L->pods);
    free(L->req);
    policy_workload_free(L->w);
}

/* Steps 1-2 of fgd_paper.h: shuffle, then inflate (or thin) to tune x capacity. */
static int make_sequence(const list_data *L, uint64_t seed, double target_milli, job *j) {
    uint64_t s = seed;
    int n = L->npods, cap = n + 64, len = n;
    int *seq = malloc((size_t)cap * sizeof *seq);
    if (!seq) return -1;
    for (int i = 0; i < n; i++) seq[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int k = draw(&s, i + 1), t = seq[i];
        seq[i] = seq[k];
        seq[k] = t;
    }
    int64_t total = L->total_milli;
    if ((double)total <= target_milli) {
        for (;;) {
            int k = draw(&s, n);
            int64_t g = sim_openb_pod_gpu_milli(&L->pods[k]);
            if ((double)(total + g) > target_milli) break;
            if (len == cap) {
                cap *= 2;
                int *ns = realloc(seq, (size_t)cap * sizeof *seq);
                if (!ns) {
                    free(seq);
                    return -1;
                }
                seq = ns;
            }
            seq[len++] = k;
            total += g;
        }
    } else {
        /* thin: drop random pods (keeping the shuffled order) until under the target */
        while ((double)total > target_milli && len > 0) {
            int k = draw(&s, len);
            total -= sim_openb_pod_gpu_milli(&L->pods[seq[k]]);
            memmove(seq + k, seq + k + 1, (size_t)(len - k - 1) * sizeof *seq);
            len--;
        }
    }
    j->seq = seq;
    j->ntasks = len;
    return 0;
}

/* ---------------------------------------------------------------- one run */

static int node_free_milli(const model_node *n) {
    int f = 0;
    for (int g = 0; g < n->ngpus; g++) f += policy_gpu_free(&n->gpus[g]);
    return f;
}

static void run_error(grid *G, const char *msg) {
    pthread_mutex_lock(&G->errlock);
    if (!G->err[0]) snprintf(G->err, sizeof G->err, "%s", msg);
    pthread_mutex_unlock(&G->errlock);
    atomic_fetch_add(&G->failed_runs, 1);
}

static void run_one(grid *G, const job *j, sim_fgd_run *out) {
    char err[256];
    const list_data *L = &G->lists[j->list];
    memset(out, 0, sizeof *out);
    out->list = j->list;
    out->policy = j->policy;
    out->seed = j->seed;
    out->tasks = j->ntasks;

    sim_openb_cluster *c = sim_openb_cluster_new(G->nodes, G->nnodes, err, sizeof err);
    double *fragn = c ? malloc((size_t)c->n * sizeof *fragn) : NULL;
    int *freen = c ? malloc((size_t)c->n * sizeof *freen) : NULL;
    policy_ctx ctx;
    policy_ctx_init(&ctx, j->seed);
    ctx.workload = L->w;
    policy_inc *inc = c ? policy_inc_new(G->pol[j->policy], &ctx, c->nodes, c->n, 0) : NULL;
    policy_result *scratch = c && G->o->full_scoring ? malloc((size_t)c->n * sizeof *scratch) : NULL;
    policy_online *est = NULL;
    if (c && G->online[j->policy]) {
        est = policy_online_new(G->o->half_life > 0 ? G->o->half_life : POLICY_ONLINE_HALF_LIFE,
                                G->o->warmup > 0 ? G->o->warmup : G->o->warmup < 0 ? 0 : POLICY_ONLINE_WARMUP, err, sizeof err);
        if (!est) {
            run_error(G, err);
            goto done;
        }
    }
    if (!c || !fragn || !freen || !inc || (G->o->full_scoring && !scratch)) {
        run_error(G, c ? "out of memory" : err);
        goto done;
    }
    double cap = 1000.0 * c->gpus, F = 0, FREE = 0;
    for (int i = 0; i < c->n; i++) {
        fragn[i] = policy_frag_node(c->nodes[i], L->w, NULL);
        freen[i] = node_free_milli(c->nodes[i]);
        F += fragn[i];
        FREE += freen[i];
    }
    static const int CHUNK = 512;   /* progress ticks in chunks: fewer atomics */
    double sa[SIM_FGD_BUCKETS] = {0}, sf[SIM_FGD_BUCKETS] = {0}, sr[SIM_FGD_BUCKETS] = {0};
    long cnt[SIM_FGD_BUCKETS] = {0};
    int64_t arrived = 0;
    for (int k = 0; k < j->ntasks; k++) {
        int pod = j->seq[k];
        model_assignment a;
        int i;
        if (est) {   /* the pod has arrived: it counts in the estimate it is placed with */
            int changed = policy_online_observe(est, &L->req[pod], err, sizeof err);
            if (changed < 0) {
                run_error(G, err);
                goto done;
            }
            if (changed) {
                ctx.workload = policy_online_current(est);
                policy_inc_set_workload(inc, ctx.workload);
            }
        }
        if (scratch) {
            ctx.decision = (uint64_t)k;
            i = policy_place(G->pol[j->policy], &ctx, &L->req[pod], c->nodes, c->n, scratch, &a, NULL, 0);
        } else {
            i = policy_inc_place(inc, &L->req[pod], (uint64_t)k, &a, NULL, 0);
        }
        if (i >= 0) {
            char uid[24];
            snprintf(uid, sizeof uid, "t%d", k);
            if (model_assign(c->nodes[i], uid, &a, err, sizeof err) < 0) {
                run_error(G, err);   /* the policy proposed what the model refuses: a bug, say so */
                goto done;
            }
            policy_inc_touch(inc, i);
            double f1 = policy_frag_node(c->nodes[i], L->w, NULL);
            int fr1 = node_free_milli(c->nodes[i]);
            F += f1 - fragn[i];
            FREE += fr1 - freen[i];
            fragn[i] = f1;
            freen[i] = fr1;
        } else {
            out->failed++;
        }
        arrived += sim_openb_pod_gpu_milli(&L->pods[pod]);
        int x = (int)nearbyint(100.0 * (double)arrived / cap);
        x = x < 0 ? 0 : x >= SIM_FGD_BUCKETS ? SIM_FGD_BUCKETS - 1 : x;
        sa[x] += 100.0 * (cap - FREE) / cap;
        sf[x] += 100.0 * F / cap;
        sr[x] += FREE > 0 ? 100.0 * F / FREE : 0.0;
        cnt[x]++;
        if (k % CHUNK == CHUNK - 1) sim_progress_add(&G->prog, CHUNK);
    }
    sim_progress_add(&G->prog, j->ntasks % CHUNK);
    for (int x = 0; x < SIM_FGD_BUCKETS; x++) {
        if (cnt[x]) {
            out->alloc[x] = sa[x] / (double)cnt[x];
            out->frag[x] = sf[x] / (double)cnt[x];
            out->ratio[x] = sr[x] / (double)cnt[x];
        } else if (x > 0) {   /* no event landed here: the state has not moved */
            out->alloc[x] = out->alloc[x - 1];
            out->frag[x] = out->frag[x - 1];
            out->ratio[x] = out->ratio[x - 1];
        }
    }
done:
    policy_inc_free(inc);
    policy_online_free(est);
    free(scratch);
    free(fragn);
    free(freen);
    sim_openb_cluster_free(c);
}

static void *worker(void *arg) {
    grid *G = arg;
    for (;;) {
        int k = atomic_fetch_add(&G->next, 1);
        if (k >= G->njobs || atomic_load(&G->failed_runs)) break;
        run_one(G, &G->jobs[k], &G->out->runs[k]);
    }
    return NULL;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int sim_fgd_run_grid(const sim_fgd_opts *o, sim_fgd_result *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!o || o->npolicies <= 0 || o->nseeds <= 0 || o->nlists <= 0) {
        snprintf(err, errlen, "fgd-paper: need at least one policy, seed and pod list");
        return -1;
    }
    double t0 = now_s();
    grid G;
    memset(&G, 0, sizeof G);
    G.o = o;
    G.out = out;
    pthread_mutex_init(&G.errlock, NULL);
    int rc = -1;
    G.pol = calloc((size_t)o->npolicies, sizeof *G.pol);
    G.lists = calloc((size_t)o->nlists, sizeof *G.lists);
    if (!G.pol || !G.lists) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    G.online = calloc((size_t)o->npolicies, sizeof *G.online);
    if (!G.online) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (int i = 0; i < o->npolicies; i++) {
        if (!(G.pol[i] = sim_fgd_policy_find(o->policies[i], &G.online[i]))) {
            snprintf(err, errlen, "unknown policy \"%s\"", o->policies[i]);
            goto done;
        }
    }
    char path[1024];
    if (o->data_dir) snprintf(path, sizeof path, "%s/openb_node_list_gpu_node.csv", o->data_dir);
    if (sim_openb_load_nodes(o->data_dir ? path : NULL, &G.nodes, &G.nnodes, err, errlen) < 0) goto done;
    for (int i = 0; i < G.nnodes; i++) G.gpus += G.nodes[i].gpus;
    if (G.gpus == 0) {
        snprintf(err, errlen, "the node list has no GPUs");
        goto done;
    }
    for (int l = 0; l < o->nlists; l++)
        if (load_list(o, o->lists[l], &G.lists[l], err, errlen) < 0) goto done;

    double tune = o->tune > 0 ? o->tune : DEFAULT_TUNE;
    G.njobs = o->nlists * o->npolicies * o->nseeds;
    G.jobs = calloc((size_t)G.njobs, sizeof *G.jobs);
    out->runs = calloc((size_t)G.njobs, sizeof *out->runs);
    if (!G.jobs || !out->runs) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    long total_tasks = 0;
    for (int l = 0, k = 0; l < o->nlists; l++)
        for (int p = 0; p < o->npolicies; p++)
            for (int s = 0; s < o->nseeds; s++, k++) {
                job *j = &G.jobs[k];
                j->list = l;
                j->policy = p;
                j->seed = o->seeds[s];
                if (make_sequence(&G.lists[l], j->seed, tune * 1000.0 * G.gpus, j) < 0) {
                    snprintf(err, errlen, "out of memory");
                    goto done;
                }
                total_tasks += j->ntasks;
            }
    out->nruns = G.njobs;
    out->total_gpus = G.gpus;

    int nth = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (nth < 1) nth = 1;
    if (nth > G.njobs) nth = G.njobs;
    sim_progress_start(&G.prog, "fgd-paper", o->progress ? total_tasks : 0);
    pthread_t *th = calloc((size_t)nth, sizeof *th);
    int started = 0;
    for (int t = 1; th && t < nth; t++)
        if (pthread_create(&th[t], NULL, worker, &G) == 0) started = t;
        else break;
    worker(&G);   /* the calling thread is worker 0 */
    for (int t = 1; t <= started; t++) pthread_join(th[t], NULL);
    free(th);
    sim_progress_end(&G.prog);
    if (atomic_load(&G.failed_runs)) {
        snprintf(err, errlen, "a run failed: %s", G.err);
        goto done;
    }
    out->seconds = now_s() - t0;
    rc = 0;
done:
    for (int k = 0; G.jobs && k < G.njobs; k++) free(G.jobs[k].seq);
    free(G.jobs);
    for (int l = 0; G.lists && l < o->nlists; l++) free_list(&G.lists[l]);
    free(G.lists);
    free(G.pol);
    free(G.online);
    free(G.nodes);
    pthread_mutex_destroy(&G.errlock);
    if (rc < 0) sim_fgd_result_free(out);
    return rc;
}

void sim_fgd_result_free(sim_fgd_result *r) {
    if (!r) return;
    free(r->runs);
    memset(r, 0, sizeof *r);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    if (n == 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Median over the seeds of one measure at bucket x (alloc, or 100 - alloc). */
static double median_at(const sim_fgd_result *r, int list, int pol, int x, bool unalloc) {
    double *v = malloc((size_t)(r->nruns ? r->nruns : 1) * sizeof *v);
    int n = 0;
    for (int k = 0; v && k < r->nruns; k++)
        if (r->runs[k].list == list && r->runs[k].policy == pol)
            v[n++] = unalloc ? 100.0 - r->runs[k].alloc[x] : r->runs[k].alloc[x];
    double m = v ? median(v, n) : NAN;
    free(v);
    return m;
}

double sim_fgd_median_unalloc(const sim_fgd_result *r, int list, int pol, int x) {
    if (!r || x < 0 || x >= SIM_FGD_BUCKETS) return NAN;
    return median_at(r, list, pol, x, true);
}

/* ---------------------------------------------------------------- output */

static const struct { const char *name, *label; } labels[] = {
    {"random", "01-Random"},   {"dotprod", "02-DotProd"}, {"gpuclustering", "03-GpuClustering"},
    {"gpupacking", "04-GpuPacking"}, {"bestfit", "05-BestFit"}, {"fgd", "06-FGD"},
    {"binpack", "07-Binpack"}, {"spread", "08-Spread"}, {"mig-aware", "09-MigAware"},
    {"fgd-pack", "10-FGDPack"},
};

#define ONLINE_SUFFIX "@online"

const policy *sim_fgd_policy_find(const char *name, bool *online) {
    char base[64];
    size_t l = strlen(name), sl = strlen(ONLINE_SUFFIX);
    bool on = l > sl && !strcmp(name + l - sl, ONLINE_SUFFIX);
    if (l >= sizeof base) return NULL;
    snprintf(base, sizeof base, "%.*s", (int)(on ? l - sl : l), name);
    if (online) *online = on;
    return policy_find(base);
}

void sim_fgd_policy_label(const char *name, char *buf, size_t len) {
    bool on = false;
    const policy *p = sim_fgd_policy_find(name, &on);
    const char *base = p ? policy_name(p) : name;
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++)
        if (!strcmp(labels[i].name, base)) {
            snprintf(buf, len, "%s%s", labels[i].label, on ? "-online" : "");
            return;
        }
    snprintf(buf, len, "99-%s", name);
}

/* Python's repr of round(v, 2) (what the authors' files hold): "12.0", "13.1", "0.25". */
static void fmt2(char *buf, size_t len, double v) {
    snprintf(buf, len, "%.2f", v);
    size_t l = strlen(buf);
    while (l > 0 && buf[l - 1] == '0' && l >= 2 && buf[l - 2] != '.') buf[--l] = 0;
}

/* Full precision, always with a decimal point ("98.0"), as Python prints a float. */
static void fmtfull(char *buf, size_t len, double v) {
    snprintf(buf, len, "%.15g", v);
    if (!strpbrk(buf, ".en")) snprintf(buf + strlen(buf), len - strlen(buf), ".0");
}

enum { OUT_ALLO, OUT_FRAG, OUT_RATIO };

static int write_csv(const sim_fgd_result *r, const sim_fgd_opts *o, const char *path, int what, char *err,
                     size_t errlen) {
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "workload,sc_policy,tune,seed%s", what == OUT_ALLO ? ",total_gpus" : "");
    for (int x = 0; x < SIM_FGD_BUCKETS; x++) fprintf(f, ",%d", x);
    fputc('\n', f);
    for (int k = 0; k < r->nruns; k++) {
        const sim_fgd_run *u = &r->runs[k];
        char label[64], num[64];
        sim_fgd_policy_label(o->policies[u->policy], label, sizeof label);
        fprintf(f, "openb_pod_list_%s,%s,%g,%llu", o->lists[u->list], label, o->tune > 0 ? o->tune : DEFAULT_TUNE,
                (unsigned long long)u->seed);
        if (what == OUT_ALLO) fprintf(f, ",%d", r->total_gpus);
        for (int x = 0; x < SIM_FGD_BUCKETS; x++) {
            if (what == OUT_RATIO) fmtfull(num, sizeof num, u->ratio[x]);
            else fmt2(num, sizeof num, what == OUT_ALLO ? u->alloc[x] : u->frag[x]);
            fprintf(f, ",%s", num);
        }
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        snprintf(err, errlen, "cannot write %s", path);
        return -1;
    }
    return 0;
}

int sim_fgd_write(const sim_fgd_result *r, const sim_fgd_opts *o, const char *dir, char *err, size_t errlen) {
    if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    static const char *const files[] = {"analysis_allo_discrete.csv", "analysis_frag_discrete.csv",
                                        "analysis_frag_ratio_discrete.csv"};
    char path[1200];
    for (int w = 0; w < 3; w++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[w]);
        if (write_csv(r, o, path, w, err, errlen) < 0) return -1;
    }
    double xs[SIM_FGD_BUCKETS];
    for (int x = 0; x < SIM_FGD_BUCKETS; x++) xs[x] = x;
    double *ys = malloc((size_t)o->npolicies * SIM_FGD_BUCKETS * sizeof *ys);
    sim_series *s = malloc((size_t)o->npolicies * sizeof *s);
    int rc = ys && s ? 0 : -1;
    if (rc) snprintf(err, errlen, "out of memory");
    for (int l = 0; !rc && l < o->nlists; l++) {
        for (int p = 0; p < o->npolicies; p++) {
            for (int x = 0; x < SIM_FGD_BUCKETS; x++) ys[p * SIM_FGD_BUCKETS + x] = median_at(r, l, p, x, false);
            s[p] = (sim_series){o->policies[p], xs, ys + p * SIM_FGD_BUCKETS, SIM_FGD_BUCKETS};
        }
        char title[160];
        snprintf(title, sizeof title, "GPU allocation, openb %s, median of %d seed(s)", o->lists[l], o->nseeds);
        snprintf(path, sizeof path, "%s/alloc_%s.svg", dir, o->lists[l]);
        rc = sim_svg_lines(path, title, "arrived GPU request, % of capacity", "allocated GPUs, % of capacity", s,
                           o->npolicies, true, err, errlen);
        /* the paper's Fig. 9(a): unallocated % against arrived %, zoomed on 75..120 */
        for (int p = 0; p < o->npolicies; p++)
            for (int x = 0; x < SIM_FGD_BUCKETS; x++) ys[p * SIM_FGD_BUCKETS + x] = 100 - ys[p * SIM_FGD_BUCKETS + x];
        snprintf(title, sizeof title, "Unallocated GPUs, openb %s, median of %d seed(s)", o->lists[l], o->nseeds);
        snprintf(path, sizeof path, "%s/unalloc_%s.svg", dir, o->lists[l]);
        sim_svg_window zoom = {75, 120, 0, 25};
        if (!rc)
            rc = sim_svg_lines_win(path, title, "arrived GPU request, % of capacity", "unallocated GPUs, % of capacity",
                                   s, o->npolicies, SIM_IDEAL_UNALLOC, &zoom, err, errlen);
    }
    free(ys);
    free(s);
    return rc;
}

/* ---------------------------------------------------------------- command line */

/* The authors' medians at arrived = 100 % on the default list (sim/fgd-method.md 5.2). */
static double paper_median(const char *list, const char *name) {
    static const struct { const char *p; double v; } t[] = {{"random", 13.75}, {"dotprod", 9.45},
                                                             {"gpuclustering", 8.42}, {"gpupacking", 8.20},
                                                             {"bestfit", 7.09}, {"fgd", 4.77}};
    if (strcmp(list, "default")) return NAN;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(t[i].p, name)) return t[i].v;
    return NAN;
}

static void print_table(FILE *f, const sim_fgd_result *r, const sim_fgd_opts *o) {
    for (int l = 0; l < o->nlists; l++) {
        fprintf(f, "openb_pod_list_%s: unallocated GPU %% of %d GPUs, median over %d seed(s)\n", o->lists[l],
                r->total_gpus, o->nseeds);
        fprintf(f, "  %-14s %9s %9s %9s %9s %8s\n", "policy", "at 100%", "paper", "at 130%", "failed", "tasks");
        for (int p = 0; p < o->npolicies; p++) {
            double failed = 0, tasks = 0;
            int n = 0;
            for (int k = 0; k < r->nruns; k++)
                if (r->runs[k].list == l && r->runs[k].policy == p) {
                    failed += r->runs[k].failed;
                    tasks += r->runs[k].tasks;
                    n++;
                }
            double pm = paper_median(o->lists[l], o->policies[p]);
            char paper[16] = "-";
            if (!isnan(pm)) snprintf(paper, sizeof paper, "%.2f", pm);
            fprintf(f, "  %-14s %9.2f %9s %9.2f %9.0f %8.0f\n", o->policies[p], sim_fgd_median_unalloc(r, l, p, 100),
                    paper, sim_fgd_median_unalloc(r, l, p, 130), n ? failed / n : 0, n ? tasks / n : 0);
        }
    }
}

#define MAX_ITEMS 64

/* Split a comma list in place into at most MAX_ITEMS items. */
static int split_list(char *s, const char **items) {
    int n = 0;
    for (char *tok = strtok(s, ","); tok && n < MAX_ITEMS; tok = strtok(NULL, ",")) items[n++] = tok;
    return n;
}

/* "42..51", "42,43,50", "7". -1 on a bad list. */
static int parse_seeds(const char *s, uint64_t *seeds) {
    char *end;
    const char *dots = strstr(s, "..");
    if (dots) {
        errno = 0;
        unsigned long long a = strtoull(s, &end, 10);
        if (end != dots || errno) return -1;
        unsigned long long b = strtoull(dots + 2, &end, 10);
        if (*end || errno || b < a || b - a >= MAX_ITEMS) return -1;
        for (unsigned long long v = a; v <= b; v++) seeds[v - a] = v;
        return (int)(b - a + 1);
    }
    int n = 0;
    while (*s) {
        if (n == MAX_ITEMS || *s < '0' || *s > '9') return -1;
        errno = 0;
        seeds[n++] = strtoull(s, &end, 10);
        if (errno || (*end && *end != ',')) return -1;
        s = *end ? end + 1 : end;
    }
    return n ? n : -1;
}

static void fgd_usage(FILE *f) {
    fprintf(f,
            "usage: tessera-sim fgd-paper [options]\n"
            "\n"
            "The FGD paper's experiment (ATC '23, Fig. 9a): the openb pod list shuffled with each seed,\n"
            "inflated to 130 %% of the 6,212 GPUs, placed one pod at a time with each policy, nothing\n"
            "departs; allocation and fragmentation bucketed by arrived %%. One run per thread.\n"
            "\n"
            "  --policies LIST   comma list (default random,dotprod,gpuclustering,gpupacking,bestfit,fgd);\n"
            "                    NAME@online (fgd@online, fgd-pack@online) estimates the target workload\n"
            "                    from the pods arrived so far instead of being given the whole list's\n"
            "  --half-life N     @online: a shape's weight halves after N more arrivals (default %d)\n"
            "  --warmup N        @online: rebuild the estimate after each of the first N arrivals (default\n"
            "                    %d), then every half-life/20 arrivals if it moved by 2 %% or more\n"
            "  --seeds SEEDS     42..51 (default), or a comma list\n"
            "  --pod-lists LIST  openb pod lists by short name (default: default); other than default\n"
            "                    they need --data\n"
            "  --data DIR        read openb_node_list_gpu_node.csv and openb_pod_list_NAME.csv from DIR\n"
            "                    (data/openb in the repository) instead of the built-in copies\n"
            "  --out DIR         where the CSVs and charts go (default fgd-paper-out)\n"
            "  --threads N       runs in parallel (default: every core)\n"
            "  --tune X          inflate to X times capacity (default 1.3)\n"
            "  --no-progress     no progress bar\n"
            "  -h, --help        this text\n"
            "\n"
            "Writes DIR/analysis_allo_discrete.csv, analysis_frag_discrete.csv and\n"
            "analysis_frag_ratio_discrete.csv in the layout of the authors' expected_results, and\n"
            "DIR/alloc_LIST.svg and DIR/unalloc_LIST.svg (the paper's Fig. 9a); prints unallocated GPU %%\n"
            "at arrived = 100 %% per policy. Fragmentation is always measured against the whole list's\n"
            "workload (the experiment's yardstick, whatever a policy was given).\n",
            POLICY_ONLINE_HALF_LIFE, POLICY_ONLINE_WARMUP);
}

/* "--name value" or "--name=value": the value, advancing *i; NULL if this is not it. */
static const char *opt_value(int argc, char **argv, int *i, const char *name) {
    size_t l = strlen(name);
    if (strncmp(argv[*i], name, l)) return NULL;
    if (argv[*i][l] == '=') return argv[*i] + l + 1;
    if (argv[*i][l] == 0 && *i + 1 < argc) return argv[++*i];
    return NULL;
}

int sim_cmd_fgd_paper(int argc, char **argv) {
    char pol_buf[1024] = "random,dotprod,gpuclustering,gpupacking,bestfit,fgd", list_buf[1024] = "default";
    const char *pols[MAX_ITEMS], *lists[MAX_ITEMS], *out_dir = "fgd-paper-out", *v;
    uint64_t seeds[MAX_ITEMS];
    sim_fgd_opts o = {.data_dir = NULL, .threads = 0, .tune = DEFAULT_TUNE, .progress = true};
    o.nseeds = parse_seeds("42..51", seeds);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fgd_usage(stdout);
            return 0;
        } else if ((v = opt_value(argc, argv, &i, "--policies"))) {
            snprintf(pol_buf, sizeof pol_buf, "%s", v);
        } else if ((v = opt_value(argc, argv, &i, "--pod-lists"))) {
            snprintf(list_buf, sizeof list_buf, "%s", v);
        } else if ((v = opt_value(argc, argv, &i, "--seeds"))) {
            if ((o.nseeds = parse_seeds(v, seeds)) < 0) {
                fprintf(stderr, "tessera-sim fgd-paper: --seeds \"%s\": expected A..B or a comma list of at most %d "
                                "seeds\n", v, MAX_ITEMS);
                return 2;
            }
        } else if ((v = opt_value(argc, argv, &i, "--data"))) {
            o.data_dir = v;
        } else if ((v = opt_value(argc, argv, &i, "--out"))) {
            out_dir = v;
        } else if ((v = opt_value(argc, argv, &i, "--threads"))) {
            char *end;
            long t = strtol(v, &end, 10);
            if (*end || t < 1 || t > 1024) {
                fprintf(stderr, "tessera-sim fgd-paper: --threads \"%s\": expected 1..1024\n", v);
                return 2;
            }
            o.threads = (int)t;
        } else if ((v = opt_value(argc, argv, &i, "--tune"))) {
            char *end;
            o.tune = strtod(v, &end);
            if (*end || !(o.tune > 0 && o.tune <= 10)) {
                fprintf(stderr, "tessera-sim fgd-paper: --tune \"%s\": expected a number in (0, 10]\n", v);
                return 2;
            }
        } else if ((v = opt_value(argc, argv, &i, "--half-life"))) {
            char *end;
            o.half_life = strtod(v, &end);
            if (*end || !(o.half_life > 0 && o.half_life < 1e9)) {
                fprintf(stderr, "tessera-sim fgd-paper: --half-life \"%s\": expected a number of arrivals > 0\n", v);
                return 2;
            }
        } else if ((v = opt_value(argc, argv, &i, "--warmup"))) {
            char *end;
            o.warmup = strtol(v, &end, 10);
            if (!*end && o.warmup == 0) o.warmup = -1;   /* none (0 in the struct is the default) */
            if (*end || o.warmup < -1) {
                fprintf(stderr, "tessera-sim fgd-paper: --warmup \"%s\": expected a number of arrivals >= 0\n", v);
                return 2;
            }
        } else if (!strcmp(argv[i], "--no-progress")) {
            o.progress = false;
        } else {
            fprintf(stderr, "tessera-sim fgd-paper: unknown or incomplete option \"%s\" (see --help)\n", argv[i]);
            return 2;
        }
    }
    o.policies = pols;
    o.npolicies = split_list(pol_buf, pols);
    o.lists = lists;
    o.nlists = split_list(list_buf, lists);
    o.seeds = seeds;
    for (int p = 0; p < o.npolicies; p++)
        if (!sim_fgd_policy_find(pols[p], NULL)) {
            fprintf(stderr, "tessera-sim fgd-paper: unknown policy \"%s\" (known:", pols[p]);
            for (int k = 0; k < policy_count(); k++) fprintf(stderr, " %s", policy_name(policy_at(k)));
            fprintf(stderr, ")\n");
            return 2;
        }
    sim_fgd_result r;
    char err[512];
    if (sim_fgd_run_grid(&o, &r, err, sizeof err) < 0) {
        fprintf(stderr, "tessera-sim fgd-paper: %s\n", err);
        return 1;
    }
    print_table(stdout, &r, &o);
    int rc = sim_fgd_write(&r, &o, out_dir, err, sizeof err);
    if (rc < 0) fprintf(stderr, "tessera-sim fgd-paper: %s\n", err);
    else printf("%d runs in %.1f s; CSVs and charts in %s/\n", r.nruns, r.seconds, out_dir);
    sim_fgd_result_free(&r);
    return rc < 0 ? 1 : 0;
}
