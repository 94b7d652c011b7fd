/* replay.c -- the event loop behind `tessera-sim replay`; the rules are in replay.h.
 * Every placement decision is policy/incremental.h's (policy_place's); every state
 * change is model_assign / model_release. This file keeps time, queues and statistics. */
#include "sim/replay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/charge.h"
#include "model/fit.h"
#include "policy/incremental.h"
#include "policy/policy.h"
#include "sim/fgd_paper.h"
#include "sim/progress.h"
#include "sim/quota.h"
#include "sim/slowdown.h"

enum { W_FUTURE = 0, W_WAIT, W_RUN, W_DONE, W_UNSCHED, W_QUOTA, W_REFUSED };

typedef struct run {
    double start, end;       /* s */
    double admitted;         /* s: when its quota admitted it (its arrival without quota waits) */
    double last;             /* when remaining was last brought up to date */
    double remaining;        /* work left, in seconds on a dedicated GPU */
    double rate;             /* current progress per second (slowdown.h) */
    double comm_factor;      /* multi-GPU communication factor of its set (1: none, or not multi-GPU) */
    int32_t node;
    uint32_t ver;            /* bumped on every rate change; stale heap entries carry an older one */
    uint8_t state;
    uint8_t kgpus;           /* distinct GPUs of a multi-GPU pod (no MIG grant); 0 otherwise */
    uint8_t align;           /* its set's model_align */
    bool unaligned;          /* below the best its node offers for kgpus */
} run;

typedef struct event {
    double t;
    int32_t w;
    uint32_t ver;
} event;

typedef struct queue {      /* waiting workloads of one shape, a heap by (priority desc, seq asc) */
    int32_t *w;
    int n, cap;
    int pos;                /* index in state.waiting while n > 0 */
    bool ready;             /* capacity freed where it may fit: try again */
    bool unschedulable;     /* fits on no node of the empty cluster */
} queue;

typedef struct state {
    const sim_trace *t;
    model_request *req;         /* per shape: the trace's request, narrowed as the extender's delivery narrows it */
    model_node **nodes;
    int *group_of;
    int n;
    const policy *pol;
    policy_ctx ctx;
    policy_workload *wl;
    policy_inc *inc;
    policy_online *est;         /* NAME@online: the target workload estimated from arrivals so far */
    uint8_t *observed;          /* per workload: counted in est (a retry from the queue is no arrival) */
    const sim_replay_opts *o;
    run *r;
    uint32_t *seq;           /* arrival rank (FIFO order) */
    double *gpu_util;        /* n * MODEL_MAX_GPUS: summed utilisation of the non-exclusive tenants */
    sim_comm_model comm;
    int8_t *best_align;      /* per group and k (MODEL_MAX_GPUS + 1 each): the best alignment of k of its
                              * GPUs, -1 until computed; -2: the group's nodes have no topology */
    event *heap;
    int nheap, heapcap;
    queue *q;
    int *waiting;            /* shapes with a non-empty queue, in no order */
    int nwaiting;
    int nready;
    double now;
    long alloc_milli;        /* allocated milli-GPU over the cluster */
    int *node_milli;         /* per node */
    long placements;
    /* quotas (sim/quota.h): per tenant its quota (-1: none), per shape its charge, per quota its use
     * and the workloads waiting for it, sorted by queue order */
    int *tq;
    model_charge *charge;
    int nquotas;
    struct qstate {
        int64_t milli, mib, peak_milli, peak_mib;
        double area_milli, area_mib;
        int32_t *w;
        int n, cap;
    } *qs;
    char err[640];
    bool failed;
} state;

/* ---------------------------------------------------------------- heaps */

static bool ev_less(const event *a, const event *b) { return a->t < b->t || (a->t == b->t && a->w < b->w); }

static void ev_push(state *s, event e) {
    if (s->nheap == s->heapcap) {
        s->heapcap = s->heapcap ? 2 * s->heapcap : 1024;
        s->heap = realloc(s->heap, (size_t)s->heapcap * sizeof *s->heap);
    }
    int i = s->nheap++;
    while (i > 0 && ev_less(&e, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = e;
}

static event ev_pop(state *s) {
    event top = s->heap[0], last = s->heap[--s->nheap];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= s->nheap) break;
        if (c + 1 < s->nheap && ev_less(&s->heap[c + 1], &s->heap[c])) c++;
        if (!ev_less(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->nheap) s->heap[i] = last;
    return top;
}

/* Queue order: higher priority first, then earlier arrival. */
static bool q_before(const state *s, int a, int b) {
    const sim_workload *x = &s->t->w[a], *y = &s->t->w[b];
    if (x->priority != y->priority) return x->priority > y->priority;
    return s->seq[a] < s->seq[b];
}

static void q_push(state *s, queue *q, int w) {
    if (q->n == 0) {
        q->pos = s->nwaiting;
        s->waiting[s->nwaiting++] = (int)(q - s->q);
    }
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 16;
        q->w = realloc(q->w, (size_t)q->cap * sizeof *q->w);
    }
    int i = q->n++;
    while (i > 0 && q_before(s, w, q->w[(i - 1) / 2])) {
        q->w[i] = q->w[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    q->w[i] = w;
}

static void q_pop(state *s, queue *q) {
    int last = q->w[--q->n], i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= q->n) break;
        if (c + 1 < q->n && q_before(s, q->w[c + 1], q->w[c])) c++;
        if (!q_before(s, q->w[c], last)) break;
        q->w[i] = q->w[c];
        i = c;
    }
    if (q->n) {
        q->w[i] = last;
        return;
    }
    int moved = s->waiting[--s->nwaiting];   /* empty now: leave the waiting list */
    s->waiting[q->pos] = moved;
    s->q[moved].pos = q->pos;
}

/* ---------------------------------------------------------------- rates */

static void set_rate(state *s, int w, double rate) {
    run *x = &s->r[w];
    if (rate < 1e-6) rate = 1e-6;
    if (x->rate == rate) return;
    x->remaining -= x->rate > 0 ? x->rate * (s->now - x->last) : 0;
    if (x->remaining < 0) x->remaining = 0;
    x->last = s->now;
    x->rate = rate;
    x->ver++;
    ev_push(s, (event){s->now + x->remaining / rate, w, x->ver});
}

static int uid_workload(const char *uid) { return (int)strtol(uid, NULL, 10); }

/* Summed utilisation of the other tenants of the time-sliced MIG instance a replica grant
 * is on (layered sharing): only they share its SMs. */
static double instance_others(const state *s, const model_node *n, int self, const model_grant *mine) {
    double sum = 0;
    for (int i = 0; i < n->nallocs; i++) {
        const model_alloc *al = &n->allocs[i];
        if (i == self || !al->uid[0]) continue;
        for (int g = 0; g < al->a.ngrants; g++) {
            const model_grant *gr = &al->a.grant[g];
            if (gr->gpu == mine->gpu && gr->mig_profile >= 0 && gr->replica >= 0 && gr->mig_start == mine->mig_start)
                sum += s->t->w[uid_workload(al->uid)].util;
        }
    }
    return sum;
}

/* A workload's memory-bandwidth share alone (slowdown.h): the trace's memBandwidth, else its utilisation. */
static double mem_bw(const state *s, int w) {
    const sim_workload *x = &s->t->w[w];
    return x->bw_given ? x->mem_bw : x->util;
}

/* The memory-bandwidth load of the MPS clients on GPU gpu of node n (sim_mps_load summed): what an MPS
 * client's rate is divided by when it exceeds 1. */
static double mps_load(const state *s, const model_node *n, int gpu) {
    double sum = 0;
    for (int i = 0; i < n->nallocs; i++) {
        const model_alloc *al = &n->allocs[i];
        if (!al->uid[0]) continue;
        for (int g = 0; g < al->a.ngrants; g++) {
            const model_grant *gr = &al->a.grant[g];
            double share = gr->gpu == gpu ? sim_mps_share(&n->gpus[gpu], gr) : 0;
            if (share <= 0) continue;
            int w = uid_workload(al->uid);
            sum += sim_mps_load(s->t->w[w].util, mem_bw(s, w), share);
        }
    }
    return sum;
}

/* Re-rate every tenant of node k holding a non-exclusive grant on a GPU in mask. */
static void rerate(state *s, int k, uint32_t mask) {
    const model_node *n = s->nodes[k];
    const double *util = &s->gpu_util[(size_t)k * MODEL_MAX_GPUS];
    for (int i = 0; i < n->nallocs; i++) {
        const model_alloc *al = &n->allocs[i];
        if (!al->uid[0]) continue;
        bool touched = false;
        for (int g = 0; g < al->a.ngrants; g++) touched |= (mask >> al->a.grant[g].gpu) & 1;
        if (!touched) continue;
        int w = uid_workload(al->uid);
        double u = s->t->w[w].util, rate = 1.0;
        for (int g = 0; g < al->a.ngrants; g++) {
            const model_grant *gr = &al->a.grant[g];
            double share = sim_mps_share(&n->gpus[gr->gpu], gr), r;
            if (share > 0) {   /* an MPS client: capped at its SM share, contending only for memory bandwidth */
                r = sim_rate_mps(u, share, mps_load(s, n, gr->gpu));
            } else {
                double others = gr->mig_profile >= 0 && gr->replica >= 0 ? instance_others(s, n, i, gr)
                                                                         : util[gr->gpu] - (gr->exclusive ? 0 : u);
                r = sim_rate_grant(&n->gpus[gr->gpu], gr, u, others > 1e-9 ? others : 0);
            }
            if (r < rate) rate = r;
        }
        set_rate(s, w, rate / s->r[w].comm_factor);
    }
}

/* Account node k's allocation and the per-GPU utilisation after a grant set changes. */
static void node_changed(state *s, int k) {
    const model_node *n = s->nodes[k];
    int milli = 0;
    for (int g = 0; g < n->ngpus; g++) milli += 1000 - policy_gpu_free(&n->gpus[g]);
    s->alloc_milli += milli - s->node_milli[k];
    s->node_milli[k] = milli;
    policy_inc_touch(s->inc, k);
    if (s->o->check) {
        char why[256];
        if (!model_node_check(n, why, sizeof why)) {
            snprintf(s->err, sizeof s->err, "node %s: %s", n->name, why);
            s->failed = true;
        }
    }
}

static uint32_t add_util(state *s, int k, const model_assignment *a, double u) {
    uint32_t mask = 0;
    for (int g = 0; g < a->ngrants; g++) {
        mask |= 1u << a->grant[g].gpu;
        if (!a->grant[g].exclusive) s->gpu_util[(size_t)k * MODEL_MAX_GPUS + a->grant[g].gpu] += u;
    }
    return mask;
}

/* ---------------------------------------------------------------- topology */

/* The best alignment any k GPUs of the node's group can have (a group's nodes share one topology),
 * computed once per group and k. */
static model_align group_best(state *s, int node, int k) {
    int8_t *b = &s->best_align[(size_t)s->group_of[node] * (MODEL_MAX_GPUS + 1) + k];
    if (*b == -1) {
        const model_node *n = s->nodes[node];
        bool all[MODEL_MAX_GPUS];
        int8_t out[MODEL_MAX_GPUS];
        for (int g = 0; g < MODEL_MAX_GPUS; g++) all[g] = g < n->ngpus;
        int a = n->topo ? model_topo_best_set(n, all, k, out) : -1;
        *b = (int8_t)(a < 0 ? -2 : a);
    }
    return *b < 0 ? MODEL_ALIGN_UNKNOWN : (model_align)*b;
}

/* A multi-GPU pod's set: its alignment, whether its node had a better one, and the
 * communication factor it runs with (slowdown.h). */
static void judge_set(state *s, int w, int node, const model_assignment *a) {
    run *x = &s->r[w];
    x->kgpus = 0;
    x->align = MODEL_ALIGN_UNKNOWN;
    x->unaligned = false;
    x->comm_factor = 1.0;
    int8_t gpus[MODEL_MAX_GPUS];
    int k = 0;
    uint32_t seen = 0;
    for (int g = 0; g < a->ngrants; g++) {
        const model_grant *gr = &a->grant[g];
        if (gr->mig_profile >= 0) return;   /* no P2P between MIG devices: nothing to judge */
        if (!((seen >> gr->gpu) & 1)) gpus[k++] = gr->gpu;
        seen |= 1u << gr->gpu;
    }
    if (k < 2) return;
    const model_node *n = s->nodes[node];
    model_align al = model_topo_align(n, gpus, k);
    x->kgpus = (uint8_t)k;
    x->align = (uint8_t)al;
    x->unaligned = al != MODEL_ALIGN_UNKNOWN && al < group_best(s, node, k);
    double c = s->t->w[w].comm_given ? s->t->w[w].comm_share : s->comm.share;
    x->comm_factor = sim_comm_factor(&s->comm, al, c);
}

/* ---------------------------------------------------------------- placing */

static bool try_place(state *s, int w) {
    const sim_workload *wk = &s->t->w[w];
    model_assignment a;
    char why[256], uid[16];
    s->placements++;
    if (s->est && !s->observed[w]) {
        s->observed[w] = 1;
        char err[256];
        int changed = policy_online_observe(s->est, &s->req[wk->shape], err, sizeof err);
        if (changed > 0) {
            s->ctx.workload = policy_online_current(s->est);
            policy_inc_set_workload(s->inc, s->ctx.workload);
        }
    }
    int k = policy_inc_place(s->inc, &s->req[wk->shape], s->seq[w], &a, why, sizeof why);
    if (k < 0) return false;
    snprintf(uid, sizeof uid, "%d", w);
    if (model_assign(s->nodes[k], uid, &a, why, sizeof why) != 0) {
        snprintf(s->err, sizeof s->err, "workload %s on %s: %s", sim_trace_id(s->t, w), s->nodes[k]->name, why);
        s->failed = true;
        return false;
    }
    run *x = &s->r[w];
    x->state = W_RUN;
    x->node = k;
    x->start = x->last = s->now;
    x->remaining = wk->duration;
    x->rate = 0;
    judge_set(s, w, k, &a);
    node_changed(s, k);
    rerate(s, k, add_util(s, k, &a, wk->util));
    return true;
}

static void quota_charge(state *s, int qi, int w, int sign);
static void quota_admit(state *s, int qi, bool arriving);

static void depart(state *s, int w) {
    run *x = &s->r[w];
    int k = x->node;
    char uid[16];
    snprintf(uid, sizeof uid, "%d", w);
    const model_alloc *al = model_node_find(s->nodes[k], uid);
    uint32_t mask = al ? add_util(s, k, &al->a, -s->t->w[w].util) : 0;
    model_release(s->nodes[k], uid);
    x->state = W_DONE;
    x->end = s->now;
    node_changed(s, k);
    rerate(s, k, mask);
    int qi = s->tq ? s->tq[s->t->w[w].tenant] : -1;
    if (qi >= 0) {
        quota_charge(s, qi, w, -1);
        quota_admit(s, qi, false);
    }
    /* Only node k has more room than before: wake the waiting shapes that fit there. */
    for (int i = 0; i < s->nwaiting; i++) {
        int sh = s->waiting[i];
        queue *q = &s->q[sh];
        if (q->ready) continue;
        if (model_fit(s->nodes[k], &s->req[sh], NULL, 0, NULL, 0) > 0) {
            q->ready = true;
            s->nready++;
        }
    }
}

/* Start waiting workloads whose shape may fit now, best queue head first. */
static void drain_ready(state *s) {
    while (s->nready > 0 && !s->failed) {
        int best = -1;
        for (int i = 0; i < s->nwaiting; i++) {
            int sh = s->waiting[i];
            if (s->q[sh].ready && (best < 0 || q_before(s, s->q[sh].w[0], s->q[best].w[0]))) best = sh;
        }
        queue *q = &s->q[best];
        int w = q->w[0];
        if (try_place(s, w)) {
            q_pop(s, q);
            if (q->n > 0) continue;
        }
        q->ready = false;
        s->nready--;
    }
}

/* A workload its quota admits (or that has none) joins the placement queue: at its arrival it
 * is tried at once; admitted later (quota freed by a departure), its shape is marked ready so
 * drain_ready tries it in queue order. */
static void admit(state *s, int w, bool arriving) {
    queue *q = &s->q[s->t->w[w].shape];
    s->r[w].admitted = s->now;
    /* Same shape already waiting and nothing freed for it: it cannot fit either. */
    if (arriving && q->n == 0 && try_place(s, w)) return;
    s->r[w].state = W_WAIT;
    q_push(s, q, w);
    if (!arriving && !q->ready) {
        q->ready = true;
        s->nready++;
    }
}

static bool quota_fits(const state *s, int qi, int w) {
    const sim_quota *lim = &s->o->quotas->q[qi];
    const model_charge *c = &s->charge[s->t->w[w].shape];
    const struct qstate *u = &s->qs[qi];
    return (lim->gpu_milli < 0 || u->milli + c->gpu_milli <= lim->gpu_milli) &&
           (lim->memory_mib < 0 || u->mib + c->memory_mib <= lim->memory_mib);
}

static void quota_charge(state *s, int qi, int w, int sign) {
    const model_charge *c = &s->charge[s->t->w[w].shape];
    struct qstate *u = &s->qs[qi];
    u->milli += sign * c->gpu_milli;
    u->mib += sign * c->memory_mib;
    if (u->milli > u->peak_milli) u->peak_milli = u->milli;
    if (u->mib > u->peak_mib) u->peak_mib = u->mib;
}

/* Admit the workloads waiting for quota qi that fit now, in queue order: each on its own
 * (wait), or none past the first that does not fit (fifo). */
static void quota_admit(state *s, int qi, bool arriving) {
    struct qstate *u = &s->qs[qi];
    int kept = 0;
    bool blocked = false;
    for (int i = 0; i < u->n; i++) {
        int w = u->w[i];
        if (!blocked && quota_fits(s, qi, w)) {
            quota_charge(s, qi, w, +1);
            admit(s, w, arriving);
        } else {
            u->w[kept++] = w;
            blocked |= s->o->quotas->mode == SIM_QUOTA_FIFO;
        }
    }
    u->n = kept;
}

static void arrive(state *s, int w) {
    queue *q = &s->q[s->t->w[w].shape];
    if (q->unschedulable) {
        s->r[w].state = W_UNSCHED;
        return;
    }
    int qi = s->tq ? s->tq[s->t->w[w].tenant] : -1;
    if (qi < 0) {
        admit(s, w, true);
        return;
    }
    const sim_quota *lim = &s->o->quotas->q[qi];
    const model_charge *c = &s->charge[s->t->w[w].shape];
    bool never = (lim->gpu_milli >= 0 && c->gpu_milli > lim->gpu_milli) ||
                 (lim->memory_mib >= 0 && c->memory_mib > lim->memory_mib);
    struct qstate *u = &s->qs[qi];
    if (never || (s->o->quotas->mode == SIM_QUOTA_REFUSE && !quota_fits(s, qi, w))) {
        s->r[w].state = W_REFUSED;
        return;
    }
    /* into the namespace's quota queue at its place (priority, then arrival), then admit what fits */
    if (u->n == u->cap) {
        u->cap = u->cap ? 2 * u->cap : 16;
        u->w = realloc(u->w, (size_t)u->cap * sizeof *u->w);
    }
    int i = u->n++;
    while (i > 0 && q_before(s, w, u->w[i - 1])) {
        u->w[i] = u->w[i - 1];
        i--;
    }
    u->w[i] = w;
    s->r[w].state = W_QUOTA;
    quota_admit(s, qi, true);
}

/* ---------------------------------------------------------------- results */

double sim_percentile(const double *sorted, int n, double p) {
    if (n <= 0) return 0;
    int rank = (int)ceil(p / 100.0 * n);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return sorted[rank - 1];
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void kind_stats(double *wait, double *slow, int n, sim_kind_stats *ks) {
    memset(ks, 0, sizeof *ks);
    ks->n = n;
    if (n == 0) return;
    double sw = 0, ss = 0;
    for (int i = 0; i < n; i++) sw += wait[i], ss += slow[i];
    qsort(wait, (size_t)n, sizeof *wait, cmp_double);
    qsort(slow, (size_t)n, sizeof *slow, cmp_double);
    ks->wait_mean = sw / n;
    ks->wait_p50 = sim_percentile(wait, n, 50);
    ks->wait_p95 = sim_percentile(wait, n, 95);
    ks->wait_p99 = sim_percentile(wait, n, 99);
    ks->wait_max = wait[n - 1];
    ks->slow_mean = ss / n;
    ks->slow_p95 = sim_percentile(slow, n, 95);
}

/* Per tenant: waits of its workloads that ran, quota waits, and its namespace's quota use. */
static void tenant_stats(const state *s, sim_replay_result *out, double *wait) {
    const sim_trace *t = s->t;
    out->tenant = calloc((size_t)t->ntenants + 1, sizeof *out->tenant);
    if (!out->tenant) return;
    out->ntenants = t->ntenants;
    double horizon = s->now > 0 ? s->now : 1;
    for (int k = 0; k < t->ntenants; k++) {
        sim_tenant_stats *ts = &out->tenant[k];
        snprintf(ts->tenant, sizeof ts->tenant, "%s", t->tenants[k]);
        snprintf(ts->ns, sizeof ts->ns, "%s", s->o->quotas ? sim_quotas_namespace(s->o->quotas, t->tenants[k]) : t->tenants[k]);
        int qi = s->tq[k];
        ts->hard_milli = qi >= 0 ? s->o->quotas->q[qi].gpu_milli : -1;
        ts->hard_mib = qi >= 0 ? s->o->quotas->q[qi].memory_mib : -1;
        if (qi >= 0) {
            ts->peak_milli = s->qs[qi].peak_milli;
            ts->peak_mib = s->qs[qi].peak_mib;
            ts->mean_milli = s->qs[qi].area_milli / horizon;
            ts->mean_mib = s->qs[qi].area_mib / horizon;
        }
        int m = 0;
        double qsum = 0;
        for (int i = 0; i < t->n; i++) {
            if (t->w[i].tenant != k) continue;
            const run *x = &s->r[i];
            ts->n++;
            if (x->state == W_REFUSED) ts->refused++;
            if (x->state != W_DONE) continue;
            ts->placed++;
            wait[m++] = x->start - t->w[i].arrival;
            double qw = x->admitted - t->w[i].arrival;
            if (qw > 0) {
                ts->quota_waited++;
                qsum += qw;
                if (qw > ts->quota_wait_max) ts->quota_wait_max = qw;
            }
        }
        ts->quota_wait_mean = ts->quota_waited ? qsum / ts->quota_waited : 0;
        if (m == 0) continue;
        double sw = 0;
        for (int i = 0; i < m; i++) sw += wait[i];
        qsort(wait, (size_t)m, sizeof *wait, cmp_double);
        ts->wait_mean = sw / m;
        ts->wait_p50 = sim_percentile(wait, m, 50);
        ts->wait_p95 = sim_percentile(wait, m, 95);
        ts->wait_max = wait[m - 1];
    }
}

static void topo_stats(const state *s, sim_replay_result *out) {
    sim_topo_stats *ts = &out->topo;
    double run_sum = 0, jct_sum = 0, factor_sum = 0;
    for (int i = 0; i < s->t->n; i++) {
        const run *x = &s->r[i];
        if (x->state != W_DONE || x->kgpus < 2) continue;
        ts->multi++;
        ts->by_align[x->align]++;
        ts->unaligned += x->unaligned;
        double ran = x->end - x->start;
        run_sum += ran;
        jct_sum += x->end - s->t->w[i].arrival;
        factor_sum += x->comm_factor;
        double extra = x->kgpus * ran * (1.0 - 1.0 / x->comm_factor) / 3600.0;
        ts->extra_gpu_hours += extra;
        if (x->unaligned) ts->unaligned_gpu_hours += extra;
    }
    if (ts->multi) {
        ts->run_mean_s = run_sum / ts->multi;
        ts->jct_mean_s = jct_sum / ts->multi;
        ts->factor_mean = factor_sum / ts->multi;
    }
}

static void collect(const state *s, sim_replay_result *out) {
    const sim_trace *t = s->t;
    double *wait = malloc(((size_t)t->n + 1) * sizeof *wait), *slow = malloc(((size_t)t->n + 1) * sizeof *slow);
    for (int k = -1; k < SIM_NKINDS; k++) {
        int m = 0;
        for (int i = 0; i < t->n; i++) {
            const run *x = &s->r[i];
            if (x->state != W_DONE || (k >= 0 && t->w[i].kind != k)) continue;
            wait[m] = x->start - t->w[i].arrival;
            slow[m] = (x->end - x->start) / t->w[i].duration;
            m++;
        }
        kind_stats(wait, slow, m, k < 0 ? &out->all : &out->kind[k]);
    }
    out->start = malloc(((size_t)t->n + 1) * sizeof *out->start);
    out->end = malloc(((size_t)t->n + 1) * sizeof *out->end);
    for (int i = 0; i < t->n; i++) {
        out->start[i] = s->r[i].state == W_DONE ? s->r[i].start : -1;
        out->end[i] = s->r[i].state == W_DONE ? s->r[i].end : -1;
        if (s->r[i].state == W_DONE) out->placed++;
        if (s->r[i].state == W_UNSCHED) out->unschedulable++, out->unschedulable_kind[t->w[i].kind]++;
        if (s->r[i].state == W_REFUSED) out->refused++;
        if (s->r[i].state == W_DONE && s->r[i].end > out->makespan_s) out->makespan_s = s->r[i].end;
    }
    if (s->tq) tenant_stats(s, out, wait);
    topo_stats(s, out);
    free(wait);
    free(slow);
}

/* ---------------------------------------------------------------- the loop */

void sim_replay_defaults(sim_replay_opts *o) {
    memset(o, 0, sizeof *o);
    o->policy = "fgd";
    o->seed = 42;
    o->samples = 100;
    o->frag = true;
}

static int by_arrival(const void *a, const void *b, void *trace) {
    int x = *(const int *)a, y = *(const int *)b;
    const sim_trace *t = trace;
    double ax = t->w[x].arrival, ay = t->w[y].arrival;
    if (ax != ay) return ax < ay ? -1 : 1;
    return (x > y) - (x < y);
}

static int setup(state *s, const sim_cluster *c, const sim_trace *t, const sim_replay_opts *o, char *err,
                 size_t errlen) {
    s->t = t;
    s->o = o;
    if (o->comm) s->comm = *o->comm;
    else sim_comm_defaults(&s->comm);
    bool online = false;
    s->pol = sim_fgd_policy_find(o->policy, &online);
    if (!s->pol) {
        snprintf(err, errlen, "unknown policy \"%s\"", o->policy);
        return -1;
    }
    if (sim_cluster_build(c, NULL, &s->nodes, &s->group_of, &s->n, err, errlen) != 0) return -1;
    s->req = malloc(((size_t)t->nshapes + 1) * sizeof *s->req);
    if (!s->req) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int sh = 0; sh < t->nshapes; sh++) {
        s->req[sh] = t->shapes[sh].req;
        if (!o->soft_share_delivery_none) model_request_for_reservation_delivery(&s->req[sh]);
    }
    /* The target workload (fgd, mig-aware, fragmentation): the trace's shapes by count, narrowed
     * as placed (the extender reads its --workload file the same way), so the measure does not
     * count room the delivery could never use. */
    long *count = calloc((size_t)t->nshapes + 1, sizeof *count);
    for (int i = 0; i < t->n; i++) count[t->w[i].shape]++;
    s->wl = policy_workload_new();
    for (int sh = 0; sh < t->nshapes; sh++)
        if (count[sh] && policy_workload_add(s->wl, &s->req[sh], count[sh], err, errlen) != 0) {
            free(count);
            return -1;
        }
    free(count);
    if (t->n > 0 && policy_workload_finish(s->wl, 95, err, errlen) != 0) return -1;
    policy_ctx_init(&s->ctx, o->seed);
    s->ctx.workload = t->n > 0 ? s->wl : NULL;
    if (online && t->n > 0) {
        /* Nothing has arrived yet: no estimate. The first arrival is observed before it is
         * placed, so the policy always has one; fragmentation is still measured against
         * the trace's shapes (s->wl), the yardstick of every policy. */
        s->est = policy_online_new(POLICY_ONLINE_HALF_LIFE, POLICY_ONLINE_WARMUP, err, errlen);
        s->observed = calloc((size_t)t->n, 1);
        if (!s->est || !s->observed) {
            if (s->est) snprintf(err, errlen, "out of memory");
            return -1;
        }
    }
    s->inc = policy_inc_new(s->pol, &s->ctx, s->nodes, s->n, 0);
    s->r = calloc((size_t)t->n + 1, sizeof *s->r);
    s->seq = malloc(((size_t)t->n + 1) * sizeof *s->seq);
    s->gpu_util = calloc((size_t)s->n * MODEL_MAX_GPUS + 1, sizeof *s->gpu_util);
    s->node_milli = calloc((size_t)s->n + 1, sizeof *s->node_milli);
    s->best_align = malloc(((size_t)c->ngroups + 1) * (MODEL_MAX_GPUS + 1));
    if (s->best_align) memset(s->best_align, -1, ((size_t)c->ngroups + 1) * (MODEL_MAX_GPUS + 1));
    s->q = calloc((size_t)t->nshapes + 1, sizeof *s->q);
    s->waiting = calloc((size_t)t->nshapes + 1, sizeof *s->waiting);
    if ((!s->inc && t->n > 0) || !s->waiting || !s->r || !s->seq || !s->gpu_util || !s->node_milli || !s->q ||
        !s->best_align) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    /* Quotas: each tenant's namespace's quota, and each shape's charge as tessera's webhook declares it
     * for the pod (the request as written, before the delivery narrows it). */
    const sim_quotas *qz = o->quotas;
    if ((!qz || qz->n == 0) && o->tenants) {   /* per-tenant stats, nobody limited */
        s->tq = malloc(((size_t)t->ntenants + 1) * sizeof *s->tq);
        if (!s->tq) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        for (int k = 0; k < t->ntenants; k++) s->tq[k] = -1;
    } else if (qz && qz->n > 0) {
        s->tq = malloc(((size_t)t->ntenants + 1) * sizeof *s->tq);
        s->charge = calloc((size_t)t->nshapes + 1, sizeof *s->charge);
        s->qs = calloc((size_t)qz->n, sizeof *s->qs);
        if (!s->tq || !s->charge || !s->qs) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        s->nquotas = qz->n;
        for (int k = 0; k < t->ntenants; k++) {
            const sim_quota *q = sim_quotas_find(qz, sim_quotas_namespace(qz, t->tenants[k]));
            s->tq[k] = q ? (int)(q - qz->q) : -1;
        }
        for (int sh = 0; sh < t->nshapes; sh++) {
            char cerr[256];
            /* A pod no GPU of the catalog holds is refused by the webhook; charged nothing here,
             * it is unschedulable anyway. */
            if (model_charge_request(&t->shapes[sh].req, NULL, &s->charge[sh], cerr, sizeof cerr) != 0)
                memset(&s->charge[sh], 0, sizeof s->charge[sh]);
        }
    }
    /* Unschedulable: fits on no group's (empty) node. */
    for (int sh = 0; sh < t->nshapes; sh++) {
        bool fits = false;
        for (int i = 0; i < s->n && !fits; i++)
            if (i == 0 || s->group_of[i] != s->group_of[i - 1])
                fits = model_fit(s->nodes[i], &s->req[sh], NULL, 0, NULL, 0) > 0;
        s->q[sh].unschedulable = !fits;
    }
    return 0;
}

static void teardown(state *s) {
    for (int i = 0; i < s->nquotas; i++) free(s->qs[i].w);
    free(s->qs);
    free(s->tq);
    free(s->charge);
    if (s->q && s->t)
        for (int sh = 0; sh < s->t->nshapes; sh++) free(s->q[sh].w);
    free(s->q);
    free(s->req);
    free(s->waiting);
    free(s->r);
    free(s->seq);
    free(s->gpu_util);
    free(s->node_milli);
    free(s->best_align);
    free(s->heap);
    policy_inc_free(s->inc);
    policy_online_free(s->est);
    free(s->observed);
    policy_workload_free(s->wl);
    sim_cluster_free_nodes(s->nodes, s->group_of, s->n);
}

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int sim_replay(const sim_cluster *c, const sim_trace *t, const sim_replay_opts *o, sim_replay_result *out,
               char *err, size_t errlen) {
    double t0 = mono();
    memset(out, 0, sizeof *out);
    state s = {0};
    int rc = -1;
    int *order = malloc(((size_t)t->n + 1) * sizeof *order);
    if (!order || setup(&s, c, t, o, err, errlen) != 0) goto done;
    for (int i = 0; i < t->n; i++) order[i] = i;
    qsort_r(order, (size_t)t->n, sizeof *order, by_arrival, (void *)t);
    for (int i = 0; i < t->n; i++) s.seq[order[i]] = (uint32_t)i;

    snprintf(out->policy, sizeof out->policy, "%s", o->policy);
    out->workloads = t->n;
    for (int i = 0; i < s.n; i++) out->gpus += s.nodes[i]->ngpus;
    int ns = o->samples > 1 ? o->samples : 100;
    double horizon = t->n ? t->w[order[t->n - 1]].arrival : 0;
    out->t = calloc((size_t)ns, sizeof(double));
    out->alloc_pct = calloc((size_t)ns, sizeof(double));
    out->frag_pct = calloc((size_t)ns, sizeof(double));
    double cap_milli = 1000.0 * (out->gpus ? out->gpus : 1), area = 0, area_window = 0, frag_sum = 0;
    int ai = 0, si = 0;

    while ((ai < t->n || s.nheap > 0) && !s.failed) {
        double next = ai < t->n ? t->w[order[ai]].arrival : INFINITY;
        if (s.nheap > 0 && s.heap[0].t < next) next = s.heap[0].t;
        /* Samples see the state in force just before the next event. */
        while (si < ns && (ns == 1 ? 0 : horizon * si / (ns - 1)) <= next) {
            out->t[si] = ns == 1 ? 0 : horizon * si / (ns - 1);
            out->alloc_pct[si] = 100.0 * s.alloc_milli / cap_milli;
            out->frag_pct[si] = -1;
            if (o->frag && s.ctx.workload) {
                policy_frag_report fr;
                if (policy_frag_cluster(s.nodes, s.n, s.wl, &fr) == 0) out->frag_pct[si] = fr.amount_pct;
                frag_sum += out->frag_pct[si];
            }
            si++;
        }
        area += s.alloc_milli * (next - s.now);
        if (isfinite(next))
            for (int i = 0; i < s.nquotas; i++) {
                s.qs[i].area_milli += (double)s.qs[i].milli * (next - s.now);
                s.qs[i].area_mib += (double)s.qs[i].mib * (next - s.now);
            }
        if (s.now < horizon) area_window += s.alloc_milli * ((next < horizon ? next : horizon) - s.now);
        s.now = next;
        while (s.nheap > 0 && s.heap[0].t <= s.now) {
            event e = ev_pop(&s);
            if (e.ver == s.r[e.w].ver && s.r[e.w].state == W_RUN) depart(&s, e.w);
        }
        drain_ready(&s);
        while (ai < t->n && t->w[order[ai]].arrival <= s.now && !s.failed) {
            arrive(&s, order[ai++]);
            if (o->progress) sim_progress_add(o->progress, 1);
        }
    }
    if (s.failed) {
        snprintf(err, errlen, "%s", s.err);
        goto done;
    }
    out->nsamples = si;
    collect(&s, out);
    out->gpu_hours = area / 1000.0 / 3600.0;
    out->alloc_mean_pct = horizon > 0 ? 100.0 * area_window / horizon / cap_milli : 0;
    out->frag_mean_pct = o->frag && si > 0 ? frag_sum / si : -1;
    out->placements_tried = s.placements;
    out->wall_s = mono() - t0;
    rc = 0;
done:
    if (rc != 0) sim_replay_result_free(out);
    teardown(&s);
    free(order);
    return rc;
}

void sim_replay_result_free(sim_replay_result *r) {
    free(r->t);
    free(r->alloc_pct);
    free(r->frag_pct);
    free(r->start);
    free(r->end);
    free(r->tenant);
    r->tenant = NULL;
    r->ntenants = 0;
    r->t = r->alloc_pct = r->frag_pct = r->start = r->end = NULL;
    r->nsamples = 0;
}
