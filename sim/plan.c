/* plan.c -- capacity planning by repeated replays; the search is described in plan.h. */
#include "sim/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- targets */

static const char *const stat_names[] = {"p50", "p95", "p99", "max", "mean"};

static int parse_seconds(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0) || !isfinite(v)) return -1;
    if (!strcmp(end, "") || !strcmp(end, "s")) *out = v;
    else if (!strcmp(end, "m")) *out = v * 60;
    else if (!strcmp(end, "h")) *out = v * 3600;
    else return -1;
    return 0;
}

int sim_target_parse(const char *s, sim_target *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    snprintf(out->text, sizeof out->text, "%s", s);
    static const struct { const char *text; sim_op op; } ops[] = {
        {"<=", SIM_OP_LE}, {">=", SIM_OP_GE}, {"==", SIM_OP_EQ}, {"<", SIM_OP_LT}, {">", SIM_OP_GT}};
    const char *at = NULL;
    size_t oplen = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0] && !at; i++)
        if ((at = strstr(s, ops[i].text))) out->op = ops[i].op, oplen = strlen(ops[i].text);
    if (!at || at == s || (size_t)(at - s) >= sizeof out->metric) {
        snprintf(err, errlen, "--target \"%s\": expected <metric><op><value>, e.g. \"wait.p95.inference<=30s\"", s);
        return -1;
    }
    memcpy(out->metric, s, (size_t)(at - s));
    const char *val = at + oplen, *m = out->metric;
    char stat[16] = "", kind[32] = "";
    bool time = false;
    if (!strcmp(m, "unschedulable") || !strcmp(m, "alloc.mean") || !strcmp(m, "unaligned") ||
        !strcmp(m, "comm.gpu_hours")) {
    } else if (sscanf(m, "wait.%15[^.].%31s", stat, kind) == 2 || sscanf(m, "slowdown.%15[^.].%31s", stat, kind) == 2) {
        time = m[0] == 'w';
        bool ok = false;
        for (int i = 0; i < 5; i++) ok |= !strcmp(stat, stat_names[i]) && (time || i == 1 || i == 4);
        if (!ok) {
            snprintf(err, errlen, "--target \"%s\": \"%s\" is not a statistic of %s (use %s)", s, stat,
                     time ? "wait" : "slowdown", time ? "p50, p95, p99, max, mean" : "p95, mean");
            return -1;
        }
        bool tenant = !strncmp(kind, SIM_TARGET_TENANT, strlen(SIM_TARGET_TENANT));
        if (tenant && (!time || !strcmp(stat, "p99") || !kind[strlen(SIM_TARGET_TENANT)])) {
            snprintf(err, errlen, "--target \"%s\": a tenant's target is wait.<p50|p95|max|mean>.tenant:<name>", s);
            return -1;
        }
        if (!tenant && strcmp(kind, "all") && sim_kind_parse(kind) < 0) {
            snprintf(err, errlen, "--target \"%s\": unknown kind \"%s\" (training, inference, notebook, batch, all, "
                     "tenant:<name>)",
                     s, kind);
            return -1;
        }
    } else {
        snprintf(err, errlen,
                 "--target \"%s\": unknown metric \"%s\" (wait.<stat>.<kind>, slowdown.<stat>.<kind>, "
                 "unschedulable, alloc.mean, unaligned, comm.gpu_hours)", s, m);
        return -1;
    }
    char *end;
    if (time ? parse_seconds(val, &out->value) != 0 : ((out->value = strtod(val, &end)), end == val || *end)) {
        snprintf(err, errlen, "--target \"%s\": \"%s\" is not a %s", s, val,
                 time ? "duration (30, 30s, 5m, 2h)" : "number");
        return -1;
    }
    return 0;
}

double sim_target_measure(const sim_target *t, const sim_replay_result *r) {
    if (!strcmp(t->metric, "unschedulable")) return r->unschedulable;
    if (!strcmp(t->metric, "alloc.mean")) return r->alloc_mean_pct;
    if (!strcmp(t->metric, "unaligned")) return r->topo.unaligned;
    if (!strcmp(t->metric, "comm.gpu_hours")) return r->topo.extra_gpu_hours;
    char stat[16] = "", kind[32] = "";
    bool time = t->metric[0] == 'w';
    sscanf(t->metric + (time ? 5 : 9), "%15[^.].%31s", stat, kind);
    if (!strncmp(kind, SIM_TARGET_TENANT, strlen(SIM_TARGET_TENANT))) {
        for (int i = 0; i < r->ntenants; i++) {
            const sim_tenant_stats *ts = &r->tenant[i];
            if (strcmp(ts->tenant, kind + strlen(SIM_TARGET_TENANT))) continue;
            return !strcmp(stat, "p50") ? ts->wait_p50 : !strcmp(stat, "p95") ? ts->wait_p95
                 : !strcmp(stat, "max") ? ts->wait_max : ts->wait_mean;
        }
        return 0;   /* no stats: sim_plan checked the tenant is in the trace; nothing ran (no wait) */
    }
    int k = sim_kind_parse(kind);
    const sim_kind_stats *ks = k < 0 ? &r->all : &r->kind[k];
    if (!time) return !strcmp(stat, "p95") ? ks->slow_p95 : ks->slow_mean;
    if (!strcmp(stat, "p50")) return ks->wait_p50;
    if (!strcmp(stat, "p95")) return ks->wait_p95;
    if (!strcmp(stat, "p99")) return ks->wait_p99;
    if (!strcmp(stat, "max")) return ks->wait_max;
    return ks->wait_mean;
}

bool sim_target_met(const sim_target *t, const sim_replay_result *r) {
    double v = sim_target_measure(t, r), x = t->value;
    switch (t->op) {
    case SIM_OP_LE: return v <= x;
    case SIM_OP_LT: return v < x;
    case SIM_OP_GE: return v >= x;
    case SIM_OP_GT: return v > x;
    case SIM_OP_EQ: return v == x;
    }
    return false;
}

/* ---------------------------------------------------------------- search */

typedef struct search {
    const sim_trace *t;
    const char *policy;
    const sim_plan_opts *o;
    int evaluations;
    char *err;
    size_t errlen;
} search;

int sim_plan_check(const sim_cluster *c, const sim_trace *t, const char *policy, const sim_plan_opts *o,
                   sim_replay_result *res, char *err, size_t errlen) {
    sim_replay_opts ro;
    sim_replay_defaults(&ro);
    ro.policy = policy;
    ro.seed = o->seed;
    ro.soft_share_delivery_none = o->soft_share_delivery_none;
    ro.quotas = o->quotas;
    ro.comm = o->comm;
    for (int i = 0; i < o->ntargets; i++) ro.tenants |= strstr(o->targets[i].metric, SIM_TARGET_TENANT) != NULL;
    ro.frag = false;
    ro.samples = 2;
    if (sim_cluster_nodes(c) == 0) {
        /* Nothing to replay on: every workload is unschedulable. */
        memset(res, 0, sizeof *res);
        snprintf(res->policy, sizeof res->policy, "%s", policy);
        res->workloads = res->unschedulable = t->n;
        for (int i = 0; i < t->n; i++) res->unschedulable_kind[t->w[i].kind]++;
    } else if (sim_replay(c, t, &ro, res, err, errlen) != 0) {
        return -1;
    }
    for (int i = 0; i < o->ntargets; i++)
        if (!sim_target_met(&o->targets[i], res)) return 0;
    return 1;
}

/* 1 met, 0 missed, -1 error. */
static int meets(search *s, const sim_cluster *c) {
    sim_replay_result r;
    s->evaluations++;
    int rc = sim_plan_check(c, s->t, s->policy, s->o, &r, s->err, s->errlen);
    if (rc >= 0) sim_replay_result_free(&r);
    return rc;
}

/* Smallest count of group g in [0, hi] meeting the targets, hi known to meet. */
static int shrink(search *s, sim_cluster *c, int g, int hi) {
    int lo = 0;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        c->groups[g].count = mid;
        int rc = meets(s, c);
        if (rc < 0) return -1;
        if (rc) hi = mid;
        else lo = mid + 1;
    }
    c->groups[g].count = hi;
    return hi;
}

/* Grow group g (others fixed) by doubling until the targets are met, up to limit. -1
 * error, 0 never met (count left at limit), 1 met. */
static int grow(search *s, sim_cluster *c, int g, int limit) {
    for (;;) {
        int rc = meets(s, c);
        if (rc != 0) return rc;
        if (c->groups[g].count >= limit) return 0;
        int next = c->groups[g].count ? 2 * c->groups[g].count : 1;
        c->groups[g].count = next < limit ? next : limit;
    }
}

/* Smallest count of group g with its current sharing (others fixed): -1 error, -2 none
 * up to limit. The group is left at that count. */
static int smallest(search *s, sim_cluster *c, int g, int limit) {
    int rc = grow(s, c, g, limit);
    if (rc < 0) return -1;
    if (rc == 0) return -2;
    return shrink(s, c, g, c->groups[g].count);
}

/* Per group, the sharing needing the fewest GPUs at its smallest count; on a tie the
 * group keeps the sharing it has (then the earlier option). */
static int choose_sharing(search *s, sim_cluster *c, int g, int limit) {
    sim_group best = c->groups[g];
    int best_count = smallest(s, c, g, limit);
    if (best_count == -1) return -1;
    if (best_count >= 0) best = c->groups[g];
    for (int k = 0; k < s->o->nsharing; k++) {
        sim_group saved = c->groups[g];
        if (s->o->soft[k] == SIM_COMPUTE_TRACE && sim_group_can_share(&c->groups[g], &s->o->sharing[k], NULL)) {
            /* (a soft: option rewrites the workloads, not a group: compared only, plan.h) */
            c->groups[g].sharing = s->o->sharing[k];
            int n = smallest(s, c, g, limit);
            if (n == -1) return -1;
            if (n >= 0 && (best_count < 0 || n < best_count)) best_count = n, best = c->groups[g];
        }
        c->groups[g] = saved;
    }
    c->groups[g] = best;
    return 0;
}

/* Double every group's count (up to its limit) until the targets hold: 1 met, 0 not
 * even at the limit, -1 error. */
static int upper_bound(search *s, sim_cluster *c, const int *limit, int scale) {
    for (int factor = 1;; factor *= 2) {
        int rc = meets(s, c);
        if (rc != 0 || factor >= scale) return rc;
        for (int g = 0; g < c->ngroups; g++) {
            int next = c->groups[g].count * 2;
            c->groups[g].count = next < limit[g] ? next : limit[g];
        }
    }
}

int sim_plan(const sim_cluster *base, const sim_trace *t, const char *policy, const sim_plan_opts *o,
             sim_plan_result *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    snprintf(out->policy, sizeof out->policy, "%s", policy);
    out->ntargets = o->ntargets;
    for (int i = 0; i < o->ntargets; i++) {   /* a tenant's target names a tenant of the trace */
        const char *tn = strstr(o->targets[i].metric, SIM_TARGET_TENANT);
        bool known = !tn;
        for (int k = 0; tn && k < t->ntenants && !known; k++) known = !strcmp(t->tenants[k], tn + strlen(SIM_TARGET_TENANT));
        if (!known) {
            snprintf(err, errlen, "--target \"%s\": the trace has no tenant \"%s\"", o->targets[i].text,
                     tn + strlen(SIM_TARGET_TENANT));
            return -1;
        }
    }
    search s = {t, policy, o, 0, err, errlen};
    sim_cluster *c = sim_cluster_clone(base);
    int scale = o->max_scale > 0 ? o->max_scale : 64;
    int *limit = malloc((size_t)c->ngroups * sizeof *limit);
    for (int g = 0; g < c->ngroups; g++) {
        limit[g] = (c->groups[g].count ? c->groups[g].count : 1) * scale;
        if (c->groups[g].count == 0) c->groups[g].count = 1;
    }
    /* An upper bound: double every group until the targets hold; if the given sharing
     * never gets there, try each sharing option on every group that can take it. */
    int rc = upper_bound(&s, c, limit, scale);
    for (int k = 0; rc == 0 && k < o->nsharing; k++) {
        if (o->soft[k] != SIM_COMPUTE_TRACE) continue;
        sim_cluster *alt = sim_cluster_clone(base);
        for (int g = 0; g < alt->ngroups; g++) {
            if (sim_group_can_share(&alt->groups[g], &o->sharing[k], NULL)) alt->groups[g].sharing = o->sharing[k];
            if (alt->groups[g].count == 0) alt->groups[g].count = 1;
        }
        rc = upper_bound(&s, alt, limit, scale);
        if (rc == 1) {
            sim_cluster_free(c);
            c = alt;
        } else {
            sim_cluster_free(alt);
        }
    }
    if (rc < 0) goto fail;
    out->met = rc == 1;
    if (out->met) {
        for (int g = 0; g < c->ngroups && o->nsharing > 0; g++)
            if (choose_sharing(&s, c, g, limit[g]) != 0) goto fail;
        for (int pass = 0; pass < 4; pass++) {
            bool changed = false;
            for (int g = 0; g < c->ngroups; g++) {
                int before = c->groups[g].count, n = shrink(&s, c, g, before);
                if (n < 0) goto fail;
                changed |= n != before;
            }
            if (!changed) break;
        }
    }
    out->cluster = c;
    out->evaluations = s.evaluations;
    free(limit);
    if (sim_plan_check(c, t, policy, o, &out->replay, err, errlen) < 0) {
        sim_plan_result_free(out);
        return -1;
    }
    out->evaluations++;
    for (int i = 0; i < o->ntargets; i++) {
        out->measured[i] = sim_target_measure(&o->targets[i], &out->replay);
        snprintf(out->target[i], sizeof out->target[i], "%s", o->targets[i].text);
    }
    if (o->nsharing > 0 && sim_plan_compare_options(base, t, policy, o, out, err, errlen) != 0) {
        sim_plan_result_free(out);
        return -1;
    }
    return 0;
fail:
    free(limit);
    sim_cluster_free(c);
    out->cluster = NULL;
    return -1;
}

/* The comparison of plan.h: option k on every shared group that can take it
 * (sim_cluster_apply_sharing), then the search without options. GPUs of the result, -1
 * never met, -2 no group took it. */
static int compare_option(search *s, const sim_cluster *base, const sim_sharing *opt, bool soft, int scale) {
    sim_cluster *c = sim_cluster_clone(base);
    int *limit = malloc((size_t)c->ngroups * sizeof *limit), rc = -1;
    for (int g = 0; g < c->ngroups; g++) {
        limit[g] = (c->groups[g].count ? c->groups[g].count : 1) * scale;
        if (c->groups[g].count == 0) c->groups[g].count = 1;
    }
    /* a soft: option runs on unshared GPUs whether or not some group was shared */
    if (sim_cluster_apply_sharing(c, opt, NULL) == 0 && !soft) {
        rc = -2;
        goto out;
    }
    int met = upper_bound(s, c, limit, scale);
    if (met < 0) goto out;   /* an error: s->err says it */
    if (met == 0) {
        rc = -1;
        goto out;
    }
    for (int pass = 0; pass < 4; pass++) {
        bool changed = false;
        for (int g = 0; g < c->ngroups; g++) {
            int before = c->groups[g].count, n = shrink(s, c, g, before);
            if (n < 0) goto out;
            changed |= n != before;
        }
        if (!changed) break;
    }
    rc = sim_cluster_gpus(c);
out:
    free(limit);
    sim_cluster_free(c);
    return rc;
}

int sim_plan_compare_options(const sim_cluster *base, const sim_trace *t, const char *policy, const sim_plan_opts *o,
                             sim_plan_result *out, char *err, size_t errlen) {
    search s = {t, policy, o, 0, err, errlen};
    int scale = o->max_scale > 0 ? o->max_scale : 64;
    out->nopt = o->nsharing;
    for (int k = 0; k < o->nsharing; k++) {
        sim_trace *soft = NULL;
        if (o->soft[k] != SIM_COMPUTE_TRACE) {
            snprintf(out->opt[k], sizeof out->opt[k], "soft:%s", sim_compute_name(o->soft[k]));
            if (!(soft = sim_trace_compute_sharing(t, o->soft[k], err, errlen))) return -1;
            s.t = soft;
        } else {
            sim_sharing_format(&o->sharing[k], out->opt[k], sizeof out->opt[k]);
        }
        err[0] = 0;
        out->opt_gpus[k] = compare_option(&s, base, &o->sharing[k], soft != NULL, scale);
        s.t = t;
        sim_trace_free(soft);
        if (out->opt_gpus[k] == -1 && err[0]) return -1;
    }
    out->evaluations += s.evaluations;
    return 0;
}

void sim_plan_layering(const sim_plan_result *p, int *layered, int *mig_only, int *ts_only) {
    *layered = *mig_only = *ts_only = -1;
    for (int k = 0; k < p->nopt; k++) {
        if (p->opt_gpus[k] < 0) continue;
        bool mig = !strncmp(p->opt[k], "mig:", 4), ts = !strncmp(p->opt[k], "timeslice:", 10);
        int *slot = mig && strstr(p->opt[k], "+timeslice:") ? layered : mig ? mig_only : ts ? ts_only : NULL;
        if (slot && (*slot < 0 || p->opt_gpus[k] < p->opt_gpus[*slot])) *slot = k;
    }
}

void sim_plan_soft(const sim_plan_result *p, int *timeslice, int *mps) {
    *timeslice = *mps = -1;
    for (int k = 0; k < p->nopt; k++) {
        if (!strcmp(p->opt[k], "soft:timeslice")) *timeslice = k;
        /* a soft:mps option that met the targets with the fewest GPUs, else the first one */
        else if (!strncmp(p->opt[k], "soft:mps", 8) &&
                 (*mps < 0 || (p->opt_gpus[k] >= 0 && (p->opt_gpus[*mps] < 0 || p->opt_gpus[k] < p->opt_gpus[*mps]))))
            *mps = k;
    }
}

int sim_plan_soft_parse(const char *s, sim_compute *out, char *err, size_t errlen) {
    if (strncmp(s, "soft:", 5) != 0) return 0;
    if (sim_compute_parse(s + 5, out, err, errlen) != 0 || *out == SIM_COMPUTE_TRACE) {
        snprintf(err, errlen, "\"%s\": expected soft:timeslice, soft:mps or soft:mps:tenant (tessera's soft shares on "
                 "unshared GPUs, time-sliced or MPS)", s);
        return -1;
    }
    return 1;
}

void sim_plan_result_free(sim_plan_result *p) {
    sim_cluster_free(p->cluster);
    p->cluster = NULL;
    sim_replay_result_free(&p->replay);
}
