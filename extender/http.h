/* http.h -- the extender's HTTP(S) server on libmicrohttpd: routes kube-scheduler's POSTs
 * to the verbs and serves /healthz, /readyz, /metrics and /debug/state. keep-alive; bounded
 * bodies; an idle or slow connection is closed after a timeout.
 *
 * Connections: a pool of threads (8, or 2 per CPU), each polling its share of the connections with poll(),
 * so there is no descriptor ceiling (select() stops at FD_SETSIZE = 1024) and thousands of
 * kept-alive connections cost a little memory each, not a thread each. A bind, which waits
 * on the API server (and on the Lease), runs in a thread of its own while its connection is
 * suspended, so it never holds up the filter and prioritize calls polled by the same thread.
 *
 * Overload degrades into answers, never into dropped connections: a connection opened while
 * max_conns are already open, a bind while max_binds are in flight, and a body that would
 * take the buffered request bodies over max_body_total all get 503 + Retry-After with a JSON
 * Error (the connection is closed after it, which sheds the load): kube-scheduler gets an
 * answer that says why, not an EOF. Probes (/healthz,
 * /readyz, /metrics) are answered even over the cap. Only past max_conns + 1024 (or when the
 * process runs out of descriptors, whose soft limit is raised to the hard one at start) does
 * libmicrohttpd itself close new connections unanswered.
 *
 * Routes (prefix = --url-prefix, default "/tessera"):
 *   POST <prefix>/filter | /prioritize | /bind | /preempt     the verbs (verbs.h)
 *   GET  /healthz        200 "ok" while the process serves
 *   GET  /readyz         200 once the cache is synced and (with cfg.health) no dependency that
 *                        blocks readiness is failing, else 503 naming why
 *   GET  /metrics        Prometheus text
 *   GET  /debug/state    JSON of the cache; ?pod=namespace/name explains one pod
 *   POST /webhook/mutate the mutating admission webhook (webhook.h), when cfg.webhook is set
 * With ops_only (the --metrics-listen server) only the first three GETs are served; with
 * webhook_only (the --webhook-listen TLS server) only POST /webhook/mutate and GET /healthz.
 * Errors are JSON {"Error": "..."}: 404 unknown path, 405 wrong method (with Allow), 413
 * body over the limit, 400 malformed body (from the verbs).
 */
#ifndef EXT_HTTP_H
#define EXT_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include "kube/client.h"
#include "extender/metrics.h"
#include "extender/verbs.h"
#include "extender/webhook.h"

typedef struct ext_http_config {
    char listen[128];            /* "HOST:PORT" or "[v6]:PORT"; port 0 picks a free one */
    char prefix[256];            /* "" or "/tessera" (no trailing '/') */
    size_t max_body;             /* bytes; default 8 MiB */
    int conn_timeout_s;          /* idle/slow connection timeout; default 30 */
    int threads;                 /* polling threads; default: 8, or 2 per CPU when more (at most 32); with
                                  * ops_only or webhook_only one per CPU, 2..8 */
    int max_conns;               /* connections served normally; more get 503 (default 4096) */
    int max_binds;               /* binds in flight (each waits on the API server); default 64 */
    size_t max_body_total;       /* request bodies buffered at once, all connections; default
                                  * 256 MiB or 4 x max_body, whichever is larger */
    const char *tls_cert_file;   /* PEM; with tls_key_file turns HTTPS on */
    const char *tls_key_file;
    const char *tls_client_ca_file;  /* PEM; clients must present a certificate it signed */
    /* PEM text instead of the files (copied at start), so a renewed certificate is served by
     * restarting the server with the new text (the webhook's TLS listener). */
    const char *tls_cert_pem;
    const char *tls_key_pem;
    bool ops_only;               /* serve only GET /healthz, /readyz, /metrics (--metrics-listen) */
    bool webhook_only;           /* serve only POST /webhook/mutate and GET /healthz (--webhook-listen);
                                  * verbs may be NULL */
    const ext_webhook_config *webhook;   /* NULL: no /webhook/mutate */
    ext_metrics *metrics_from;   /* render these verb metrics instead of this server's own
                                  * (the ops server shows the verb server's histograms) */
    ext_verbs *verbs;
    bool health;                 /* /readyz also needs every dependency that blocks readiness to work (health.h;
                                  * cluster mode) and names the failing ones */
    /* Watch statistics for /metrics (cluster mode); NULL in standalone mode. */
    void (*kube_stats)(void *user, kube_stats *out);
    void *kube_user;
} ext_http_config;

typedef struct ext_http ext_http;

ext_http *ext_http_start(const ext_http_config *cfg, char *err, size_t errlen);
int ext_http_port(const ext_http *h);      /* the port actually bound */
ext_metrics *ext_http_metrics(ext_http *h);

/* Overload reasons, the index of ext_metrics.http_shed. */
enum { EXT_HTTP_SHED_CONNS = 0, EXT_HTTP_SHED_BINDS, EXT_HTTP_SHED_MEMORY };
/* Stop accepting, finish in-flight requests, free. */
void ext_http_stop(ext_http *h);

#endif
