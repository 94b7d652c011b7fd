/* metrics.c -- Prometheus text format 0.0.4. Histograms are kept as plain atomic buckets
 * so the hot path never takes a lock; gauges are computed from the cache under its lock
 * at scrape time, which keeps them exact rather than sampled.
 */
#include "extender/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extender/state.h"

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

typedef struct sb { char *p; size_t len, cap; bool oom; } sb;

static void sbf(sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sbf(sb *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (w < 0) return;
        if ((size_t)w < b->cap - b->len) { b->len += (size_t)w; return; }
        size_t nc = b->cap * 2 + (size_t)w + 1;
        char *np = realloc(b->p, nc);
        if (!np) { b->oom = true; return; }
        b->p = np;
        b->cap = nc;
    }
}

/* Memory slices a MIG GPU has not handed to a pod: idle instances, plus the unpartitioned
 * slices when instances can be created on demand. */
static void mig_slices(const model_gpu *g, int *held, int *free_) {
    int h = 0, idle = 0;
    for (int k = 0; k < g->ninst; k++) {
        int sz = g->product->profiles[g->inst[k].profile].memory_slices;
        if (g->inst[k].holder >= 0) h += sz;
        else idle += sz;
    }
    *held = h;
    *free_ = g->mig_dynamic ? g->product->mig_memory_slices - h : idle;
    if (*free_ < 0) *free_ = 0;
}

static void gpu_gauges(sb *b, const char *metric, const char *help, int which, ext_state *st) {
    sbf(b, "# HELP %s %s\n# TYPE %s gauge\n", metric, help, metric);
    for (int i = 0; i < ext_state_node_count(st); i++) {
        const ext_node *en = ext_state_node_at(st, i);
        if (!en->m) continue;
        for (int gi = 0; gi < en->m->ngpus; gi++) {
            const model_gpu *g = &en->m->gpus[gi];
            long val;
            int h, f;
            switch (which) {
            case 0: val = g->memory_used_mib; break;
            case 1: val = model_gpu_free_memory(g); break;
            case 2: val = g->compute_used_permille; break;
            case 3: val = model_gpu_free_compute(g); break;
            case 4: if (g->mode != MODEL_GPU_TIMESLICE && g->mode != MODEL_GPU_MPS) continue;
                    val = g->replicas_used; break;
            case 5: if (g->mode != MODEL_GPU_TIMESLICE && g->mode != MODEL_GPU_MPS) continue;
                    val = model_gpu_free_replicas(g); break;
            case 6: if (g->mode != MODEL_GPU_MIG) continue;
                    mig_slices(g, &h, &f); val = h; break;
            default: if (g->mode != MODEL_GPU_MIG) continue;
                    mig_slices(g, &h, &f); val = f; break;
            }
            sbf(b, "%s{node=\"%s\",gpu=\"%d\",mode=\"%s\"} %ld\n", metric, en->name, g->index,
                model_gpu_mode_name(g->mode), val);
        }
    }
}

char *ext_metrics_render(ext_metrics *m, ext_verbs *v, const ext_kube_stats *ks, size_t *len) {
    sb b = {malloc(65536), 0, 65536, false};
    if (!b.p) return NULL;
    b.p[0] = 0;
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
    sbf(&b, "# HELP tessera_bind_total Bind calls by outcome.\n# TYPE tessera_bind_total counter\n");
    for (int o = 0; o < EXT_BIND_NOUTCOMES; o++)
        sbf(&b, "tessera_bind_total{outcome=\"%s\"} %llu\n", ext_bind_outcome_name(o),
            (unsigned long long)atomic_load(&v->bind_outcomes[o]));
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
    gpu_gauges(&b, "tessera_gpu_memory_allocated_mib", "GPU memory granted to pods.", 0, st);
    gpu_gauges(&b, "tessera_gpu_memory_free_mib", "GPU memory not granted.", 1, st);
    gpu_gauges(&b, "tessera_gpu_compute_allocated_permille", "GPU compute granted (1000 = all SMs).", 2, st);
    gpu_gauges(&b, "tessera_gpu_compute_free_permille", "GPU compute not granted (1000 = all SMs).", 3, st);
    gpu_gauges(&b, "tessera_gpu_replicas_allocated", "Time-slice/MPS replicas taken.", 4, st);
    gpu_gauges(&b, "tessera_gpu_replicas_free", "Time-slice/MPS replicas free.", 5, st);
    gpu_gauges(&b, "tessera_gpu_mig_slices_allocated", "MIG memory slices held by pods.", 6, st);
    gpu_gauges(&b, "tessera_gpu_mig_slices_free", "MIG memory slices not held by pods.", 7, st);
    ext_state_unlock(st);
    if (b.oom) { free(b.p); return NULL; }
    *len = b.len;
    return b.p;
}
