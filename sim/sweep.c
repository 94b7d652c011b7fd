/* sweep.c -- `tessera-sim sweep` (cells of an openb grid on local cores, a shard of them,
 * or a Kubernetes Indexed Job manifest that runs the shards) and `tessera-sim merge`
 * (cell files back into fgd-paper's outputs and a summary). See sweep.h.
 */
#include "sim/sweep.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/policy.h"
#include "sim/cluster.h"
#include "sim/fgd_paper.h"
#include "sim/gen.h"
#include "sim/json.h"
#include "sim/quota.h"
#include "sim/replay.h"

/* the bundled demo cluster (data/sim/demo-cluster.json), compiled in */
extern const unsigned char sim_demo_sim_cluster_json[];
extern const size_t sim_demo_sim_cluster_json_len;

/* ---------------------------------------------------------------- grid */

/* The replay axes with their defaults filled in: scales {10}, sharing {"as-is"}. */
static int nscales_of(const sim_sweep_grid *g) { return g->nscales > 0 ? g->nscales : 1; }
static int scale_at(const sim_sweep_grid *g, int i) { return g->nscales > 0 ? g->replay_scales[i] : 10; }
static int nsharing_of(const sim_sweep_grid *g) { return g->nsharing > 0 ? g->nsharing : 1; }
static const char *sharing_at(const sim_sweep_grid *g, int i) {
    return g->nsharing > 0 ? g->replay_sharing[i] : SIM_SWEEP_AS_IS;
}
static bool default_sharing(const sim_sweep_grid *g) {
    return nsharing_of(g) == 1 && !strcmp(sharing_at(g, 0), SIM_SWEEP_AS_IS);
}

static int openb_cells(const sim_sweep_grid *g) { return g->nlists * g->npolicies * g->nseeds; }
/* replay cells per (scale, sharing) */
static int replay_block(const sim_sweep_grid *g) { return g->npolicies * g->nreplay; }
int sim_sweep_cells(const sim_sweep_grid *g) {
    return openb_cells(g) + nscales_of(g) * nsharing_of(g) * replay_block(g);
}

/* Replay cell r (0 = the first after the openb cells) as (scale, sharing, policy, trace
 * seed) indices, in sweep.h's nesting order. */
static void replay_coords(const sim_sweep_grid *g, int r, int *sc, int *sh, int *p, int *s) {
    *s = r % g->nreplay;
    *p = (r / g->nreplay) % g->npolicies;
    *sh = (r / replay_block(g)) % nsharing_of(g);
    *sc = r / (replay_block(g) * nsharing_of(g));
}

/* "5,10,20" and "as-is,whole": the replay axes as the key and the Job's command give them. */
static void join_scales(const sim_sweep_grid *g, char *buf, size_t len) {
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < nscales_of(g) && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%d", i ? "," : "", scale_at(g, i));
}
static void join_sharing(const sim_sweep_grid *g, char *buf, size_t len) {
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; i < nsharing_of(g) && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? "," : "", sharing_at(g, i));
}

static double tune_of(const sim_sweep_grid *g) { return g->tune > 0 ? g->tune : 1.3; }
static double half_life_of(const sim_sweep_grid *g) { return g->half_life > 0 ? g->half_life : POLICY_ONLINE_HALF_LIFE; }
static long warmup_of(const sim_sweep_grid *g) { return g->warmup > 0 ? g->warmup : g->warmup < 0 ? 0 : POLICY_ONLINE_WARMUP; }

void sim_sweep_grid_key(const sim_sweep_grid *g, char *buf, size_t len) {
    size_t off = (size_t)snprintf(buf, len, "lists=");
    for (int i = 0; i < g->nlists && off < len; i++) off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? "," : "", g->lists[i]);
    if (off < len) off += (size_t)snprintf(buf + off, len - off, " policies=");
    for (int i = 0; i < g->npolicies && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? "," : "", g->policies[i]);
    if (off < len) off += (size_t)snprintf(buf + off, len - off, " seeds=");
    for (int i = 0; i < g->nseeds && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%llu", i ? "," : "", (unsigned long long)g->seeds[i]);
    if (off < len)
        off += (size_t)snprintf(buf + off, len - off, " tune=%g half-life=%g warmup=%ld", tune_of(g), half_life_of(g),
                                warmup_of(g));
    if (g->nreplay && off < len) {
        char scales[SIM_SWEEP_MAX * 6];
        join_scales(g, scales, sizeof scales);
        off += (size_t)snprintf(buf + off, len - off, " replay-scale=%s replay-seeds=", scales);
        for (int i = 0; i < g->nreplay && off < len; i++)
            off += (size_t)snprintf(buf + off, len - off, "%s%llu", i ? "," : "", (unsigned long long)g->replay_seeds[i]);
        /* absent for "as-is" alone, so a grid without the sharing axis keeps the key it had */
        if (!default_sharing(g) && off < len) {
            char sharing[SIM_SWEEP_MAX * 64];
            join_sharing(g, sharing, sizeof sharing);
            off += (size_t)snprintf(buf + off, len - off, " replay-sharing=%s", sharing);
        }
        if (g->replay_quotas && g->replay_quotas[0] && off < len)   /* absent without quotas, as above */
            off += (size_t)snprintf(buf + off, len - off, " replay-quotas=%s replay-quota-mode=%s", g->replay_quotas,
                                    g->replay_quota_mode ? g->replay_quota_mode : "wait");
    }
}

/* A replay cell's quotas: the grid's, times its scale. 0 (q->n == 0 without quotas), or -1 with err. */
static int cell_quotas(const sim_sweep_grid *g, int scale, sim_quotas *q, char *err, size_t errlen) {
    memset(q, 0, sizeof *q);
    if (!g->replay_quotas || !g->replay_quotas[0]) return 0;
    char e2[400];
    if (sim_quotas_parse(q, g->replay_quotas, e2, sizeof e2) != 0 ||
        (g->replay_quota_mode && sim_quotas_mode(q, g->replay_quota_mode, e2, sizeof e2) != 0)) {
        snprintf(err, errlen, "--replay-quotas: %s", e2);
        return -1;
    }
    for (int i = 0; i < q->n; i++) {
        if (q->q[i].gpu_milli > 0) q->q[i].gpu_milli *= scale;
        if (q->q[i].memory_mib > 0) q->q[i].memory_mib *= scale;
    }
    return 0;
}

static void cell_coords(const sim_sweep_grid *g, int k, int *l, int *p, int *s) {
    *s = k % g->nseeds;
    *p = (k / g->nseeds) % g->npolicies;
    *l = k / (g->nseeds * g->npolicies);
}

/* ---------------------------------------------------------------- running cells */

typedef struct sweep_job {
    const sim_sweep_grid *g;
    const char *data_dir, *dir;
    int *cells, ncells;
    atomic_int next, failed;
    char key[SIM_SWEEP_KEY_MAX];
    char err[1400];
    pthread_mutex_t lock;
} sweep_job;

static void job_error(sweep_job *J, const char *msg) {
    pthread_mutex_lock(&J->lock);
    if (!J->err[0]) snprintf(J->err, sizeof J->err, "%s", msg);
    pthread_mutex_unlock(&J->lock);
    atomic_store(&J->failed, 1);
}

static void put_array(FILE *f, const char *name, const double *v) {
    fprintf(f, ",\n \"%s\": [", name);
    for (int x = 0; x < SIM_FGD_BUCKETS; x++) fprintf(f, "%s%.17g", x ? "," : "", v[x]);
    fputc(']', f);
}

/* A cell file is written to a temporary name, then renamed: it exists only when complete. */
typedef struct cell_file {
    FILE *f;
    char path[600], tmp[640];
} cell_file;

/* Opens cell k's file under its temporary name and writes what every cell file opens with: the
 * grid key (quoted by cJSON) and the cell number; the caller goes on with its own "name": value pairs. */
static int cell_begin(sweep_job *J, int k, cell_file *cf, char *err, size_t errlen) {
    snprintf(cf->path, sizeof cf->path, "%.500s/cells/cell-%05d.json", J->dir, k);
    snprintf(cf->tmp, sizeof cf->tmp, "%s.tmp.%ld", cf->path, (long)getpid());
    cf->f = fopen(cf->tmp, "w");
    if (!cf->f) {
        snprintf(err, errlen, "cannot write %s: %s", cf->tmp, strerror(errno));
        return -1;
    }
    cJSON *key = cJSON_CreateString(J->key);
    char *kq = key ? cJSON_PrintUnformatted(key) : NULL;
    fprintf(cf->f, "{\"grid\": %s,\n \"cell\": %d, ", kq ? kq : "\"\"", k);
    free(kq);
    cJSON_Delete(key);
    return 0;
}

/* Closes the object, the file, and renames it to its real name. */
static int cell_end(cell_file *cf, char *err, size_t errlen) {
    fprintf(cf->f, "}\n");
    if (fclose(cf->f) != 0 || rename(cf->tmp, cf->path) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", cf->path, strerror(errno));
        unlink(cf->tmp);
        return -1;
    }
    return 0;
}

static int write_cell(sweep_job *J, int k, const sim_fgd_run *r, int total_gpus, char *err, size_t errlen) {
    int l, p, s;
    cell_coords(J->g, k, &l, &p, &s);
    cell_file cf;
    if (cell_begin(J, k, &cf, err, errlen) < 0) return -1;
    fprintf(cf.f, "\"list\": \"%s\", \"policy\": \"%s\", \"seed\": %llu,\n \"tasks\": %d, \"failed\": %d, \"totalGpus\": %d",
            J->g->lists[l], J->g->policies[p], (unsigned long long)J->g->seeds[s], r->tasks, r->failed, total_gpus);
    put_array(cf.f, "alloc", r->alloc);
    put_array(cf.f, "frag", r->frag);
    put_array(cf.f, "ratio", r->ratio);
    return cell_end(&cf, err, errlen);
}

/* ---------------------------------------------------------------- replay cells */

typedef struct replay_cell {
    int scale, sharing, policy;   /* sharing and policy: indices into the grid */
    uint64_t seed;
    int workloads, placed, unschedulable, gpus;
    int refused;                  /* by the grid's quotas */
    double gpu_hours, alloc_mean, frag_mean;
    sim_kind_stats kind[SIM_NKINDS], all;
    const sim_replay_result *res; /* while the cell is written: its per-tenant stats (quotas) */
} replay_cell;

static const char *const stat_names[] = {"waitP50", "waitP95", "waitP99", "waitMax", "waitMean", "slowMean", "slowP95"};
#define NSTATS 7

static double *stat_ref(sim_kind_stats *k, int i) {
    double *v[] = {&k->wait_p50, &k->wait_p95, &k->wait_p99, &k->wait_max, &k->wait_mean, &k->slow_mean, &k->slow_p95};
    return v[i];
}

static sim_cluster *demo_cluster(char *err, size_t errlen) {
    return sim_cluster_from_json((const char *)sim_demo_sim_cluster_json, sim_demo_sim_cluster_json_len, NULL, err,
                                 errlen);
}

/* Sharing option `sharing` ("as-is" or sim_sharing_parse's syntax) on cluster c by the rule
 * `plan` compares options with. -1 with err when it does not parse or no group takes it. */
static int apply_sharing(sim_cluster *c, const char *sharing, char *err, size_t errlen) {
    if (!strcmp(sharing, SIM_SWEEP_AS_IS)) return 0;
    sim_sharing opt;
    char e2[300];
    if (sim_sharing_parse(sharing, &opt, e2, sizeof e2) != 0) {
        snprintf(err, errlen, "--replay-sharing %s (or %s: the cluster file's own sharing)", e2, SIM_SWEEP_AS_IS);
        return -1;
    }
    if (sim_cluster_apply_sharing(c, &opt, NULL) > 0) return 0;
    size_t off = (size_t)snprintf(err, errlen, "--replay-sharing \"%s\": no shared group of the demo cluster can be set "
                                                "up that way (shared groups:", sharing);
    for (int i = 0; i < c->ngroups && off < errlen; i++) {
        char buf[300];
        if (c->groups[i].sharing.kind == SIM_SHARE_WHOLE) continue;
        sim_sharing_format(&c->groups[i].sharing, buf, sizeof buf);
        off += (size_t)snprintf(err + off, errlen - off, " %s %s %s,", c->groups[i].name, c->groups[i].product, buf);
    }
    if (off < errlen) snprintf(err + off - 1, errlen - off + 1, ")");
    return -1;
}

/* The demo cluster with every group's count times scale and the sharing applied, and gen's
 * mixed trace of 300 x scale workloads. */
static int replay_inputs(int scale, const char *sharing, uint64_t seed, sim_cluster **cl, sim_trace **tr, char *err,
                         size_t errlen) {
    *tr = NULL;
    *cl = demo_cluster(err, errlen);
    if (!*cl) return -1;
    for (int i = 0; i < (*cl)->ngroups; i++) (*cl)->groups[i].count *= scale;
    if (apply_sharing(*cl, sharing, err, errlen) < 0) {
        sim_cluster_free(*cl);
        *cl = NULL;
        return -1;
    }
    sim_gen_opts o;
    sim_gen_defaults(&o);
    o.seed = seed;
    o.workloads = 300L * scale;
    o.hours = 8;
    *tr = sim_gen(&o, err, errlen);
    if (!*tr) {
        sim_cluster_free(*cl);
        *cl = NULL;
        return -1;
    }
    return 0;
}

static int write_replay_cell(sweep_job *J, int k, const replay_cell *c, char *err, size_t errlen) {
    cell_file cf;
    if (cell_begin(J, k, &cf, err, errlen) < 0) return -1;
    fprintf(cf.f, "\"kind\": \"replay\", \"scale\": %d, \"sharing\": \"%s\", \"policy\": \"%s\", \"traceSeed\": %llu,\n"
                  " \"workloads\": %d, \"placed\": %d, \"unschedulable\": %d, \"gpus\": %d,\n"
                  " \"gpuHours\": %.17g, \"allocMeanPct\": %.17g, \"fragMeanPct\": %.17g",
            c->scale, sharing_at(J->g, c->sharing), J->g->policies[c->policy], (unsigned long long)c->seed,
            c->workloads, c->placed, c->unschedulable, c->gpus, c->gpu_hours, c->alloc_mean, c->frag_mean);
    replay_cell cc = *c;
    for (int kd = 0; kd <= SIM_NKINDS; kd++) {
        sim_kind_stats *ks = kd < SIM_NKINDS ? &cc.kind[kd] : &cc.all;
        fprintf(cf.f, ",\n \"%s\": {\"n\": %d", kd < SIM_NKINDS ? sim_kind_name(kd) : "all", ks->n);
        for (int i = 0; i < NSTATS; i++) fprintf(cf.f, ", \"%s\": %.17g", stat_names[i], *stat_ref(ks, i));
        fputc('}', cf.f);
    }
    if (c->res && c->res->ntenants) {   /* quotas: refused, and each tenant's waits and quota use */
        fprintf(cf.f, ",\n \"refused\": %d, \"tenants\": [", c->refused);
        for (int i = 0; i < c->res->ntenants; i++) {
            const sim_tenant_stats *t = &c->res->tenant[i];
            fprintf(cf.f, "%s\n  {\"tenant\": \"%s\", \"namespace\": \"%s\", \"quotaGpuMilli\": %lld, "
                          "\"quotaGpuMemoryMiB\": %lld, \"n\": %d, \"placed\": %d, \"refused\": %d, "
                          "\"waitP95\": %.17g, \"waitMean\": %.17g, \"quotaWaited\": %d, \"quotaWaitMean\": %.17g, "
                          "\"peakGpuMilli\": %lld, \"meanGpuMilli\": %.17g}",
                    i ? "," : "", t->tenant, t->ns, (long long)t->hard_milli, (long long)t->hard_mib, t->n, t->placed,
                    t->refused, t->wait_p95, t->wait_mean, t->quota_waited, t->quota_wait_mean,
                    (long long)t->peak_milli, t->mean_milli);
        }
        fputc(']', cf.f);
    }
    return cell_end(&cf, err, errlen);
}

static void run_replay_cell(sweep_job *J, int k) {
    const sim_sweep_grid *g = J->g;
    int sc, sh, p, si;
    replay_coords(g, k - openb_cells(g), &sc, &sh, &p, &si);
    char err[1000], msg[1400];
    sim_cluster *cl;
    sim_trace *tr;
    if (replay_inputs(scale_at(g, sc), sharing_at(g, sh), g->replay_seeds[si], &cl, &tr, err, sizeof err) < 0) {
        snprintf(msg, sizeof msg, "cell %d (replay, trace seed %llu): %s", k, (unsigned long long)g->replay_seeds[si], err);
        job_error(J, msg);
        return;
    }
    sim_replay_opts o;
    sim_replay_defaults(&o);
    o.policy = g->policies[p];
    sim_quotas q;
    if (cell_quotas(g, scale_at(g, sc), &q, err, sizeof err) < 0) {   /* sim_sweep_check parsed it: not reached */
        job_error(J, err);
        sim_cluster_free(cl);
        sim_trace_free(tr);
        return;
    }
    o.quotas = q.n ? &q : NULL;
    sim_replay_result res;
    if (sim_replay(cl, tr, &o, &res, err, sizeof err) != 0) {
        snprintf(msg, sizeof msg, "cell %d (replay %s, trace seed %llu): %s", k, g->policies[p],
                 (unsigned long long)g->replay_seeds[si], err);
        job_error(J, msg);
    } else {
        replay_cell c = {.scale = scale_at(g, sc), .sharing = sh, .policy = p, .seed = g->replay_seeds[si],
                         .workloads = res.workloads, .placed = res.placed, .unschedulable = res.unschedulable,
                         .gpus = res.gpus, .gpu_hours = res.gpu_hours, .alloc_mean = res.alloc_mean_pct,
                         .frag_mean = res.frag_mean_pct, .all = res.all, .refused = res.refused, .res = &res};
        memcpy(c.kind, res.kind, sizeof c.kind);
        if (write_replay_cell(J, k, &c, msg, sizeof msg) < 0) job_error(J, msg);
        sim_replay_result_free(&res);
    }
    sim_cluster_free(cl);
    sim_trace_free(tr);
}

static void run_cell(sweep_job *J, int k) {
    const sim_sweep_grid *g = J->g;
    if (k >= openb_cells(g)) {
        run_replay_cell(J, k);
        return;
    }
    int l, p, s;
    cell_coords(g, k, &l, &p, &s);
    sim_fgd_opts o = {.policies = &g->policies[p], .npolicies = 1, .seeds = &g->seeds[s], .nseeds = 1,
                      .lists = &g->lists[l], .nlists = 1, .data_dir = J->data_dir, .threads = 1, .tune = tune_of(g),
                      .half_life = g->half_life, .warmup = g->warmup};
    sim_fgd_result r;
    char err[512], msg[1400];
    if (sim_fgd_run_grid(&o, &r, err, sizeof err) < 0) {
        snprintf(msg, sizeof msg, "cell %d (%s, %s, seed %llu): %s", k, g->lists[l], g->policies[p],
                 (unsigned long long)g->seeds[s], err);
        job_error(J, msg);
        return;
    }
    if (write_cell(J, k, &r.runs[0], r.total_gpus, msg, sizeof msg) < 0) job_error(J, msg);
    sim_fgd_result_free(&r);
}

static void *sweep_worker(void *arg) {
    sweep_job *J = arg;
    for (;;) {
        int i = atomic_fetch_add(&J->next, 1);
        if (i >= J->ncells || atomic_load(&J->failed)) break;
        run_cell(J, J->cells[i]);
    }
    return NULL;
}

static int mkdir_p(const char *dir, char *err, size_t errlen) {
    if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

int sim_sweep_check(const sim_sweep_grid *g, char *err, size_t errlen) {
    for (int p = 0; p < g->npolicies; p++)
        if (!sim_fgd_policy_find(g->policies[p], NULL)) {
            snprintf(err, errlen, "unknown policy \"%s\" (see tessera-sim fgd-paper --help)", g->policies[p]);
            return -1;
        }
    if (g->nscales < 0 || g->nscales > SIM_SWEEP_MAX || g->nsharing < 0 || g->nsharing > SIM_SWEEP_MAX) {
        snprintf(err, errlen, "at most %d replay scales and %d replay sharing options", SIM_SWEEP_MAX, SIM_SWEEP_MAX);
        return -1;
    }
    for (int i = 0; i < nscales_of(g); i++)
        if (scale_at(g, i) < 1 || scale_at(g, i) > SIM_SWEEP_MAX_SCALE) {
            snprintf(err, errlen, "--replay-scales: %d is out of range (1..%d)", scale_at(g, i), SIM_SWEEP_MAX_SCALE);
            return -1;
        }
    for (int i = 0; i < nscales_of(g); i++)
        for (int j = 0; j < i; j++)
            if (scale_at(g, i) == scale_at(g, j)) {
                snprintf(err, errlen, "--replay-scales: %d is given twice", scale_at(g, i));
                return -1;
            }
    for (int i = 0; i < nsharing_of(g); i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(sharing_at(g, i), sharing_at(g, j))) {
                snprintf(err, errlen, "--replay-sharing: \"%.64s\" is given twice", sharing_at(g, i));
                return -1;
            }
    {   /* every cell file carries the key, and merge compares it whole: it must not be cut */
        char key[SIM_SWEEP_KEY_MAX + 1];
        sim_sweep_grid_key(g, key, sizeof key);
        if (strlen(key) >= SIM_SWEEP_KEY_MAX) {
            snprintf(err, errlen, "the grid is too large to name in %d bytes: give fewer or shorter axis items",
                     SIM_SWEEP_KEY_MAX);
            return -1;
        }
    }
    sim_quotas q;
    if (cell_quotas(g, 1, &q, err, errlen) < 0) return -1;
    for (int i = 0; i < nsharing_of(g); i++) {
        sim_cluster *c = demo_cluster(err, errlen);
        int rc = c ? apply_sharing(c, sharing_at(g, i), err, errlen) : -1;
        sim_cluster_free(c);
        if (rc < 0) return -1;
    }
    return 0;
}

int sim_sweep_run(const sim_sweep_grid *g, const char *data_dir, int shards, int index, int threads,
                  const char *dir, char *err, size_t errlen) {
    int n = sim_sweep_cells(g);
    if (n <= 0 || shards < 1 || index < 0 || index >= shards) {
        snprintf(err, errlen, "sweep: %s", n <= 0 ? "empty grid (need pod lists, policies and seeds)"
                                                   : "shard index must be in 0..shards-1");
        return -1;
    }
    char cerr[900];
    if (sim_sweep_check(g, cerr, sizeof cerr) < 0) {
        snprintf(err, errlen, "sweep: %s", cerr);
        return -1;
    }
    char cells_dir[1100];
    snprintf(cells_dir, sizeof cells_dir, "%s/cells", dir);
    if (mkdir_p(dir, err, errlen) < 0 || mkdir_p(cells_dir, err, errlen) < 0) return -1;
    sweep_job *J = calloc(1, sizeof *J);
    int *cells = malloc((size_t)n * sizeof *cells);
    if (!J || !cells) {
        free(J);
        free(cells);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    J->g = g;
    J->data_dir = data_dir;
    J->dir = dir;
    J->cells = cells;
    for (int k = index; k < n; k += shards) cells[J->ncells++] = k;
    sim_sweep_grid_key(g, J->key, sizeof J->key);
    pthread_mutex_init(&J->lock, NULL);
    if (threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        threads = c > 0 ? (int)c : 1;
    }
    if (threads > J->ncells) threads = J->ncells > 0 ? J->ncells : 1;
    pthread_t th[256];
    if (threads > 256) threads = 256;
    int started = 0;
    for (int t = 0; t < threads; t++)
        if (pthread_create(&th[t], NULL, sweep_worker, J) == 0) started++;
    if (!started) sweep_worker(J);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    int rc = atomic_load(&J->failed) ? -1 : 0;
    if (rc) snprintf(err, errlen, "%s", J->err);
    pthread_mutex_destroy(&J->lock);
    free(cells);
    free(J);
    return rc;
}

/* ---------------------------------------------------------------- merge */

/* The grid back from its key (strings point into the key buffer, which is kept). */
static int parse_key(char *key, sim_sweep_grid *g) {
    memset(g, 0, sizeof *g);
    for (char *tok = strtok(key, " "); tok; tok = strtok(NULL, " ")) {
        char *v = strchr(tok, '=');
        if (!v) return -1;
        *v++ = 0;
        if (!strcmp(tok, "tune")) g->tune = atof(v);
        else if (!strcmp(tok, "half-life")) g->half_life = atof(v);
        else if (!strcmp(tok, "warmup")) g->warmup = atol(v) == 0 ? -1 : atol(v);
        else if (!strcmp(tok, "replay-quotas")) g->replay_quotas = v;
        else if (!strcmp(tok, "replay-quota-mode")) g->replay_quota_mode = v;
        else {
            int *n = !strcmp(tok, "lists") ? &g->nlists : !strcmp(tok, "policies") ? &g->npolicies
                   : !strcmp(tok, "seeds") ? &g->nseeds : !strcmp(tok, "replay-seeds") ? &g->nreplay
                   : !strcmp(tok, "replay-scale") ? &g->nscales : !strcmp(tok, "replay-sharing") ? &g->nsharing : NULL;
            if (!n) return -1;
            for (char *it = v, *next; it && *it; it = next) {
                next = strchr(it, ',');
                if (next) *next++ = 0;
                if (*n >= SIM_SWEEP_MAX) return -1;
                if (n == &g->nlists) g->lists[(*n)++] = it;
                else if (n == &g->npolicies) g->policies[(*n)++] = it;
                else if (n == &g->nseeds) g->seeds[(*n)++] = strtoull(it, NULL, 10);
                else if (n == &g->nscales) g->replay_scales[(*n)++] = atoi(it);
                else if (n == &g->nsharing) g->replay_sharing[(*n)++] = it;
                else g->replay_seeds[(*n)++] = strtoull(it, NULL, 10);
            }
        }
    }
    return g->nlists && g->npolicies && g->nseeds ? 0 : -1;
}

static bool read_array(const cJSON *o, const char *name, double *out) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != SIM_FGD_BUCKETS) return false;
    int x = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, a) {
        if (!cJSON_IsNumber(v)) return false;
        out[x++] = v->valuedouble;
    }
    return true;
}

/* Median unallocated % at x, mean failed tasks, for one (list, policy). */
static void stats(const sim_fgd_result *r, const sim_sweep_grid *g, int l, int p, double *u100, double *u130, double *failed) {
    *u100 = sim_fgd_median_unalloc(r, l, p, 100);
    *u130 = sim_fgd_median_unalloc(r, l, p, 130);
    double f = 0;
    for (int s = 0; s < g->nseeds; s++) f += r->runs[(l * g->npolicies + p) * g->nseeds + s].failed;
    *failed = f / g->nseeds;
}

static int write_summary(const sim_fgd_result *r, const sim_sweep_grid *g, const char *out, FILE *tf, char *err,
                         size_t errlen) {
    char path[1200];
    snprintf(path, sizeof path, "%s/summary.csv", out);
    FILE *c = fopen(path, "w");
    snprintf(path, sizeof path, "%s/summary.json", out);
    FILE *j = fopen(path, "w");
    snprintf(path, sizeof path, "%s/table.md", out);
    FILE *m = fopen(path, "w");
    if (!c || !j || !m) {
        snprintf(err, errlen, "cannot write the summary in %s: %s", out, strerror(errno));
        if (c) fclose(c);
        if (j) fclose(j);
        if (m) fclose(m);
        return -1;
    }
    fprintf(c, "list,policy,seeds,unalloc_pct_at_100_median,unalloc_pct_at_130_median,failed_tasks_mean\n");
    fprintf(j, "{\"totalGpus\": %d, \"seeds\": %d, \"results\": [", r->total_gpus, g->nseeds);
    /* the table: one row per list, one column per policy; a policy that is not fgd is
     * marked against fgd with the same target (fgd@online for NAME@online) */
    FILE *tabs[2] = {m, tf};
    for (int t = 0; t < 2; t++) {
        if (!tabs[t]) continue;
        fprintf(tabs[t], "Unallocated GPUs at arrived = 100 %%, %% of %d GPUs, median of %d seed(s); "
                         "* = fewer than fgd with the same target workload\n\n| pod list |", r->total_gpus, g->nseeds);
        for (int p = 0; p < g->npolicies; p++) fprintf(tabs[t], " %s |", g->policies[p]);
        fprintf(tabs[t], "\n| --- |");
        for (int p = 0; p < g->npolicies; p++) fprintf(tabs[t], " ---: |");
        fputc('\n', tabs[t]);
    }
    int wins[SIM_SWEEP_MAX] = {0}, fgd_idx[SIM_SWEEP_MAX];
    for (int p = 0; p < g->npolicies; p++) {
        bool on = false;
        sim_fgd_policy_find(g->policies[p], &on);
        fgd_idx[p] = -1;
        for (int q = 0; q < g->npolicies; q++) {
            bool qon = false;
            const policy *qp = sim_fgd_policy_find(g->policies[q], &qon);
            if (qp && !strcmp(policy_name(qp), "fgd") && qon == on) fgd_idx[p] = q;
        }
    }
    bool first = true;
    for (int l = 0; l < g->nlists; l++) {
        for (int t = 0; t < 2; t++)
            if (tabs[t]) fprintf(tabs[t], "| %s |", g->lists[l]);
        for (int p = 0; p < g->npolicies; p++) {
            double u100, u130, failed, f100 = NAN, x1, x2;
            stats(r, g, l, p, &u100, &u130, &failed);
            if (fgd_idx[p] >= 0 && fgd_idx[p] != p) stats(r, g, l, fgd_idx[p], &f100, &x1, &x2);
            bool win = !isnan(f100) && u100 < f100;
            wins[p] += win;
            fprintf(c, "%s,%s,%d,%.4f,%.4f,%.1f\n", g->lists[l], g->policies[p], g->nseeds, u100, u130, failed);
            fprintf(j, "%s\n  {\"list\": \"%s\", \"policy\": \"%s\", \"unallocPctAt100\": %.4f, \"unallocPctAt130\": %.4f, "
                       "\"failedTasksMean\": %.1f}", first ? "" : ",", g->lists[l], g->policies[p], u100, u130, failed);
            first = false;
            for (int t = 0; t < 2; t++)
                if (tabs[t]) fprintf(tabs[t], " %.2f%s |", u100, win ? " *" : "");
        }
        for (int t = 0; t < 2; t++)
            if (tabs[t]) fputc('\n', tabs[t]);
    }
    for (int t = 0; t < 2; t++) {
        if (!tabs[t]) continue;
        fprintf(tabs[t], "| lists below fgd |");
        for (int p = 0; p < g->npolicies; p++) {
            if (fgd_idx[p] >= 0 && fgd_idx[p] != p) fprintf(tabs[t], " %d of %d |", wins[p], g->nlists);
            else fprintf(tabs[t], " - |");
        }
        fputc('\n', tabs[t]);
    }
    fprintf(j, "\n]}\n");
    int rc = 0;
    if (fclose(c) != 0) rc = -1;
    if (fclose(j) != 0) rc = -1;
    if (fclose(m) != 0) rc = -1;
    if (rc) snprintf(err, errlen, "cannot write the summary in %s", out);
    return rc;
}

/* Replay cell r of grid g from its file. The scale and sharing fields (absent in files
 * written before those axes) must agree with the cell's place in the grid. */
static bool read_replay_cell(const cJSON *o, const sim_sweep_grid *g, int r, replay_cell *c) {
    memset(c, 0, sizeof *c);
    int sc, si;
    replay_coords(g, r, &sc, &c->sharing, &c->policy, &si);
    c->scale = scale_at(g, sc);
    c->seed = g->replay_seeds[si];
    const cJSON *scale = cJSON_GetObjectItemCaseSensitive(o, "scale");
    const cJSON *sharing = cJSON_GetObjectItemCaseSensitive(o, "sharing");
    if ((scale && (!cJSON_IsNumber(scale) || scale->valueint != c->scale)) ||
        (sharing && (!cJSON_IsString(sharing) || strcmp(sharing->valuestring, sharing_at(g, c->sharing)))))
        return false;
    const char *ints[] = {"workloads", "placed", "unschedulable", "gpus"};
    int *iv[] = {&c->workloads, &c->placed, &c->unschedulable, &c->gpus};
    for (int i = 0; i < 4; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, ints[i]);
        if (!cJSON_IsNumber(v)) return false;
        *iv[i] = v->valueint;
    }
    const cJSON *refused = cJSON_GetObjectItemCaseSensitive(o, "refused");   /* with quotas only */
    c->refused = cJSON_IsNumber(refused) ? refused->valueint : 0;
    const char *dbl[] = {"gpuHours", "allocMeanPct", "fragMeanPct"};
    double *dv[] = {&c->gpu_hours, &c->alloc_mean, &c->frag_mean};
    for (int i = 0; i < 3; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, dbl[i]);
        if (!cJSON_IsNumber(v)) return false;
        *dv[i] = v->valuedouble;
    }
    for (int kd = 0; kd <= SIM_NKINDS; kd++) {
        const cJSON *ko = cJSON_GetObjectItemCaseSensitive(o, kd < SIM_NKINDS ? sim_kind_name(kd) : "all");
        sim_kind_stats *ks = kd < SIM_NKINDS ? &c->kind[kd] : &c->all;
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(ko, "n");
        if (!cJSON_IsNumber(n)) return false;
        ks->n = n->valueint;
        for (int i = 0; i < NSTATS; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(ko, stat_names[i]);
            if (!cJSON_IsNumber(v)) return false;
            *stat_ref(ks, i) = v->valuedouble;
        }
    }
    return true;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median over the trace seeds of one number of a policy's replay cells; cells is one
 * (scale, sharing) block. */
static double replay_median(const replay_cell *cells, const sim_sweep_grid *g, int p, double (*get)(const replay_cell *, int),
                            int arg) {
    double v[SIM_SWEEP_MAX];
    for (int s = 0; s < g->nreplay; s++) v[s] = get(&cells[p * g->nreplay + s], arg);
    qsort(v, (size_t)g->nreplay, sizeof *v, cmp_dbl);
    int n = g->nreplay;
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double get_alloc(const replay_cell *c, int a) { (void)a; return c->alloc_mean; }
static double get_frag(const replay_cell *c, int a) { (void)a; return c->frag_mean; }
static double get_gpuh(const replay_cell *c, int a) { (void)a; return c->gpu_hours; }
static double get_unsch(const replay_cell *c, int a) { (void)a; return c->unschedulable; }
static double get_wait95(const replay_cell *c, int k) { return k < SIM_NKINDS ? c->kind[k].wait_p95 : c->all.wait_p95; }
static double get_waitmean(const replay_cell *c, int k) { return k < SIM_NKINDS ? c->kind[k].wait_mean : c->all.wait_mean; }
static double get_slow(const replay_cell *c, int k) { return k < SIM_NKINDS ? c->kind[k].slow_mean : c->all.slow_mean; }

/* One (scale, sharing) block of replay cells as a table of medians over the trace seeds. */
static void replay_table(FILE *f, const sim_sweep_grid *g, const replay_cell *cells) {
    /* With the sharing axis the title says which sharing the table is; "as-is" alone says
     * nothing, so a grid without the axis writes the table it wrote before. */
    const char *sh = sharing_at(g, cells[0].sharing);
    char sharing[400] = "";
    if (!default_sharing(g) && !strcmp(sh, SIM_SWEEP_AS_IS))
        snprintf(sharing, sizeof sharing, ", sharing as in the cluster file");
    else if (!default_sharing(g))
        snprintf(sharing, sizeof sharing, ", %s on every shared group that can be set up so", sh);
    fprintf(f, "\nTimed replays (arrivals and departures) of gen's mixed trace, %d workloads over 8 h, on the demo "
               "cluster x %d (%d GPUs)%s; median of %d trace seed(s). Waits in minutes; slow = running time / "
               "dedicated duration\n\n", cells[0].workloads, cells[0].scale, cells[0].gpus, sharing, g->nreplay);
    fprintf(f, "| policy | alloc %% | frag %% | GPU-h | unsch |");
    for (int k = 0; k < SIM_NKINDS; k++) fprintf(f, " %s wait p95 | %s wait mean | %s slow |", sim_kind_name(k),
                                                sim_kind_name(k), sim_kind_name(k));
    fprintf(f, " all wait p95 |\n| --- | ---: | ---: | ---: | ---: |");
    for (int k = 0; k < SIM_NKINDS; k++) fprintf(f, " ---: | ---: | ---: |");
    fprintf(f, " ---: |\n");
    for (int p = 0; p < g->npolicies; p++) {
        fprintf(f, "| %s | %.1f | %.1f | %.0f | %.0f |", g->policies[p], replay_median(cells, g, p, get_alloc, 0),
                replay_median(cells, g, p, get_frag, 0), replay_median(cells, g, p, get_gpuh, 0),
                replay_median(cells, g, p, get_unsch, 0));
        for (int k = 0; k < SIM_NKINDS; k++)
            fprintf(f, " %.1f | %.1f | %.2f |", replay_median(cells, g, p, get_wait95, k) / 60,
                    replay_median(cells, g, p, get_waitmean, k) / 60, replay_median(cells, g, p, get_slow, k));
        fprintf(f, " %.1f |\n", replay_median(cells, g, p, get_wait95, SIM_NKINDS) / 60);
    }
}

/* replay.csv: one row per (scale, sharing, policy, trace seed, kind), with scale and sharing
 * columns; replay.md: medians over the trace seeds, one table per (scale, sharing), each
 * titled with its workloads, cluster and GPUs (which change with the scale; one wide
 * table with two more key columns would repeat them on every row). */
static int write_replay(const replay_cell *cells, const sim_sweep_grid *g, const char *out, FILE *tf, char *err,
                        size_t errlen) {
    char path[1200];
    snprintf(path, sizeof path, "%s/replay.csv", out);
    FILE *c = fopen(path, "w");
    snprintf(path, sizeof path, "%s/replay.md", out);
    FILE *m = fopen(path, "w");
    if (!c || !m) {
        snprintf(err, errlen, "cannot write the replay summary in %s: %s", out, strerror(errno));
        if (c) fclose(c);
        if (m) fclose(m);
        return -1;
    }
    bool quotas = g->replay_quotas && g->replay_quotas[0];
    fprintf(c, "scale,sharing,policy,trace_seed,workloads,gpus,unschedulable,%sgpu_hours,alloc_mean_pct,frag_mean_pct,"
               "kind,n", quotas ? "refused," : "");
    for (int i = 0; i < NSTATS; i++) fprintf(c, ",%s", stat_names[i]);
    fputc('\n', c);
    int nrc = sim_sweep_cells(g) - openb_cells(g);
    for (int r = 0; r < nrc; r++) {
        replay_cell x = cells[r];
        for (int kd = 0; kd <= SIM_NKINDS; kd++) {
            sim_kind_stats *ks = kd < SIM_NKINDS ? &x.kind[kd] : &x.all;
            fprintf(c, "%d,%s,%s,%llu,%d,%d,%d,", x.scale, sharing_at(g, x.sharing), g->policies[x.policy],
                    (unsigned long long)x.seed, x.workloads, x.gpus, x.unschedulable);
            if (quotas) fprintf(c, "%d,", x.refused);
            fprintf(c, "%.3f,%.3f,%.3f,%s,%d", x.gpu_hours, x.alloc_mean, x.frag_mean,
                    kd < SIM_NKINDS ? sim_kind_name(kd) : "all", ks->n);
            for (int i = 0; i < NSTATS; i++) fprintf(c, ",%.3f", *stat_ref(ks, i));
            fputc('\n', c);
        }
    }
    FILE *tabs[2] = {m, tf};
    for (int t = 0; t < 2; t++)
        for (int b = 0; tabs[t] && b < nrc; b += replay_block(g))
            replay_table(tabs[t], g, cells + b);
    int rc_c = fclose(c), rc_m = fclose(m);   /* both closed, whatever the first says */
    int rc = rc_c != 0 || rc_m != 0 ? -1 : 0;
    if (rc) snprintf(err, errlen, "cannot write the replay summary in %s", out);
    return rc;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int sim_sweep_merge(const char *dir, const char *out_dir, FILE *tf, char *err, size_t errlen) {
    char cells_dir[1100];
    snprintf(cells_dir, sizeof cells_dir, "%s/cells", dir);
    DIR *d = opendir(cells_dir);
    if (!d) {
        snprintf(err, errlen, "cannot read %s: %s", cells_dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    int nn = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "cell-", 5) || l < 6 || strcmp(e->d_name + l - 5, ".json")) continue;
        if (nn == cap) {
            cap = cap ? 2 * cap : 256;
            char **nb = realloc(names, (size_t)cap * sizeof *names);
            if (!nb) break;
            names = nb;
        }
        names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, by_name);
    int rc = -1;
    char *key = NULL, *parse = NULL;   /* g's strings point into parse */
    sim_sweep_grid g;
    sim_fgd_result r = {0};
    bool *seen = NULL;
    replay_cell *rc_cells = NULL;
    int ncells = 0;
    if (nn == 0) {
        snprintf(err, errlen, "no cell files (cell-NNNNN.json) in %s", cells_dir);
        goto done;
    }
    for (int i = 0; i < nn; i++) {
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", cells_dir, names[i]);
        size_t len = 0;
        char rerr[256] = "";
        char *text = sim_read_file(path, &len, rerr, sizeof rerr);
        cJSON *o = text ? cJSON_ParseWithLength(text, len) : NULL;
        free(text);
        const cJSON *gk = cJSON_GetObjectItemCaseSensitive(o, "grid");
        if (!cJSON_IsString(gk)) {
            if (rerr[0]) snprintf(err, errlen, "%s", rerr);
            else snprintf(err, errlen, "%s: not a cell file of tessera-sim sweep", path);
            cJSON_Delete(o);
            goto done;
        }
        if (!key) {   /* the first file declares the grid */
            key = strdup(gk->valuestring);
            parse = key ? strdup(key) : NULL;
            if (!parse || parse_key(parse, &g) < 0) {
                snprintf(err, errlen, "%s: unreadable grid \"%s\"", path, gk->valuestring);
                cJSON_Delete(o);
                goto done;
            }
            r.nruns = openb_cells(&g);
            ncells = sim_sweep_cells(&g);
            r.runs = calloc((size_t)r.nruns + 1, sizeof *r.runs);
            seen = calloc((size_t)ncells, sizeof *seen);
            rc_cells = calloc((size_t)(ncells - r.nruns) + 1, sizeof *rc_cells);
            if (!r.runs || !seen || !rc_cells) {
                snprintf(err, errlen, "out of memory");
                cJSON_Delete(o);
                goto done;
            }
        } else if (strcmp(key, gk->valuestring)) {
            snprintf(err, errlen, "%s belongs to another grid:\n  %s\nnot\n  %s", path, gk->valuestring, key);
            cJSON_Delete(o);
            goto done;
        }
        const cJSON *ck = cJSON_GetObjectItemCaseSensitive(o, "cell");
        int k = cJSON_IsNumber(ck) ? ck->valueint : -1;
        if (k < 0 || k >= ncells) {
            snprintf(err, errlen, "%s: cell number out of the grid", path);
            cJSON_Delete(o);
            goto done;
        }
        if (seen[k]) {
            snprintf(err, errlen, "cell %d appears twice (%s)", k, path);
            cJSON_Delete(o);
            goto done;
        }
        seen[k] = true;
        if (k >= r.nruns) {
            bool ok = read_replay_cell(o, &g, k - r.nruns, &rc_cells[k - r.nruns]);
            cJSON_Delete(o);
            if (!ok) {
                snprintf(err, errlen, "%s: missing or malformed replay fields", path);
                goto done;
            }
            continue;
        }
        sim_fgd_run *u = &r.runs[k];
        int l, p, s;
        cell_coords(&g, k, &l, &p, &s);
        u->list = l;
        u->policy = p;
        u->seed = g.seeds[s];
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "tasks"), *f = cJSON_GetObjectItemCaseSensitive(o, "failed"),
                    *tg = cJSON_GetObjectItemCaseSensitive(o, "totalGpus");
        bool ok = cJSON_IsNumber(t) && cJSON_IsNumber(f) && cJSON_IsNumber(tg) && read_array(o, "alloc", u->alloc) &&
                  read_array(o, "frag", u->frag) && read_array(o, "ratio", u->ratio);
        if (ok) {
            u->tasks = t->valueint;
            u->failed = f->valueint;
            r.total_gpus = tg->valueint;
        }
        cJSON_Delete(o);
        if (!ok) {
            snprintf(err, errlen, "%s: missing or malformed fields", path);
            goto done;
        }
    }
    int missing = 0, first_missing = -1;
    for (int k = 0; k < ncells; k++)
        if (!seen[k]) {
            if (first_missing < 0) first_missing = k;
            missing++;
        }
    if (missing) {
        snprintf(err, errlen, "%d of %d cells missing in %s (first: cell %d); run the missing shards, then merge again",
                 missing, ncells, cells_dir, first_missing);
        goto done;
    }
    sim_fgd_opts o = {.policies = g.policies, .npolicies = g.npolicies, .seeds = g.seeds, .nseeds = g.nseeds,
                      .lists = g.lists, .nlists = g.nlists, .tune = tune_of(&g)};
    if (mkdir_p(out_dir, err, errlen) < 0 || sim_fgd_write(&r, &o, out_dir, err, errlen) < 0 ||
        write_summary(&r, &g, out_dir, tf, err, errlen) < 0 ||
        (g.nreplay && write_replay(rc_cells, &g, out_dir, tf, err, errlen) < 0))
        goto done;
    rc = 0;
done:
    for (int i = 0; i < nn; i++) free(names[i]);
    free(names);
    free(key);
    free(parse);
    free(seen);
    free(rc_cells);
    sim_fgd_result_free(&r);
    return rc;
}

/* ---------------------------------------------------------------- command line */

#define DEFAULT_POLICIES "fgd,fgd@online,fgd-pack,fgd-pack@online,bestfit"

static int split(char *s, const char **items) {
    int n = 0;
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        if (n == SIM_SWEEP_MAX) return -1;
        items[n++] = tok;
    }
    return n;
}

/* "42..51" or "42,43": -1 on a bad list. */
static int seeds_of(const char *s, uint64_t *out) {
    char *end;
    const char *dots = strstr(s, "..");
    if (dots) {
        unsigned long long a = strtoull(s, &end, 10), b;
        if (end != dots) return -1;
        b = strtoull(dots + 2, &end, 10);
        if (*end || b < a || b - a >= SIM_SWEEP_MAX) return -1;
        for (unsigned long long v = a; v <= b; v++) out[v - a] = v;
        return (int)(b - a + 1);
    }
    int n = 0;
    while (*s) {
        if (n == SIM_SWEEP_MAX || *s < '0' || *s > '9') return -1;
        out[n++] = strtoull(s, &end, 10);
        if (*end && *end != ',') return -1;
        s = *end ? end + 1 : end;
    }
    return n ? n : -1;
}

/* "5,10,20": whole numbers in 1..SIM_SWEEP_MAX_SCALE, at most SIM_SWEEP_MAX; -1 on a bad list. */
static int scales_of(const char *s, int *out) {
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (n == SIM_SWEEP_MAX || end == s || *s < '0' || *s > '9' || v < 1 || v > SIM_SWEEP_MAX_SCALE ||
            (*end && (*end != ',' || !end[1])))
            return -1;
        out[n++] = (int)v;
        s = *end ? end + 1 : end;
    }
    return n ? n : -1;
}

static const char *value(int argc, char **argv, int *i, const char *name) {
    size_t l = strlen(name);
    if (strncmp(argv[*i], name, l)) return NULL;
    if (argv[*i][l] == '=') return argv[*i] + l + 1;
    if (argv[*i][l] == 0 && *i + 1 < argc) return argv[++*i];
    return NULL;
}

static void sweep_usage(FILE *f) {
    fprintf(f,
            "usage: tessera-sim sweep [grid] [--out DIR] [--threads N] [--shards N --shard-index I|env]\n"
            "       tessera-sim sweep [grid] --emit-job --shards N [--image IMG] [--claim PVC] [--parallelism P]\n"
            "       tessera-sim merge DIR [--out DIR2]\n"
            "\n"
            "The openb experiment (tessera-sim fgd-paper --help) over a grid of cells, one cell = one pod\n"
            "list, one policy, one seed. Each cell writes DIR/cells/cell-NNNNN.json; merge joins them\n"
            "into fgd-paper's CSVs and charts plus summary.csv, summary.json and table.md. A sweep run\n"
            "on one machine (no --shards) merges by itself. Same grid, same numbers, wherever it ran.\n"
            "\n"
            "grid:\n"
            "  --pod-lists LIST  openb pod lists (default: default); others need --data\n"
            "  --policies LIST   registry names or NAME@online (default %s)\n"
            "  --seeds SEEDS     42..51 (default) or a comma list\n"
            "  --tune X          inflate to X times capacity (default 1.3)\n"
            "  --half-life N     @online estimate: half-life in arrivals (default %d)\n"
            "  --warmup N        @online estimate: warm-up in arrivals (default %d)\n"
            "  --replay-seeds S  also timed replays (arrivals and departures) of gen's mixed trace, one per\n"
            "                    scale, sharing, policy and seed: 300 x scale workloads over 8 h on the\n"
            "                    bundled demo cluster (data/sim/demo-cluster.json) with every group x scale\n"
            "  --replay-scales LIST  scales of the replay cluster and trace, whole numbers 1..%d, e.g.\n"
            "                    5,10,20 (default 10); --replay-scale K is the same as --replay-scales K\n"
            "  --replay-sharing LIST  sharing of the replay cluster, e.g. as-is,whole,timeslice:4 (default\n"
            "                    as-is, the cluster file's own). An option (the syntax of tessera-sim plan\n"
            "                    --sharing-options: whole, timeslice:N, mps:N, mig:<layout>,\n"
            "                    mig:<layout>+timeslice:N, mig:on-demand) goes on every shared group (not\n"
            "                    \"whole\") that can be set up that way, as plan compares options; the\n"
            "                    others keep theirs. One that no group can take is refused.\n"
            "  --replay-quotas SPEC  namespace quotas for every replay cell, per scale 1 (times the cell's\n"
            "                    scale), in tessera-sim replay --quota's syntax over gen's tenants\n"
            "                    team-1..team-8, e.g. \"team-1=gpu-milli:2000;team-2=gpu-milli:2000\"\n"
            "  --replay-quota-mode M  wait (default), fifo or refuse (tessera-sim replay --quota-mode)\n"
            "                    Replays place fractions as tessera-extender's default\n"
            "                    --soft-share-delivery=reservation does: never on an MPS replica\n"
            "  --data DIR        openb CSVs (data/openb in the repository; in the image\n"
            "                    /usr/share/tessera/openb)\n"
            "run:\n"
            "  --out DIR         cell files go to DIR/cells, merged outputs to DIR (default sweep-out)\n"
            "  --threads N       cells in parallel (default: every core)\n"
            "  --shards N        cut the cells into N shards: shard I runs cells k with k %% N == I\n"
            "  --shard-index I   which shard to run; 'env' reads JOB_COMPLETION_INDEX (a Kubernetes\n"
            "                    Indexed Job sets it in each pod). With --shards, no merge: run\n"
            "                    `tessera-sim merge DIR` once every shard is done\n"
            "Kubernetes:\n"
            "  --emit-job        print an Indexed Job (batch/v1, completionMode: Indexed, completions =\n"
            "                    --shards) that runs the shards and writes the cells to a volume\n"
            "  --image IMG       container image with tessera-sim (default tessera-extender: the image\n"
            "                    deploy/Containerfile builds)\n"
            "  --claim PVC       PersistentVolumeClaim for the cell files, mounted at /results; it must\n"
            "                    be ReadWriteMany when pods run on several nodes (default tessera-sweep)\n"
            "  --parallelism P   pods at once (default: --shards)\n"
            "  --name NAME       Job name (default tessera-sweep)\n"
            "  --namespace NS    (default tessera)\n",
            DEFAULT_POLICIES, POLICY_ONLINE_HALF_LIFE, POLICY_ONLINE_WARMUP, SIM_SWEEP_MAX_SCALE);
}

/* YAML double-quoted scalar: the characters our arguments can hold need no escapes
 * beyond backslash and quote. */
static void yq(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* The Job: completionMode Indexed gives each pod JOB_COMPLETION_INDEX (0..completions-1)
 * and the Job completes when every index has succeeded once; a failed pod is replaced by
 * one with the same index (Kubernetes JobSpec.completionMode, batch/v1; docs: "Indexed Job
 * for Parallel Processing with Static Work Assignment"). Cell files are written under
 * temporary names and renamed, so a retried index never leaves half a file. */
static void emit_job(FILE *f, const sim_sweep_grid *g, const char *lists, const char *pols, const char *seeds,
                     const char *replay_seeds, int shards, int parallelism, const char *image, const char *claim, const char *name,
                     const char *ns) {
    char key[SIM_SWEEP_KEY_MAX];
    sim_sweep_grid_key(g, key, sizeof key);
    fprintf(f, "# tessera-sim sweep as a Kubernetes Indexed Job: %d cells in %d shards.\n", sim_sweep_cells(g), shards);
    fprintf(f, "# grid: %s\n", key);
    fprintf(f, "# When it completes: copy /results from the claim and run `tessera-sim merge DIR`.\n");
    fprintf(f, "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: %s\n  namespace: %s\n", name, ns);
    fprintf(f, "  labels:\n    app.kubernetes.io/name: tessera-sweep\n    app.kubernetes.io/part-of: tessera\n");
    fprintf(f, "spec:\n  completionMode: Indexed\n  completions: %d\n  parallelism: %d\n  backoffLimit: %d\n", shards,
            parallelism, 2 * shards);
    fprintf(f, "  template:\n    metadata:\n      labels:\n        app.kubernetes.io/name: tessera-sweep\n"
               "        app.kubernetes.io/part-of: tessera\n");
    fprintf(f, "    spec:\n      restartPolicy: Never\n      securityContext:\n        runAsNonRoot: true\n"
               "        runAsUser: 65532\n        runAsGroup: 65532\n        fsGroup: 65532\n"
               "        seccompProfile:\n          type: RuntimeDefault\n");
    fprintf(f, "      containers:\n      - name: sweep\n        image: %s\n        command:\n", image);
    const char *args[] = {"/usr/local/bin/tessera-sim", "sweep", "--pod-lists", lists, "--policies", pols, "--seeds", seeds};
    for (size_t i = 0; i < sizeof args / sizeof *args; i++) {
        fprintf(f, "        - ");
        yq(f, args[i]);
        fputc('\n', f);
    }
    char num[64];
    snprintf(num, sizeof num, "%g", tune_of(g));
    fprintf(f, "        - \"--tune\"\n        - \"%s\"\n", num);
    snprintf(num, sizeof num, "%g", half_life_of(g));
    fprintf(f, "        - \"--half-life\"\n        - \"%s\"\n", num);
    fprintf(f, "        - \"--warmup\"\n        - \"%ld\"\n", warmup_of(g));
    if (g->nreplay) {
        char scales[SIM_SWEEP_MAX * 6], sharing[SIM_SWEEP_MAX * 64];
        join_scales(g, scales, sizeof scales);
        join_sharing(g, sharing, sizeof sharing);
        fprintf(f, "        - \"--replay-seeds\"\n        - ");
        yq(f, replay_seeds);
        fprintf(f, "\n        - \"--replay-scales\"\n        - ");
        yq(f, scales);
        fprintf(f, "\n        - \"--replay-sharing\"\n        - ");
        yq(f, sharing);
        fputc('\n', f);
        if (g->replay_quotas && g->replay_quotas[0]) {
            fprintf(f, "        - \"--replay-quotas\"\n        - ");
            yq(f, g->replay_quotas);
            fprintf(f, "\n        - \"--replay-quota-mode\"\n        - ");
            yq(f, g->replay_quota_mode ? g->replay_quota_mode : "wait");
            fputc('\n', f);
        }
    }
    fprintf(f, "        - \"--data\"\n        - \"/usr/share/tessera/openb\"\n");
    fprintf(f, "        - \"--shards\"\n        - \"%d\"\n        - \"--shard-index\"\n        - \"env\"\n", shards);
    fprintf(f, "        - \"--threads\"\n        - \"1\"\n        - \"--out\"\n        - \"/results\"\n");
    fprintf(f, "        resources:\n          requests:\n            cpu: \"1\"\n            memory: 512Mi\n"
               "          limits:\n            memory: 1Gi\n");
    fprintf(f, "        securityContext:\n          allowPrivilegeEscalation: false\n          readOnlyRootFilesystem: true\n"
               "          capabilities:\n            drop: [\"ALL\"]\n");
    fprintf(f, "        volumeMounts:\n        - name: results\n          mountPath: /results\n");
    fprintf(f, "      volumes:\n      - name: results\n        persistentVolumeClaim:\n          claimName: %s\n", claim);
}

int sim_cmd_sweep(int argc, char **argv) {
    char lists_buf[2048] = "default", pols_buf[2048] = DEFAULT_POLICIES, seeds_buf[512] = "42..51", replay_buf[512] = "";
    char scales_buf[512] = "", sharing_buf[4096] = "";
    const char *scales_flag = "--replay-scales";   /* or its synonym, as given */
    char lists_arg[2048], pols_arg[2048];
    const char *out = "sweep-out", *data = NULL, *image = "tessera-extender", *claim = "tessera-sweep",
               *name = "tessera-sweep", *ns = "tessera", *v, *index_arg = NULL;
    int threads = 0, shards = 0, parallelism = 0;
    bool emit = false;
    sim_sweep_grid g;
    memset(&g, 0, sizeof g);
    for (int i = 1; i < argc; i++) {
        char *end;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            sweep_usage(stdout);
            return 0;
        } else if ((v = value(argc, argv, &i, "--pod-lists"))) {
            snprintf(lists_buf, sizeof lists_buf, "%s", v);
        } else if ((v = value(argc, argv, &i, "--policies"))) {
            snprintf(pols_buf, sizeof pols_buf, "%s", v);
        } else if ((v = value(argc, argv, &i, "--seeds"))) {
            snprintf(seeds_buf, sizeof seeds_buf, "%s", v);
        } else if ((v = value(argc, argv, &i, "--tune"))) {
            g.tune = strtod(v, &end);
            if (*end || !(g.tune > 0 && g.tune <= 10)) goto bad;
        } else if ((v = value(argc, argv, &i, "--half-life"))) {
            g.half_life = strtod(v, &end);
            if (*end || !(g.half_life > 0 && g.half_life < 1e9)) goto bad;
        } else if ((v = value(argc, argv, &i, "--warmup"))) {
            g.warmup = strtol(v, &end, 10);
            if (*end || g.warmup < 0) goto bad;
            if (g.warmup == 0) g.warmup = -1;
        } else if ((v = value(argc, argv, &i, "--replay-seeds"))) {
            snprintf(replay_buf, sizeof replay_buf, "%s", v);
        } else if ((v = value(argc, argv, &i, "--replay-scales"))) {
            scales_flag = "--replay-scales";
            snprintf(scales_buf, sizeof scales_buf, "%s", v);
        } else if ((v = value(argc, argv, &i, "--replay-scale"))) {   /* the one-scale synonym */
            scales_flag = "--replay-scale";
            snprintf(scales_buf, sizeof scales_buf, "%s", v);
        } else if ((v = value(argc, argv, &i, "--replay-sharing"))) {
            snprintf(sharing_buf, sizeof sharing_buf, "%s", v);
        } else if ((v = value(argc, argv, &i, "--replay-quotas"))) {
            g.replay_quotas = v;
        } else if ((v = value(argc, argv, &i, "--replay-quota-mode"))) {
            g.replay_quota_mode = v;
        } else if ((v = value(argc, argv, &i, "--data"))) {
            data = v;
        } else if ((v = value(argc, argv, &i, "--out"))) {
            out = v;
        } else if ((v = value(argc, argv, &i, "--threads"))) {
            threads = (int)strtol(v, &end, 10);
            if (*end || threads < 1 || threads > 256) goto bad;
        } else if ((v = value(argc, argv, &i, "--shards"))) {
            shards = (int)strtol(v, &end, 10);
            if (*end || shards < 1 || shards > 100000) goto bad;
        } else if ((v = value(argc, argv, &i, "--shard-index"))) {
            index_arg = v;
        } else if ((v = value(argc, argv, &i, "--parallelism"))) {
            parallelism = (int)strtol(v, &end, 10);
            if (*end || parallelism < 1) goto bad;
        } else if ((v = value(argc, argv, &i, "--image"))) {
            image = v;
        } else if ((v = value(argc, argv, &i, "--claim"))) {
            claim = v;
        } else if ((v = value(argc, argv, &i, "--name"))) {
            name = v;
        } else if ((v = value(argc, argv, &i, "--namespace"))) {
            ns = v;
        } else if (!strcmp(argv[i], "--emit-job")) {
            emit = true;
        } else {
            fprintf(stderr, "tessera-sim sweep: unknown or incomplete option \"%s\" (see --help)\n", argv[i]);
            return 2;
        }
        continue;
    bad:
        fprintf(stderr, "tessera-sim sweep: %s \"%s\": out of range (see --help)\n", argv[i - 1], v);
        return 2;
    }
    snprintf(lists_arg, sizeof lists_arg, "%s", lists_buf);
    snprintf(pols_arg, sizeof pols_arg, "%s", pols_buf);
    g.nlists = split(lists_buf, g.lists);
    g.npolicies = split(pols_buf, g.policies);
    g.nseeds = seeds_of(seeds_buf, g.seeds);
    if (replay_buf[0] && (g.nreplay = seeds_of(replay_buf, g.replay_seeds)) <= 0) {
        fprintf(stderr, "tessera-sim sweep: --replay-seeds \"%s\": expected A..B or a comma list\n", replay_buf);
        return 2;
    }
    if ((scales_buf[0] || sharing_buf[0] || g.replay_quotas || g.replay_quota_mode) && !g.nreplay) {
        fprintf(stderr, "tessera-sim sweep: --replay-scales, --replay-sharing and --replay-quotas shape the replay "
                        "cells: give --replay-seeds too\n");
        return 2;
    }
    if (scales_buf[0] && (g.nscales = scales_of(scales_buf, g.replay_scales)) <= 0) {
        fprintf(stderr, "tessera-sim sweep: %s \"%s\": expected a comma list of 1..%d scales, each a whole number in "
                        "1..%d\n", scales_flag, scales_buf, SIM_SWEEP_MAX, SIM_SWEEP_MAX_SCALE);
        return 2;
    }
    char sharing_copy[sizeof sharing_buf];
    snprintf(sharing_copy, sizeof sharing_copy, "%s", sharing_buf);
    if (sharing_buf[0] && (g.nsharing = split(sharing_copy, g.replay_sharing)) <= 0) {
        fprintf(stderr, "tessera-sim sweep: --replay-sharing \"%s\": expected 1..%d comma-separated sharing options\n",
                sharing_buf, SIM_SWEEP_MAX);
        return 2;
    }
    if (g.nlists <= 0 || g.npolicies <= 0 || g.nseeds <= 0) {
        fprintf(stderr, "tessera-sim sweep: need 1..%d pod lists, policies and seeds (--seeds A..B or a comma list)\n",
                SIM_SWEEP_MAX);
        return 2;
    }
    char err[2048];
    if (sim_sweep_check(&g, err, sizeof err) < 0) {
        fprintf(stderr, "tessera-sim sweep: %s\n", err);
        return 2;
    }
    if (emit) {
        if (shards < 1) {
            fprintf(stderr, "tessera-sim sweep --emit-job: give --shards N (the Job's completions)\n");
            return 2;
        }
        if (parallelism < 1 || parallelism > shards) parallelism = shards;
        emit_job(stdout, &g, lists_arg, pols_arg, seeds_buf, replay_buf, shards, parallelism, image, claim, name, ns);
        return 0;
    }
    int index = 0;
    if (index_arg) {
        const char *iv = !strcmp(index_arg, "env") ? getenv("JOB_COMPLETION_INDEX") : index_arg;
        char *end;
        long x = iv ? strtol(iv, &end, 10) : -1;
        if (!iv || *end || x < 0 || x >= (shards ? shards : 1)) {
            fprintf(stderr, "tessera-sim sweep: --shard-index %s: %s\n", index_arg,
                    !iv ? "JOB_COMPLETION_INDEX is not set (run inside an Indexed Job, or give a number)"
                        : "expected 0..shards-1");
            return 2;
        }
        index = (int)x;
    }
    int n = sim_sweep_cells(&g);
    if (sim_sweep_run(&g, data, shards ? shards : 1, index, threads, out, err, sizeof err) < 0) {
        fprintf(stderr, "tessera-sim sweep: %s\n", err);
        return 1;
    }
    if (shards) {
        printf("shard %d of %d: cells %d, %d+%d, ... of %d written to %s/cells\n", index, shards, index, index, shards, n, out);
        return 0;
    }
    if (sim_sweep_merge(out, out, stdout, err, sizeof err) < 0) {
        fprintf(stderr, "tessera-sim sweep: %s\n", err);
        return 1;
    }
    printf("%d cells; CSVs, charts, summary.csv/json and table.md in %s/\n", n, out);
    return 0;
}

int sim_cmd_merge(int argc, char **argv) {
    const char *dir = NULL, *out = NULL, *v;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            sweep_usage(stdout);
            return 0;
        } else if ((v = value(argc, argv, &i, "--out"))) {
            out = v;
        } else if (argv[i][0] != '-' && !dir) {
            dir = argv[i];
        } else {
            fprintf(stderr, "tessera-sim merge: unknown or extra argument \"%s\" (usage: tessera-sim merge DIR [--out DIR2])\n",
                    argv[i]);
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "usage: tessera-sim merge DIR [--out DIR2]   (DIR holds cells/ from tessera-sim sweep)\n");
        return 2;
    }
    char err[1024];
    if (sim_sweep_merge(dir, out ? out : dir, stdout, err, sizeof err) < 0) {
        fprintf(stderr, "tessera-sim merge: %s\n", err);
        return 1;
    }
    printf("merged into %s/\n", out ? out : dir);
    return 0;
}
