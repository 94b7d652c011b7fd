/* report.c -- tables, JSON, CSV and charts for replay and plan results. */
#include "sim/report.h"

#include <stdlib.h>
#include <string.h>

#include "sim/svg.h"

void sim_format_seconds(double s, char *buf, size_t len) {
    if (s < 60) snprintf(buf, len, "%.0fs", s);
    else if (s < 3600) snprintf(buf, len, "%.1fm", s / 60);
    else snprintf(buf, len, "%.1fh", s / 3600);
}

static void json_kind(FILE *f, const char *name, const sim_kind_stats *k, bool last) {
    fprintf(f,
            "      \"%s\": {\"n\": %d, \"wait_p50_s\": %.3f, \"wait_p95_s\": %.3f, \"wait_p99_s\": %.3f, "
            "\"wait_max_s\": %.3f, \"wait_mean_s\": %.3f, \"slowdown_mean\": %.4f, \"slowdown_p95\": %.4f}%s\n",
            name, k->n, k->wait_p50, k->wait_p95, k->wait_p99, k->wait_max, k->wait_mean, k->slow_mean, k->slow_p95,
            last ? "" : ",");
}

static void json_replay(FILE *f, const sim_replay_result *x, const char *indent) {
    fprintf(f,
            "%s{\"policy\": \"%s\", \"gpus\": %d, \"workloads\": %d, \"placed\": %d, \"unschedulable\": %d, "
            "\"makespan_s\": %.3f, \"gpu_hours\": %.3f, \"alloc_mean_pct\": %.3f, \"frag_mean_pct\": %.3f, "
            "\"wall_s\": %.3f,\n%s  \"kinds\": {\n",
            indent, x->policy, x->gpus, x->workloads, x->placed, x->unschedulable, x->makespan_s, x->gpu_hours,
            x->alloc_mean_pct, x->frag_mean_pct, x->wall_s, indent);
    for (int k = 0; k < SIM_NKINDS; k++) json_kind(f, sim_kind_name(k), &x->kind[k], false);
    json_kind(f, "all", &x->all, true);
    const sim_topo_stats *tp = &x->topo;
    fprintf(f, "%s  },\n%s  \"multi_gpu\": {\"n\": %d, \"nvlink\": %d, \"pcie\": %d, \"numa\": %d, \"none\": %d, "
            "\"unknown\": %d, \"unaligned\": %d, \"comm_extra_gpu_hours\": %.3f, \"comm_unaligned_gpu_hours\": %.3f, "
            "\"comm_factor_mean\": %.4f, "
            "\"run_mean_s\": %.3f, \"jct_mean_s\": %.3f},\n",
            indent, indent, tp->multi, tp->by_align[MODEL_ALIGN_NVLINK], tp->by_align[MODEL_ALIGN_PCIE],
            tp->by_align[MODEL_ALIGN_NUMA], tp->by_align[MODEL_ALIGN_NONE], tp->by_align[MODEL_ALIGN_UNKNOWN],
            tp->unaligned, tp->extra_gpu_hours, tp->unaligned_gpu_hours, tp->factor_mean, tp->run_mean_s, tp->jct_mean_s);
    fprintf(f, "%s  \"series\": {\"t_s\": [", indent);
    for (int i = 0; i < x->nsamples; i++) fprintf(f, "%s%.1f", i ? ", " : "", x->t[i]);
    fprintf(f, "], \"alloc_pct\": [");
    for (int i = 0; i < x->nsamples; i++) fprintf(f, "%s%.2f", i ? ", " : "", x->alloc_pct[i]);
    fprintf(f, "], \"frag_pct\": [");
    for (int i = 0; i < x->nsamples; i++) fprintf(f, "%s%.2f", i ? ", " : "", x->frag_pct[i]);
    fprintf(f, "]}");
    if (x->ntenants) {   /* with quotas (sim/quota.h) */
        fprintf(f, ",\n%s  \"refused\": %d, \"tenants\": [", indent, x->refused);
        for (int k = 0; k < x->ntenants; k++) {
            const sim_tenant_stats *t = &x->tenant[k];
            fprintf(f,
                    "%s\n%s    {\"tenant\": \"%s\", \"namespace\": \"%s\", \"quota_gpu_milli\": %lld, "
                    "\"quota_gpu_memory_mib\": %lld, \"n\": %d, \"placed\": %d, \"refused\": %d, "
                    "\"wait_p50_s\": %.3f, \"wait_p95_s\": %.3f, \"wait_max_s\": %.3f, \"wait_mean_s\": %.3f, "
                    "\"quota_waited\": %d, \"quota_wait_mean_s\": %.3f, \"quota_wait_max_s\": %.3f, "
                    "\"peak_gpu_milli\": %lld, \"peak_gpu_memory_mib\": %lld, \"mean_gpu_milli\": %.1f, "
                    "\"mean_gpu_memory_mib\": %.1f}",
                    k ? "," : "", indent, t->tenant, t->ns, (long long)t->hard_milli, (long long)t->hard_mib, t->n,
                    t->placed, t->refused, t->wait_p50, t->wait_p95, t->wait_max, t->wait_mean, t->quota_waited,
                    t->quota_wait_mean, t->quota_wait_max, (long long)t->peak_milli, (long long)t->peak_mib,
                    t->mean_milli, t->mean_mib);
        }
        fprintf(f, "]");
    }
    fprintf(f, "}");
}

/* The per-tenant table of a replay with quotas: waits, and the namespace's quota and use. */
static void table_tenants(FILE *f, const sim_replay_result *x) {
    fprintf(f, "\n%s: per tenant (quota and use in GPUs = tessera.io/gpu-milli / 1000; %d pods refused over quota)\n",
            x->policy, x->refused);
    fprintf(f, "  %-12s %-12s %11s %5s %6s %5s %25s %18s %17s\n", "tenant", "namespace", "quota GPUs", "n", "placed",
            "refd", "wait p50/p95/max", "quota wait mean/max", "use GPUs mean/peak");
    for (int k = 0; k < x->ntenants; k++) {
        const sim_tenant_stats *t = &x->tenant[k];
        char a[16], b[16], c[16], d[16], e[16], quota[24], waits[48], qw[40], use[40];
        sim_format_seconds(t->wait_p50, a, sizeof a);
        sim_format_seconds(t->wait_p95, b, sizeof b);
        sim_format_seconds(t->wait_max, c, sizeof c);
        sim_format_seconds(t->quota_wait_mean, d, sizeof d);
        sim_format_seconds(t->quota_wait_max, e, sizeof e);
        if (t->hard_milli >= 0) snprintf(quota, sizeof quota, "%.1f", t->hard_milli / 1000.0);
        else snprintf(quota, sizeof quota, "%s", t->hard_mib >= 0 ? "(memory)" : "-");
        if (t->placed) snprintf(waits, sizeof waits, "%s/%s/%s", a, b, c);
        else snprintf(waits, sizeof waits, "-");
        if (t->quota_waited) snprintf(qw, sizeof qw, "%d: %s/%s", t->quota_waited, d, e);
        else snprintf(qw, sizeof qw, "-");
        if (t->hard_milli >= 0 || t->hard_mib >= 0)
            snprintf(use, sizeof use, "%.2f/%.2f", t->mean_milli / 1000.0, t->peak_milli / 1000.0);
        else snprintf(use, sizeof use, "-");
        fprintf(f, "  %-12s %-12s %11s %5d %6d %5d %25s %18s %17s\n", t->tenant, t->ns, quota, t->n, t->placed,
                t->refused, waits, qw, use);
    }
}

/* Multi-GPU pods by the alignment of their GPU set, and what the communication slowdown cost. */
static void table_multi_gpu(FILE *f, const sim_replay_result *r, int n) {
    fprintf(f, "\nmulti-GPU pods by the alignment of their GPUs (unaligned: worse than their node offers; factor and "
               "comm GPU-h, all and of the unaligned: sim/slowdown.h)\n");
    fprintf(f, "%-14s %6s %6s %6s %6s %6s %7s %9s %7s %11s %10s %8s %8s\n", "policy", "multi", "nvlink", "pcie", "numa",
            "none", "unknown", "unaligned", "factor", "comm GPU-h", "unaligned", "run mean", "JCT mean");
    for (int i = 0; i < n; i++) {
        const sim_topo_stats *t = &r[i].topo;
        char run[16], jct[16];
        sim_format_seconds(t->run_mean_s, run, sizeof run);
        sim_format_seconds(t->jct_mean_s, jct, sizeof jct);
        fprintf(f, "%-14s %6d %6d %6d %6d %6d %7d %9d %6.2fx %11.1f %10.1f %8s %8s\n", r[i].policy, t->multi,
                t->by_align[MODEL_ALIGN_NVLINK], t->by_align[MODEL_ALIGN_PCIE], t->by_align[MODEL_ALIGN_NUMA],
                t->by_align[MODEL_ALIGN_NONE], t->by_align[MODEL_ALIGN_UNKNOWN], t->unaligned, t->factor_mean,
                t->extra_gpu_hours, t->unaligned_gpu_hours, run, jct);
    }
}

void sim_report_replay(FILE *f, sim_format fmt, const sim_replay_result *r, int n) {
    if (fmt == SIM_FMT_JSON) {
        fprintf(f, "{\"replays\": [\n");
        for (int i = 0; i < n; i++) {
            json_replay(f, &r[i], "  ");
            fprintf(f, "%s\n", i + 1 < n ? "," : "");
        }
        fprintf(f, "]}\n");
        return;
    }
    if (fmt == SIM_FMT_CSV) {
        fprintf(f, "policy,kind,n,wait_p50_s,wait_p95_s,wait_p99_s,wait_max_s,slowdown_mean,slowdown_p95,"
                   "unschedulable,gpus,alloc_mean_pct,frag_mean_pct,gpu_hours,makespan_s,"
                   "multi_gpu,multi_nvlink,multi_pcie,multi_numa,multi_none,multi_unknown,multi_unaligned,"
                   "comm_factor_mean,comm_extra_gpu_hours,comm_unaligned_gpu_hours,multi_run_mean_s,multi_jct_mean_s\n");
        for (int i = 0; i < n; i++)
            for (int k = 0; k <= SIM_NKINDS; k++) {
                const sim_kind_stats *s = k < SIM_NKINDS ? &r[i].kind[k] : &r[i].all;
                const sim_topo_stats *tp = &r[i].topo;   /* per policy: the same on each of its rows */
                fprintf(f, "%s,%s,%d,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%d,%d,%.3f,%.3f,%.3f,%.3f,%d,%d,%d,%d,%d,%d,%d,%.4f,%.3f,"
                        "%.3f,%.3f,%.3f\n", r[i].policy,
                        k < SIM_NKINDS ? sim_kind_name(k) : "all", s->n, s->wait_p50, s->wait_p95, s->wait_p99,
                        s->wait_max, s->slow_mean, s->slow_p95,
                        k < SIM_NKINDS ? r[i].unschedulable_kind[k] : r[i].unschedulable, r[i].gpus,
                        r[i].alloc_mean_pct, r[i].frag_mean_pct, r[i].gpu_hours, r[i].makespan_s, tp->multi,
                        tp->by_align[MODEL_ALIGN_NVLINK], tp->by_align[MODEL_ALIGN_PCIE], tp->by_align[MODEL_ALIGN_NUMA],
                        tp->by_align[MODEL_ALIGN_NONE], tp->by_align[MODEL_ALIGN_UNKNOWN], tp->unaligned,
                        tp->factor_mean, tp->extra_gpu_hours, tp->unaligned_gpu_hours, tp->run_mean_s, tp->jct_mean_s);
            }
        return;
    }
    fprintf(f, "%-14s %6s %8s %6s %7s %7s %9s", "policy", "GPUs", "placed", "unsch", "alloc%", "frag%", "GPU-h");
    for (int k = 0; k < SIM_NKINDS; k++) fprintf(f, "  %-25s", sim_kind_name(k));
    fprintf(f, "\n%-14s %6s %8s %6s %7s %7s %9s", "", "", "", "", "mean", "mean", "");
    for (int k = 0; k < SIM_NKINDS; k++) fprintf(f, "  %-25s", "wait p50/p95/p99  slow");
    fputc('\n', f);
    for (int i = 0; i < n; i++) {
        const sim_replay_result *x = &r[i];
        char frag[16];
        if (x->frag_mean_pct < 0) snprintf(frag, sizeof frag, "-");
        else snprintf(frag, sizeof frag, "%.1f", x->frag_mean_pct);
        fprintf(f, "%-14s %6d %8d %6d %7.1f %7s %9.0f", x->policy, x->gpus, x->placed, x->unschedulable,
                x->alloc_mean_pct, frag, x->gpu_hours);
        for (int k = 0; k < SIM_NKINDS; k++) {
            const sim_kind_stats *s = &x->kind[k];
            char a[16], b[16], c[16], cell[64];
            sim_format_seconds(s->wait_p50, a, sizeof a);
            sim_format_seconds(s->wait_p95, b, sizeof b);
            sim_format_seconds(s->wait_p99, c, sizeof c);
            if (s->n) snprintf(cell, sizeof cell, "%s/%s/%s %.2fx", a, b, c, s->slow_mean);
            else snprintf(cell, sizeof cell, "-");
            fprintf(f, "  %-25s", cell);
        }
        fputc('\n', f);
    }
    bool multi = false;
    for (int i = 0; i < n; i++) multi |= r[i].topo.multi > 0;
    if (multi) table_multi_gpu(f, r, n);
    for (int i = 0; i < n; i++)
        if (r[i].ntenants) table_tenants(f, &r[i]);
}

int sim_report_replay_svg(const char *path, const char *alloc_path, const sim_replay_result *r, int n, char *err,
                          size_t errlen) {
    const char **cats = malloc((size_t)(n ? n : 1) * sizeof *cats);
    const char *series[SIM_NKINDS];
    double *v = malloc((size_t)(n ? n : 1) * SIM_NKINDS * sizeof *v);
    for (int i = 0; i < n; i++) cats[i] = r[i].policy;
    for (int k = 0; k < SIM_NKINDS; k++) {
        series[k] = sim_kind_name(k);
        for (int i = 0; i < n; i++) v[k * n + i] = r[i].kind[k].wait_p95 / 60.0;
    }
    int rc = sim_svg_bars(path, "p95 wait per kind", "minutes", cats, n, series, SIM_NKINDS, v, err, errlen);
    free(v);
    free(cats);
    if (rc != 0 || !alloc_path) return rc;
    sim_series *s = malloc((size_t)(n ? n : 1) * sizeof *s);
    double **hours = malloc((size_t)(n ? n : 1) * sizeof *hours);
    for (int i = 0; i < n; i++) {
        hours[i] = malloc((size_t)(r[i].nsamples ? r[i].nsamples : 1) * sizeof(double));
        for (int k = 0; k < r[i].nsamples; k++) hours[i][k] = r[i].t[k] / 3600.0;
        s[i] = (sim_series){r[i].policy, hours[i], r[i].alloc_pct, r[i].nsamples};
    }
    rc = sim_svg_lines(alloc_path, "GPU allocation over time", "hours", "allocated GPU %", s, n, false, err, errlen);
    for (int i = 0; i < n; i++) free(hours[i]);
    free(hours);
    free(s);
    return rc;
}

static void group_cell(const sim_group *g, char *buf, size_t len) {
    char sh[128];
    sim_sharing_format(&g->sharing, sh, sizeof sh);
    if (g->count == 0) snprintf(buf, len, "0");
    else snprintf(buf, len, "%d x %s", g->count, sh);
}

void sim_report_plan(FILE *f, sim_format fmt, const sim_plan_result *p, int n) {
    if (n == 0) return;
    const sim_cluster *c0 = p[0].cluster;
    if (fmt == SIM_FMT_JSON) {
        fprintf(f, "{\"plans\": [\n");
        for (int i = 0; i < n; i++) {
            fprintf(f, "  {\"policy\": \"%s\", \"met\": %s, \"gpus\": %d, \"evaluations\": %d, \"groups\": [",
                    p[i].policy, p[i].met ? "true" : "false", sim_cluster_gpus(p[i].cluster), p[i].evaluations);
            for (int g = 0; g < p[i].cluster->ngroups; g++) {
                char sh[128];
                sim_sharing_format(&p[i].cluster->groups[g].sharing, sh, sizeof sh);
                fprintf(f, "%s{\"name\": \"%s\", \"count\": %d, \"sharing\": \"%s\"}", g ? ", " : "",
                        p[i].cluster->groups[g].name, p[i].cluster->groups[g].count, sh);
            }
            fprintf(f, "], \"measured\": {");
            for (int t = 0; t < p[i].ntargets; t++) fprintf(f, "%s\"%s\": %.4f", t ? ", " : "", p[i].target[t], p[i].measured[t]);
            fprintf(f, "}");
            if (p[i].nopt > 0) {   /* the sharing options compared on the shared groups */
                fprintf(f, ", \"sharingComparison\": {");
                for (int k = 0; k < p[i].nopt; k++)
                    fprintf(f, "%s\"%s\": %d", k ? ", " : "", p[i].opt[k], p[i].opt_gpus[k]);
                fprintf(f, "}");
            }
            fprintf(f, ",\n   \"replay\": ");
            json_replay(f, &p[i].replay, "   ");
            fprintf(f, "}%s\n", i + 1 < n ? "," : "");
        }
        fprintf(f, "]}\n");
        return;
    }
    if (fmt == SIM_FMT_CSV) {
        fprintf(f, "policy,met,gpus");
        for (int g = 0; g < c0->ngroups; g++) fprintf(f, ",%s_count,%s_sharing", c0->groups[g].name, c0->groups[g].name);
        for (int t = 0; t < p[0].ntargets; t++) fprintf(f, ",measured_%d", t + 1);
        fputc('\n', f);
        for (int i = 0; i < n; i++) {
            fprintf(f, "%s,%s,%d", p[i].policy, p[i].met ? "yes" : "no", sim_cluster_gpus(p[i].cluster));
            for (int g = 0; g < p[i].cluster->ngroups; g++) {
                char sh[128];
                sim_sharing_format(&p[i].cluster->groups[g].sharing, sh, sizeof sh);
                fprintf(f, ",%d,%s", p[i].cluster->groups[g].count, sh);
            }
            for (int t = 0; t < p[i].ntargets; t++) fprintf(f, ",%.4f", p[i].measured[t]);
            fputc('\n', f);
        }
        return;
    }
    fprintf(f, "%-14s %-4s %5s", "policy", "met", "GPUs");
    for (int g = 0; g < c0->ngroups; g++) fprintf(f, "  %-22s", c0->groups[g].name);
    for (int t = 0; t < p[0].ntargets; t++) fprintf(f, "  %s", p[0].target[t]);
    fputc('\n', f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%-14s %-4s %5d", p[i].policy, p[i].met ? "yes" : "NO", sim_cluster_gpus(p[i].cluster));
        for (int g = 0; g < p[i].cluster->ngroups; g++) {
            char cell[160];
            group_cell(&p[i].cluster->groups[g], cell, sizeof cell);
            fprintf(f, "  %-22s", cell);
        }
        for (int t = 0; t < p[i].ntargets; t++) {
            char v[32];
            if (p[i].target[t][0] == 'w') sim_format_seconds(p[i].measured[t], v, sizeof v);
            else snprintf(v, sizeof v, "%g", p[i].measured[t]);
            fprintf(f, "  %-*s", (int)strlen(p[i].target[t]), v);
        }
        fputc('\n', f);
    }
    for (int i = 0; i < n; i++)
        if (p[i].replay.ntenants) table_tenants(f, &p[i].replay);
    if (p[0].nopt == 0) return;
    /* Each option on every shared group (the others as given), smallest cluster meeting the
     * targets; then whether layering beats MIG alone and time-slicing alone. */
    fprintf(f, "\nsharing options on the shared groups (GPUs of the smallest cluster meeting the targets; "
               "\"never\": not even at the largest size tried):\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "  %-12s", p[i].policy);
        for (int k = 0; k < p[i].nopt; k++) {
            if (p[i].opt_gpus[k] >= 0) fprintf(f, "  %s %d", p[i].opt[k], p[i].opt_gpus[k]);
            else fprintf(f, "  %s %s", p[i].opt[k], p[i].opt_gpus[k] == -1 ? "never" : "n/a");
        }
        fputc('\n', f);
        int sts, smps;
        sim_plan_soft(&p[i], &sts, &smps);
        if (sts >= 0 && smps >= 0) {
            int M = p[i].opt_gpus[smps], T = p[i].opt_gpus[sts];
            if (M >= 0 && T >= 0)
                fprintf(f, "  %-12s  MPS shares (%s) need %d GPUs, %s time-sliced shares (soft:timeslice, %d)\n", "",
                        p[i].opt[smps], M, M < T ? "fewer than" : M == T ? "as many as" : "more than", T);
            else if (M >= 0 || T >= 0)
                fprintf(f, "  %-12s  %s meet the targets (%d GPUs), %s never do\n", "",
                        M >= 0 ? "MPS shares" : "time-sliced shares", M >= 0 ? M : T,
                        M >= 0 ? "time-sliced shares" : "MPS shares");
            else
                fprintf(f, "  %-12s  neither MPS nor time-sliced shares meet the targets\n", "");
        }
        int lay, mig, ts;
        sim_plan_layering(&p[i], &lay, &mig, &ts);
        if (lay < 0) continue;
        int L = p[i].opt_gpus[lay];
        bool beats_mig = mig >= 0 && L < p[i].opt_gpus[mig], beats_ts = ts >= 0 && L < p[i].opt_gpus[ts];
        char m[96] = "", t[96] = "";
        if (mig >= 0) snprintf(m, sizeof m, "MIG alone (%s, %d)", p[i].opt[mig], p[i].opt_gpus[mig]);
        if (ts >= 0) snprintf(t, sizeof t, "time-slicing alone (%s, %d)", p[i].opt[ts], p[i].opt_gpus[ts]);
        if (beats_mig || beats_ts)
            fprintf(f, "  %-12s  layering (%s) needs %d GPUs, fewer than %s%s%s\n", "", p[i].opt[lay], L,
                    beats_mig ? m : t, beats_mig && beats_ts ? " and " : "", beats_mig && beats_ts ? t : "");
        else
            fprintf(f, "  %-12s  layering (%s) needs %d GPUs, no fewer than %s%s%s\n", "", p[i].opt[lay], L,
                    m[0] ? m : t, m[0] && t[0] ? " or " : "", m[0] && t[0] ? t : "");
    }
}

int sim_report_plan_svg(const char *path, const sim_plan_result *p, int n, char *err, size_t errlen) {
    if (n == 0) {
        snprintf(err, errlen, "no plan to chart");
        return -1;
    }
    int ng = p[0].cluster->ngroups;
    const char **cats = malloc((size_t)n * sizeof *cats), **series = malloc((size_t)ng * sizeof *series);
    double *v = malloc((size_t)n * (size_t)ng * sizeof *v);
    for (int i = 0; i < n; i++) cats[i] = p[i].policy;
    for (int g = 0; g < ng; g++) {
        series[g] = p[0].cluster->groups[g].name;
        for (int i = 0; i < n; i++)
            v[g * n + i] = (double)p[i].cluster->groups[g].count * p[i].cluster->groups[g].gpus_per_node;
    }
    int rc = sim_svg_bars(path, "GPUs needed per node group", "GPUs", cats, n, series, ng, v, err, errlen);
    free(v);
    free(cats);
    free(series);
    return rc;
}
