/* metrics.h -- the extender's Prometheus exposition: per-verb latency histograms and
 * request counts (recorded lock-free by the HTTP layer), plus gauges read from the cache
 * at scrape time (GPU memory/compute/replicas/MIG slices per node and GPU, pods by phase,
 * over-commits), bind outcomes and the API client's watch counters.
 */
#ifndef EXT_METRICS_H
#define EXT_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/client.h"
#include "extender/verbs.h"

typedef enum ext_verb { EXT_VERB_FILTER = 0, EXT_VERB_PRIORITIZE, EXT_VERB_BIND, EXT_VERB_PREEMPT, EXT_VERB_N } ext_verb;

#define EXT_METRICS_NBUCKETS 14

typedef struct ext_metrics {
    _Atomic uint64_t bucket[EXT_VERB_N][EXT_METRICS_NBUCKETS]; /* cumulative at render time */
    _Atomic uint64_t count[EXT_VERB_N];
    _Atomic uint64_t sum_ns[EXT_VERB_N];
    _Atomic uint64_t status[EXT_VERB_N][6];                     /* by class: 1xx..5xx, index 0 other */
    _Atomic uint64_t http_rejected[3];                          /* 404, 405, 413 outside the verbs */
    /* overload (http.c): 503s by reason (EXT_HTTP_SHED_*) and connections open now */
    _Atomic uint64_t http_shed[3];
    _Atomic int64_t http_connections;
} ext_metrics;

const char *ext_verb_name(ext_verb v);

/* Record one verb call: its wall time and the HTTP status it answered. */
void ext_metrics_observe(ext_metrics *m, ext_verb v, uint64_t ns, int status);

/* The full exposition text (malloc'd, *len set). ks may be NULL (standalone mode). */
char *ext_metrics_render(ext_metrics *m, ext_verbs *v, const kube_stats *ks, size_t *len);

#endif
