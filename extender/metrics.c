/* metrics.c -- Prometheus text format 0.0.4. Histograms are kept as plain atomic buckets
 * so the hot path never takes a lock; gauges are computed from the cache under its lock
 * at scrape time, which keeps them exact rather than sampled.
 */
#include "extender/metrics.h"
#include "extender/quota.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extender/base/events.h"
#include "extender/base/health.h"
#include "extender/delivery/reservation.h"
#include "extender/mirror/holdings.h"
#include "extender/mirror/state.h"
#include "extender/webhook.h"
#include "extender/workload.h"
#include "kube/strbuf.h"
#include "model/mig.h"

static const double bounds[EXT_METRICS_NBUCKETS] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                    0.025,  0.05,    0.1,    0.25,  0.5,    1,     5};

const char *ext_verb_name(ext_verb v) {
    static const char *n[] = {"filter", "prioritize", "bind", "preempt"};
    return v >= 0 && v < EXT_VERB_N ? n[v] : "?";
}

void ext_metrics_observe(ext_metrics *m, ext_verb v, uint64_t ns, int status) {
    if (v < 0 || v >= EXT_VERB_N) return;
    double s = (double)ns / 1e9;
    for (int b = 0; b < EXT_METRICS_NBUCKETS; b++)
        if (s <= bounds[b]) { atomic_fetch_add(&m->bucket[v][b], 1); break; }
    atomic_fetch_add(&m->count[v], 1);
    atomic_fetch_add(&m->sum_ns[v], ns);
    int cls = status / 100;
    atomic_fetch_add(&m->status[v][cls >= 1 && cls <= 5 ? cls : 0], 1);
}

/* The scrape is written into a kube_strbuf (kube/strbuf.h); sbf is its printf under a short name, as the metrics'
 * help texts are long. */
typedef kube_strbuf sb;

static void sbf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sbf(sb *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kube_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

/* The node agent's holdings record set against the model (mirror/holdings.h). Lock held. */
static void holdings_metrics(sb *b, ext_state *st) {
    const ext_holdings_stats *hs = ext_state_holdings_stats(st);
    int nodes = 0, standing = 0;
    for (int i = 0; i < ext_state_node_count(st); i++) {
        const ext_node *en = ext_state_node_at(st, i);
        if (!en->holdings) continue;
        nodes++;
        standing += ext_holdings_disagreements(en->holdings);
    }
    sbf(b, "# HELP tessera_holdings_nodes Nodes with a holdings record (the node agent's tessera.io/holdings).\n"
           "# TYPE tessera_holdings_nodes gauge\ntessera_holdings_nodes %d\n", nodes);
    sbf(b, "# HELP tessera_holdings_mismatches_total Disagreements between the model and what the kubelet says a pod "
           "holds, each once, by outcome: applied (the model followed the kubelet), refused (the kubelet's word would "
           "over-commit or names a GPU the model does not have), reservation (a reservation pod holds another device "
           "than it published).\n# TYPE tessera_holdings_mismatches_total counter\n");
    for (int k = 0; k < EXT_HOLD_NKINDS; k++)
        sbf(b, "tessera_holdings_mismatches_total{kind=\"%s\"} %llu\n", ext_hold_kind_name(k),
            (unsigned long long)hs->mismatches[k]);
    sbf(b, "# HELP tessera_holdings_disagreements Disagreements with the kubelet standing now (refused and reservation "
           "ones; /debug/state lists them).\n# TYPE tessera_holdings_disagreements gauge\n"
           "tessera_holdings_disagreements %d\n", standing);
    sbf(b, "# HELP tessera_holdings_ignored_total Holdings record entries not compared, each once: unmapped (MIG "
           "instance ids, nodes without GPU UUIDs), unknown-pod (no such pod on the node in the cache).\n"
           "# TYPE tessera_holdings_ignored_total counter\n");
    for (int w = 0; w < EXT_HOLD_IGN_N; w++)
        sbf(b, "tessera_holdings_ignored_total{why=\"%s\"} %llu\n", ext_hold_ignored_name(w),
            (unsigned long long)hs->ignored[w]);
    sbf(b, "# HELP tessera_holdings_records_malformed_total Holdings records that could not be read (once per node and "
           "content; ignored).\n# TYPE tessera_holdings_records_malformed_total counter\n"
           "tessera_holdings_records_malformed_total %llu\n", (unsigned long long)hs->malformed);
}

/* Memory slices a MIG GPU has not handed to a pod: idle instances, plus the unpartitioned
 * slices when instances can be created on demand. */
static void mig_slices(const model_gpu *g, int *held, int *free_) {
    int h = 0, idle = 0;
    for (int k = 0; k < g->ninst; k++) {
        int sz = g->product->profiles[g->inst[k].profile].memory_slices;
        if (g->inst[k].holder >= 0 || g->inst[k].rep_used) h += sz;   /* a shared instance: any replica taken */
        else idle += sz;
    }
    *held = h;
    *free_ = g->mig_dynamic ? g->product->mig_memory_slices - h : idle;
    if (*free_ < 0) *free_ = 0;
}

/* How many more instances of profile k the GPU could give pods: its idle instances of
 * that profile, and on a dynamic-MIG GPU as many as can still be created around the held
 * ones (leftmost legal slot first). */
static int mig_free_instances(const model_gpu *g, int k) {
    int idle = 0;
    model_mig_layout l = {0};
    for (int i = 0; i < g->ninst; i++) {
        bool held = g->inst[i].holder >= 0 || g->inst[i].rep_used;
        if (!held && g->inst[i].profile == k) idle++;
        if (held && l.n < MODEL_MIG_MAX_INSTANCES)
            l.inst[l.n++] = (model_mig_placement){(int8_t)g->inst[i].profile, (int8_t)g->inst[i].start};
    }
    if (!g->mig_dynamic) return idle;
    int more = 0;
    while (l.n < MODEL_MIG_MAX_INSTANCES) {
        uint8_t starts = model_mig_free_starts(g->product, &l, k);
        if (!starts) break;
        l.inst[l.n++] = (model_mig_placement){(int8_t)k, (int8_t)__builtin_ctz(starts)};
        more++;
    }
    return more;
}

/* One gauge per GPU of every node. which: what to read; scale turns model units into the
 * metric's base unit (MiB -> bytes, permille -> ratio). */
enum { G_MEM_USED, G_MEM_FREE, G_COMP_USED, G_COMP_FREE, G_REP_USED, G_REP_FREE, G_MIG_USED, G_MIG_FREE };

/* Replicas taken and free over the shared instances of a MIG GPU (layered sharing). */
static void layered_replicas(const model_gpu *g, int *used, int *free_) {
    *used = *free_ = 0;
    for (int k = 0; k < g->ninst; k++) {
        const model_mig_instance *in = &g->inst[k];
        if (in->replicas < 2) continue;
        int u = __builtin_popcount(in->rep_used);
        *used += u;
        *free_ += in->replicas - u;
    }
}

static void gpu_gauges(sb *b, const char *metric, const char *help, int which, double scale, ext_state *st) {
    sbf(b, "# HELP %s %s\n# TYPE %s gauge\n", metric, help, metric);
    for (int i = 0; i < ext_state_node_count(st); i++) {
        const ext_node *en = ext_state_node_at(st, i);
        if (!en->m) continue;
        for (int gi = 0; gi < en->m->ngpus; gi++) {
            const model_gpu *g = &en->m->gpus[gi];
            bool shared = g->mode == MODEL_GPU_TIMESLICE || g->mode == MODEL_GPU_MPS;
            long val;
            int h, f;
            switch (which) {
            case G_MEM_USED: val = g->memory_used_mib; break;
            case G_MEM_FREE: val = model_gpu_free_memory(g); break;
            case G_COMP_USED: val = g->compute_used_permille; break;
            case G_COMP_FREE: val = model_gpu_free_compute(g); break;
            case G_REP_USED:
            case G_REP_FREE:
                if (shared) {
                    val = which == G_REP_USED ? g->replicas_used : model_gpu_free_replicas(g);
                } else if (g->mode == MODEL_GPU_MIG && model_gpu_mig_layered(g)) {
                    layered_replicas(g, &h, &f);   /* replicas of time-sliced MIG instances */
                    val = which == G_REP_USED ? h : f;
                } else {
                    continue;
                }
                break;
            case G_MIG_USED: if (g->mode != MODEL_GPU_MIG) continue; mig_slices(g, &h, &f); val = h; break;
            default: if (g->mode != MODEL_GPU_MIG) continue; mig_slices(g, &h, &f); val = f; break;
            }
            sbf(b, "%s{node=\"%s\",gpu=\"%d\",mode=\"%s\"} %.15g\n", metric, en->name, g->index,
                model_gpu_mode_name(g->mode), (double)val * scale);
        }
    }
}

/* Cluster-wide: MIG instances per profile, idle GPUs, fragmentation. Lock held. */
static void cluster_gauges(sb *b, ext_verbs *v, ext_state *st) {
    sbf(b, "# HELP tessera_mig_instances_free MIG instances of each profile the GPU can still give pods.\n"
           "# TYPE tessera_mig_instances_free gauge\n");
    int n = ext_state_node_count(st), nm = 0, idle = 0;
    model_node **nodes = calloc((size_t)n + 1, sizeof *nodes);
    for (int i = 0; i < n; i++) {
        const ext_node *en = ext_state_node_at(st, i);
        if (!en->m) continue;
        if (nodes && !en->m->reason[0]) nodes[nm++] = en->m;
        for (int gi = 0; gi < en->m->ngpus; gi++) {
            const model_gpu *g = &en->m->gpus[gi];
            if (!en->m->reason[0] && model_gpu_idle(g)) idle++;
            if (g->mode != MODEL_GPU_MIG) continue;
            for (int k = 0; k < g->product->nprofiles; k++)
                sbf(b, "tessera_mig_instances_free{node=\"%s\",gpu=\"%d\",profile=\"%s\"} %d\n", en->name, g->index,
                    g->product->profiles[k].name, mig_free_instances(g, k));
        }
    }
    sbf(b, "# HELP tessera_cluster_free_gpus GPUs with no grant at all, on nodes that take GPU pods.\n"
           "# TYPE tessera_cluster_free_gpus gauge\ntessera_cluster_free_gpus %d\n", idle);
    /* The FGD measure: the share of free GPU capacity that the target workload's tasks
     * cannot use where it lies (0 = none wasted). */
    policy_workload *own = v->ctx.workload ? NULL : ext_workload_from_state(st, v->fraction_no_mps);
    const policy_workload *w = v->ctx.workload ? v->ctx.workload : own;
    policy_frag_report fr;
    sbf(b, "# HELP tessera_cluster_fragmentation_ratio Free GPU capacity the target workload cannot use, "
           "as a share of all free capacity (FGD).\n# TYPE tessera_cluster_fragmentation_ratio gauge\n"
           "# HELP tessera_cluster_fragmentation_gpus Fragmented GPU capacity in GPUs (FGD).\n"
           "# TYPE tessera_cluster_fragmentation_gpus gauge\n");
    if (w && nodes && policy_frag_cluster(nodes, nm, w, &fr) == 0)
        sbf(b, "tessera_cluster_fragmentation_ratio %.6f\ntessera_cluster_fragmentation_gpus %.3f\n",
            fr.ratio_pct / 100.0, fr.frag_milli / 1000.0);
    policy_workload_free(own);
    free(nodes);
}

char *ext_metrics_render(ext_metrics *m, ext_verbs *v, const kube_stats *ks, size_t *len) {
    sb b = {0};
    kube_strbuf_reserve(&b, 65536);   /* a large cluster's scrape is tens of KiB: no doubling on the way there */
    sbf(&b, "# HELP tessera_request_duration_seconds Time to answer one extender verb.\n"
            "# TYPE tessera_request_duration_seconds histogram\n");
    for (int vb = 0; vb < EXT_VERB_N; vb++) {
        uint64_t cum = 0;
        for (int k = 0; k < EXT_METRICS_NBUCKETS; k++) {
            cum += atomic_load(&m->bucket[vb][k]);
            sbf(&b, "tessera_request_duration_seconds_bucket{verb=\"%s\",le=\"%g\"} %llu\n", ext_verb_name(vb),
                bounds[k], (unsigned long long)cum);
        }
        uint64_t cnt = atomic_load(&m->count[vb]);
        sbf(&b, "tessera_request_duration_seconds_bucket{verb=\"%s\",le=\"+Inf\"} %llu\n", ext_verb_name(vb),
            (unsigned long long)cnt);
        sbf(&b, "tessera_request_duration_seconds_sum{verb=\"%s\"} %.9f\n", ext_verb_name(vb),
            (double)atomic_load(&m->sum_ns[vb]) / 1e9);
        sbf(&b, "tessera_request_duration_seconds_count{verb=\"%s\"} %llu\n", ext_verb_name(vb), (unsigned long long)cnt);
    }
    sbf(&b, "# HELP tessera_requests_total Verb calls by HTTP status class.\n# TYPE tessera_requests_total counter\n");
    for (int vb = 0; vb < EXT_VERB_N; vb++)
        for (int c = 1; c <= 5; c++)
            sbf(&b, "tessera_requests_total{verb=\"%s\",code=\"%dxx\"} %llu\n", ext_verb_name(vb), c,
                (unsigned long long)atomic_load(&m->status[vb][c]));
    static const int rej[3] = {404, 405, 413};
    sbf(&b, "# HELP tessera_http_rejected_total Requests refused before reaching a verb.\n"
            "# TYPE tessera_http_rejected_total counter\n");
    for (int k = 0; k < 3; k++)
        sbf(&b, "tessera_http_rejected_total{code=\"%d\"} %llu\n", rej[k], (unsigned long long)atomic_load(&m->http_rejected[k]));
    static const char *const shed[3] = {"connections", "binds", "memory"};   /* http.c's EXT_HTTP_SHED_* */
    sbf(&b, "# HELP tessera_http_overload_total Requests answered 503 with Retry-After because a limit was reached.\n"
            "# TYPE tessera_http_overload_total counter\n");
    for (int k = 0; k < 3; k++)
        sbf(&b, "tessera_http_overload_total{limit=\"%s\"} %llu\n", shed[k], (unsigned long long)atomic_load(&m->http_shed[k]));
    sbf(&b, "# HELP tessera_http_connections Client connections open now.\n# TYPE tessera_http_connections gauge\n"
            "tessera_http_connections %lld\n", (long long)atomic_load(&m->http_connections));
    sbf(&b, "# HELP tessera_binds_total Bind calls by result.\n# TYPE tessera_binds_total counter\n");
    for (int o = 0; o < EXT_BIND_NOUTCOMES; o++)
        sbf(&b, "tessera_binds_total{result=\"%s\"} %llu\n", ext_bind_outcome_name(o),
            (unsigned long long)atomic_load(&v->bind_outcomes[o]));
    ext_events_stats es;
    ext_events_get_stats(&es);   /* process-wide: there is one Events queue (cluster mode), or none */
    sbf(&b, "# HELP tessera_events_total Kubernetes Events about bind decisions, by result: posted, failed "
            "(the post and its one retry), dropped (queue full or left at shutdown).\n"
            "# TYPE tessera_events_total counter\n"
            "tessera_events_total{result=\"posted\"} %llu\ntessera_events_total{result=\"failed\"} %llu\n"
            "tessera_events_total{result=\"dropped\"} %llu\n",
        (unsigned long long)es.posted, (unsigned long long)es.failed, (unsigned long long)es.dropped);
    sbf(&b, "# HELP tessera_node_answers_total Per-node filter and prioritize answers: reused from the answer "
            "cache (the node and the request shape unchanged) or computed.\n# TYPE tessera_node_answers_total counter\n");
    sbf(&b, "tessera_node_answers_total{source=\"cache\"} %llu\n", (unsigned long long)atomic_load(&v->cache_hits));
    sbf(&b, "tessera_node_answers_total{source=\"computed\"} %llu\n", (unsigned long long)atomic_load(&v->cache_misses));
    if (ks) {
        static const char *kinds[2] = {"node", "pod"};
        sbf(&b, "# HELP tessera_watch_lists_total Completed lists.\n# TYPE tessera_watch_lists_total counter\n");
        for (int k = 0; k < 2; k++) sbf(&b, "tessera_watch_lists_total{kind=\"%s\"} %llu\n", kinds[k], (unsigned long long)ks->lists[k]);
        sbf(&b, "# HELP tessera_watch_restarts_total Watches that ended and were reopened.\n# TYPE tessera_watch_restarts_total counter\n");
        for (int k = 0; k < 2; k++) sbf(&b, "tessera_watch_restarts_total{kind=\"%s\"} %llu\n", kinds[k], (unsigned long long)ks->watch_restarts[k]);
        sbf(&b, "# HELP tessera_watch_gone_total 410 Gone answers (each forces a relist).\n# TYPE tessera_watch_gone_total counter\n");
        for (int k = 0; k < 2; k++) sbf(&b, "tessera_watch_gone_total{kind=\"%s\"} %llu\n", kinds[k], (unsigned long long)ks->gone[k]);
        sbf(&b, "# HELP tessera_watch_errors_total Failed API requests.\n# TYPE tessera_watch_errors_total counter\n");
        for (int k = 0; k < 2; k++) sbf(&b, "tessera_watch_errors_total{kind=\"%s\"} %llu\n", kinds[k], (unsigned long long)ks->errors[k]);
        sbf(&b, "# HELP tessera_cache_synced Whether the latest list of this kind completed.\n# TYPE tessera_cache_synced gauge\n");
        for (int k = 0; k < 2; k++) sbf(&b, "tessera_cache_synced{kind=\"%s\"} %d\n", kinds[k], ks->synced[k] ? 1 : 0);
    }
    /* health.h: the dependencies this process uses, and every failed attempt by reason */
    ext_dep_status ds[EXT_DEP_N];
    ext_health_snapshot(ds);
    sbf(&b, "# HELP tessera_dependency_ok Whether a dependency of tessera works (0: failing, see /readyz and the "
            "event=dependency-failing log line).\n# TYPE tessera_dependency_ok gauge\n");
    for (int d = 0; d < EXT_DEP_N; d++)
        if (ds[d].registered) sbf(&b, "tessera_dependency_ok{dependency=\"%s\"} %d\n", ext_dep_name(d), ds[d].failing ? 0 : 1);
    sbf(&b, "# HELP tessera_dependency_failures_total Failed attempts to use a dependency, by reason.\n"
            "# TYPE tessera_dependency_failures_total counter\n");
    for (int d = 0; d < EXT_DEP_N; d++)
        for (int r = 0; r < EXT_REASON_N; r++)
            if (ds[d].failures[r])
                sbf(&b, "tessera_dependency_failures_total{dependency=\"%s\",reason=\"%s\"} %llu\n", ext_dep_name(d),
                    ext_dep_reason_name(r), (unsigned long long)ds[d].failures[r]);
    ext_leader_stats ls;
    ext_leader_get_stats(v->leader, &ls);   /* no election: this replica binds, so it counts as leader */
    sbf(&b, "# HELP tessera_leader Whether this replica holds the tessera Lease and may bind.\n"
            "# TYPE tessera_leader gauge\ntessera_leader %d\n", ls.leader ? 1 : 0);
    sbf(&b, "# HELP tessera_leader_transitions_total Times this replica became the leader.\n"
            "# TYPE tessera_leader_transitions_total counter\ntessera_leader_transitions_total %llu\n",
        (unsigned long long)ls.transitions);
    sbf(&b, "# HELP tessera_leader_lease_errors_total Failed Lease calls by reason.\n"
            "# TYPE tessera_leader_lease_errors_total counter\n");
    for (int e = 0; e < EXT_LEASE_ERR_N; e++)
        sbf(&b, "tessera_leader_lease_errors_total{reason=\"%s\"} %llu\n", ext_lease_error_name(e),
            (unsigned long long)ls.errors[e]);
    if (v->rsv) {   /* the reservation controller runs (cluster mode, --soft-share-delivery=reservation) */
        ext_rsv_stats rs;
        ext_rsv_get_stats(v->rsv, &rs);
        sbf(&b, "# HELP tessera_reservations Reservation pods by state (pending, ready, refused, releasing).\n"
                "# TYPE tessera_reservations gauge\n");
        for (int k = 0; k < EXT_RSV_NSTATES; k++)
            sbf(&b, "tessera_reservations{state=\"%s\"} %d\n", ext_rsv_state_name(k), rs.reservations[k]);
        sbf(&b, "# HELP tessera_reservation_ops_total API writes of the reservation controller by op and result.\n"
                "# TYPE tessera_reservation_ops_total counter\n");
        for (int o = 0; o < EXT_RSV_NOPS; o++)
            for (int k = 0; k < 2; k++)
                sbf(&b, "tessera_reservation_ops_total{op=\"%s\",result=\"%s\"} %llu\n", ext_rsv_op_name(o),
                    k ? "error" : "ok", (unsigned long long)rs.ops[o][k]);
    }
    uint64_t decl[EXT_DECL_N];
    ext_webhook_declarations(decl);
    sbf(&b, "# HELP tessera_webhook_declarations_total GPU pods the admission webhook sized (README, Quotas), by the "
            "rule it used: cluster (the GPUs the synced mirror holds) or catalog, and why.\n"
            "# TYPE tessera_webhook_declarations_total counter\n");
    for (int r = 0; r < EXT_DECL_N; r++)
        sbf(&b, "tessera_webhook_declarations_total{rule=\"%s\",why=\"%s\"} %llu\n", ext_webhook_rule_name(r),
            ext_webhook_rule_why(r), (unsigned long long)decl[r]);
    ext_state *st = v->st;
    sbf(&b, "# HELP tessera_ready Whether the cache has completed its first sync.\n# TYPE tessera_ready gauge\n"
            "tessera_ready %d\n", ext_state_ready(st) ? 1 : 0);
    ext_state_lock(st);
    ext_state_stats s;
    ext_state_get_stats(st, &s);
    sbf(&b, "# HELP tessera_nodes Nodes in the cache (with a Node object).\n# TYPE tessera_nodes gauge\n"
            "tessera_nodes{usable=\"true\"} %d\ntessera_nodes{usable=\"false\"} %d\n",
        s.nodes - s.nodes_unusable, s.nodes_unusable);
    sbf(&b, "# HELP tessera_pods GPU pods in the cache by phase.\n# TYPE tessera_pods gauge\n"
            "tessera_pods{phase=\"pending\"} %d\ntessera_pods{phase=\"binding\"} %d\n"
            "tessera_pods{phase=\"assumed\"} %d\ntessera_pods{phase=\"bound\"} %d\n",
        s.pending, s.binding, s.assumed, s.bound);
    sbf(&b, "# HELP tessera_pods_overcommitted Pods on a node whose GPUs do not fit there.\n"
            "# TYPE tessera_pods_overcommitted gauge\ntessera_pods_overcommitted %d\n", s.overcommitted);
    sbf(&b, "# HELP tessera_assumptions_expired_total Binds never confirmed by the watch.\n"
            "# TYPE tessera_assumptions_expired_total counter\ntessera_assumptions_expired_total %llu\n",
        (unsigned long long)s.expired);
    sbf(&b, "# HELP tessera_cache_relists_total Relists applied to the cache.\n# TYPE tessera_cache_relists_total counter\n"
            "tessera_cache_relists_total{kind=\"node\"} %llu\ntessera_cache_relists_total{kind=\"pod\"} %llu\n",
        (unsigned long long)s.relists[0], (unsigned long long)s.relists[1]);
    sbf(&b, "# HELP tessera_node_overcommitted_pods Over-committed pods per node.\n# TYPE tessera_node_overcommitted_pods gauge\n");
    for (int i = 0; i < ext_state_node_count(st); i++) {
        const ext_node *en = ext_state_node_at(st, i);
        int oc = 0;
        for (int k = 0; k < en->npods; k++) oc += en->pods[k]->overcommitted;
        if (oc) sbf(&b, "tessera_node_overcommitted_pods{node=\"%s\"} %d\n", en->name, oc);
    }
    holdings_metrics(&b, st);
    const double MiB = 1048576.0, permille = 0.001;
    gpu_gauges(&b, "tessera_gpu_memory_allocated_bytes", "GPU memory granted to pods.", G_MEM_USED, MiB, st);
    gpu_gauges(&b, "tessera_gpu_memory_free_bytes", "GPU memory not granted.", G_MEM_FREE, MiB, st);
    gpu_gauges(&b, "tessera_gpu_compute_allocated_ratio", "Share of the GPU's compute (SMs) granted.", G_COMP_USED,
               permille, st);
    gpu_gauges(&b, "tessera_gpu_compute_free_ratio", "Share of the GPU's compute (SMs) not granted.", G_COMP_FREE,
               permille, st);
    gpu_gauges(&b, "tessera_gpu_replicas_allocated", "Time-slice/MPS replicas taken (of the GPU, or of its time-sliced MIG instances).", G_REP_USED, 1, st);
    gpu_gauges(&b, "tessera_gpu_replicas_free", "Time-slice/MPS replicas free (of the GPU, or of its time-sliced MIG instances).", G_REP_FREE, 1, st);
    gpu_gauges(&b, "tessera_gpu_mig_slices_allocated", "MIG memory slices held by pods.", G_MIG_USED, 1, st);
    gpu_gauges(&b, "tessera_gpu_mig_slices_free", "MIG memory slices not held by pods.", G_MIG_FREE, 1, st);
    cluster_gauges(&b, v, st);
    char *q = ext_quota_metrics(st);   /* per-namespace usage in quota units (quota.h) */
    if (q) sbf(&b, "%s", q);
    else b.oom = true;
    free(q);
    ext_state_unlock(st);
    size_t n = b.len;
    char *text = kube_strbuf_finish(&b);
    if (text) *len = n;
    return text;
}
