/* http.c -- libmicrohttpd glue: accumulate a request body up to the limit, route by path
 * and method, call the verb, answer with its JSON. Everything the network can send that is
 * not a proper call ends as a JSON error reply, never as a crash or a state change.
 */
#include "extender/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "extender/base/health.h"
#include "kube/log.h"
#include "kube/pod.h"

/* Client-certificate verification calls GnuTLS directly (libmicrohttpd only asks the
 * client for a certificate); built when the Makefile links gnutls and defines this. */
#ifdef EXT_HAVE_GNUTLS
#include <gnutls/gnutls.h>
#endif

struct ext_http {
    struct MHD_Daemon *d;
    ext_http_config cfg;
    ext_metrics metrics;
    int port;
    char *tls_cert, *tls_key, *tls_ca;
    _Atomic int conns;            /* connections open now */
    _Atomic int binds;            /* bind threads running */
    _Atomic bool stopping;        /* ext_http_stop began: no new bind threads */
    _Atomic size_t body_bytes;    /* request bodies buffered now, all connections */
};

/* The socket context of a connection opened over max_conns: its requests get 503. */
static char over_cap_tag;

typedef enum route {
    R_NONE = 0, R_FILTER, R_PRIORITIZE, R_BIND, R_PREEMPT, R_WEBHOOK, R_HEALTHZ, R_READYZ, R_METRICS, R_DEBUG
} route;

typedef struct req_ctx {
    route r;
    bool post_route;        /* the route wants POST */
    bool too_big;
    int shed;               /* 1 + EXT_HTTP_SHED_*: answer 503 once the body is read; 0: serve */
    char *buf;
    size_t len, cap;
    struct timespec t0;
    /* a bind runs in its own thread while the connection is suspended */
    ext_http *h;
    struct MHD_Connection *conn;
    _Atomic int bind_state;   /* 0 not started, 1 running, 2 done: rep holds the answer */
    ext_reply rep;
} req_ctx;

static uint64_t elapsed_ns(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (uint64_t)((t1.tv_sec - t0->tv_sec) * 1000000000LL + (t1.tv_nsec - t0->tv_nsec));
}

static route route_of(const ext_http *h, const char *url, bool *post) {
    size_t pl = strlen(h->cfg.prefix);
    *post = true;
    if (h->cfg.webhook && !h->cfg.ops_only && !strcmp(url, EXT_WEBHOOK_PATH)) return R_WEBHOOK;
    if (h->cfg.webhook_only) {
        *post = false;
        return !strcmp(url, "/healthz") ? R_HEALTHZ : R_NONE;
    }
    if (!h->cfg.ops_only && strncmp(url, h->cfg.prefix, pl) == 0) {
        const char *v = url + pl;
        if (!strcmp(v, "/filter")) return R_FILTER;
        if (!strcmp(v, "/prioritize")) return R_PRIORITIZE;
        if (!strcmp(v, "/bind")) return R_BIND;
        if (!strcmp(v, "/preempt")) return R_PREEMPT;
    }
    *post = false;
    if (!strcmp(url, "/healthz")) return R_HEALTHZ;
    if (!strcmp(url, "/readyz")) return R_READYZ;
    if (!strcmp(url, "/metrics")) return R_METRICS;
    if (!strcmp(url, "/debug/state") && !h->cfg.ops_only) return R_DEBUG;
    return R_NONE;
}

static enum MHD_Result send_body(struct MHD_Connection *c, int status, const char *ctype, char *body, size_t len,
                                 const char *allow) {
    bool over = false;   /* a connection over the cap is closed after each answer: that sheds the load */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci && ci->socket_context == &over_cap_tag) over = true;
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body ? body : (char *)"", body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    if (status == 503) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (over) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result send_reply(struct MHD_Connection *c, ext_reply *r, const char *allow) {
    char *b = r->body;
    r->body = NULL;
    return send_body(c, r->status, "application/json", b, r->len, allow);
}

static enum MHD_Result send_error(struct MHD_Connection *c, int status, const char *msg, const char *allow) {
    ext_reply r = {0};
    ext_reply_error(&r, status, msg);
    return send_reply(c, &r, allow);
}

static const char *const shed_msg[3] = {
    "overloaded: too many connections to the tessera extender; retry after the Retry-After delay",
    "overloaded: too many binds are waiting on the API server; retry after the Retry-After delay",
    "overloaded: too many request bodies are buffered; retry after the Retry-After delay",
};

/* Count a request body in or out of the server-wide budget; false (nothing counted) when it would go over. */
static bool body_take(ext_http *h, size_t n) {
    size_t cur = atomic_load(&h->body_bytes);
    do {
        if (cur + n > h->cfg.max_body_total) return false;
    } while (!atomic_compare_exchange_weak(&h->body_bytes, &cur, cur + n));
    return true;
}

static void body_give(ext_http *h, size_t n) { atomic_fetch_sub(&h->body_bytes, n); }

static void count_reject(ext_http *h, int status) {
    int k = status == 404 ? 0 : status == 405 ? 1 : 2;
    atomic_fetch_add(&h->metrics.http_rejected[k], 1);
}

static enum MHD_Result serve_get(ext_http *h, struct MHD_Connection *c, route r) {
    ext_reply rep = {0};
    switch (r) {
    case R_HEALTHZ:
        return send_body(c, 200, "text/plain", strdup("ok\n"), 3, NULL);
    case R_READYZ: {
        /* not ready while the cache is unsynced or a dependency that tessera cannot answer correctly without is
         * failing (health.h): the body says which, with the API's message */
        char why[2048], warn[1024], msg[3200];
        bool synced = ext_state_ready(h->cfg.verbs->st), deps = !h->cfg.health || ext_health_ready(why, sizeof why);
        warn[0] = 0;
        if (h->cfg.health) ext_health_warnings(warn, sizeof warn);
        if (synced && deps) {
            snprintf(msg, sizeof msg, "ready\n%s%s%s", warn[0] ? "degraded: " : "", warn, warn[0] ? "\n" : "");
            return send_body(c, 200, "text/plain", strdup(msg), strlen(msg), NULL);
        }
        snprintf(msg, sizeof msg, "not ready: %s%s%s%s%s", synced ? "" : "the cache has not synced with the API server yet",
                 !synced && !deps ? "; " : "", deps ? "" : why, warn[0] ? "; degraded: " : "", warn);
        return send_error(c, 503, msg, NULL);
    }
    case R_METRICS: {
        kube_stats ks, *ksp = NULL;
        if (h->cfg.kube_stats) {
            memset(&ks, 0, sizeof ks);
            h->cfg.kube_stats(h->cfg.kube_user, &ks);
            ksp = &ks;
        }
        size_t len = 0;
        char *text = ext_metrics_render(h->cfg.metrics_from ? h->cfg.metrics_from : &h->metrics, h->cfg.verbs, ksp, &len);
        if (!text) return send_error(c, 500, "out of memory", NULL);
        return send_body(c, 200, "text/plain; version=0.0.4", text, len, NULL);
    }
    case R_DEBUG: {
        const char *pod = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "pod");
        ext_debug_state(h->cfg.verbs, pod, &rep);
        return send_reply(c, &rep, NULL);
    }
    default:
        return send_error(c, 404, "not found", NULL);
    }
}

/* With --tls-client-ca: whether the client presented a certificate the CA signed. */
static bool client_trusted(ext_http *h, struct MHD_Connection *c) {
    if (!h->tls_ca) return true;
#ifdef EXT_HAVE_GNUTLS
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    gnutls_session_t s = ci ? (gnutls_session_t)ci->tls_session : NULL;
    unsigned n = 0, status = 0;
    if (!s || gnutls_certificate_type_get(s) != GNUTLS_CRT_X509 || !gnutls_certificate_get_peers(s, &n) || n == 0)
        return false;
    return gnutls_certificate_verify_peers2(s, &status) == 0 && status == 0;
#else
    return false;
#endif
}

static void observe(ext_http *h, ext_verb vb, req_ctx *rc, const ext_reply *rep) {
    ext_metrics_observe(&h->metrics, vb, elapsed_ns(&rc->t0), rep->status);
    if (rep->status != 200)
        kube_log(KUBE_LOG_INFO, "http=%s status=%d body=%.300s", ext_verb_name(vb), rep->status, rep->body ? rep->body : "");
}

static void run_bind(req_ctx *rc) {
    ext_verb_bind(rc->h->cfg.verbs, rc->buf ? rc->buf : "", rc->len, &rc->rep);
    observe(rc->h, EXT_VERB_BIND, rc, &rc->rep);
    atomic_store(&rc->bind_state, 2);
}

static void *bind_thread(void *arg) {
    req_ctx *rc = arg;
    ext_http *h = rc->h;
    run_bind(rc);
    /* After the resume the connection's thread answers and frees rc: touch neither again. The count
     * drops last, so ext_http_stop (which waits for it) never stops the daemon under a suspended one. */
    MHD_resume_connection(rc->conn);
    atomic_fetch_sub(&h->binds, 1);
    return NULL;
}

/* A bind waits on the Lease and the API server for up to seconds: it runs in a thread of its own
 * with the connection suspended, and the connection's polling thread goes on serving the others.
 * Called again after the resume, it answers. */
static enum MHD_Result serve_bind(ext_http *h, struct MHD_Connection *c, req_ctx *rc) {
    if (atomic_load(&rc->bind_state) == 2) return send_reply(c, &rc->rep, NULL);
    if (atomic_load(&h->stopping)) return send_error(c, 503, "tessera-extender is shutting down; retry", NULL);
    if (atomic_fetch_add(&h->binds, 1) >= h->cfg.max_binds) {
        atomic_fetch_sub(&h->binds, 1);
        atomic_fetch_add(&h->metrics.http_shed[EXT_HTTP_SHED_BINDS], 1);
        return send_error(c, 503, shed_msg[EXT_HTTP_SHED_BINDS], NULL);
    }
    atomic_store(&rc->bind_state, 1);
    MHD_suspend_connection(c);
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 1u << 20);   /* curl and TLS run on it: room to spare, touched pages only */
    int err = pthread_create(&t, &attr, bind_thread, rc);
    pthread_attr_destroy(&attr);
    if (err != 0) {   /* no thread to be had: bind here (this polling thread waits), then answer */
        kube_log(KUBE_LOG_WARN, "http=bind why=\"cannot start a bind thread (errno %d); binding inline\"", err);
        bind_thread(rc);
    }
    return MHD_YES;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    ext_http *h = cls;
    req_ctx *rc = *con_cls;
    if (!rc) {
        rc = calloc(1, sizeof *rc);
        if (!rc) return MHD_NO;
        clock_gettime(CLOCK_MONOTONIC, &rc->t0);
        rc->r = route_of(h, url, &rc->post_route);
        rc->h = h;
        rc->conn = c;
        *con_cls = rc;
        bool probe = rc->r == R_HEALTHZ || rc->r == R_READYZ || rc->r == R_METRICS;
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        if (!probe && ci && ci->socket_context == &over_cap_tag) {
            /* The body is read (and dropped) before the 503, so the connection closes cleanly:
             * closing a socket with unread data would reset it and could lose the answer. */
            rc->shed = 1 + EXT_HTTP_SHED_CONNS;
            return MHD_YES;
        }
        if (!client_trusted(h, c)) {
            kube_log(KUBE_LOG_WARN, "http=refused why=\"no trusted client certificate\"");
            return send_error(c, 403, "a client certificate signed by the --tls-client-ca CA is required", NULL);
        }
        /* A declared length over the limit is refused before a byte of it is read. */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        unsigned long long declared = cl ? strtoull(cl, NULL, 10) : 0;
        if (declared > 0 && declared <= h->cfg.max_body) {
            if (!body_take(h, (size_t)declared + 1)) {
                rc->shed = 1 + EXT_HTTP_SHED_MEMORY;
                return MHD_YES;
            }
            if ((rc->buf = malloc((size_t)declared + 1)))
                rc->cap = (size_t)declared + 1;   /* one buffer for the whole body: no copying as it grows */
            else
                body_give(h, (size_t)declared + 1);
        }
        if (declared > h->cfg.max_body) {
            rc->too_big = true;
            count_reject(h, 413);
            char msg[128];
            snprintf(msg, sizeof msg, "request body is larger than the limit of %zu bytes", h->cfg.max_body);
            return send_error(c, 413, msg, NULL);
        }
        return MHD_YES;
    }
    if (*upload_size > 0) {
        if (!rc->too_big && !rc->shed) {
            if (rc->len + *upload_size > h->cfg.max_body) {
                rc->too_big = true;
                free(rc->buf);
                body_give(h, rc->cap);
                rc->buf = NULL;
                rc->len = rc->cap = 0;
            } else {
                if (rc->len + *upload_size + 1 > rc->cap) {
                    size_t nc = rc->cap ? rc->cap : 4096;
                    while (nc < rc->len + *upload_size + 1) nc *= 2;
                    if (!body_take(h, nc - rc->cap)) {
                        rc->shed = 1 + EXT_HTTP_SHED_MEMORY;
                        free(rc->buf);
                        body_give(h, rc->cap);
                        rc->buf = NULL;
                        rc->len = rc->cap = 0;
                        *upload_size = 0;
                        return MHD_YES;
                    }
                    char *nb = realloc(rc->buf, nc);
                    if (!nb) {
                        body_give(h, nc - rc->cap);
                        return MHD_NO;
                    }
                    rc->buf = nb;
                    rc->cap = nc;
                }
                memcpy(rc->buf + rc->len, upload, *upload_size);
                rc->len += *upload_size;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    /* The whole request is in. */
    if (rc->shed) {
        atomic_fetch_add(&h->metrics.http_shed[rc->shed - 1], 1);
        return send_error(c, 503, shed_msg[rc->shed - 1], NULL);
    }
    bool is_post = !strcmp(method, MHD_HTTP_METHOD_POST);
    bool is_get = !strcmp(method, MHD_HTTP_METHOD_GET) || !strcmp(method, MHD_HTTP_METHOD_HEAD);
    if (rc->r == R_NONE) {
        count_reject(h, 404);
        char msg[600];
        if (h->cfg.webhook_only)
            snprintf(msg, sizeof msg, "no such endpoint: %.200s (this listener serves POST " EXT_WEBHOOK_PATH
                     " and GET /healthz)", url);
        else
            snprintf(msg, sizeof msg, "no such endpoint: %.200s (verbs are under %s/)", url, h->cfg.prefix[0] ? h->cfg.prefix : "");
        return send_error(c, 404, msg, NULL);
    }
    if (rc->post_route ? !is_post : !is_get) {
        count_reject(h, 405);
        char msg[128];
        snprintf(msg, sizeof msg, "method %.20s not allowed here; use %s", method, rc->post_route ? "POST" : "GET");
        return send_error(c, 405, msg, rc->post_route ? "POST" : "GET, HEAD");
    }
    if (rc->too_big) {
        count_reject(h, 413);
        char msg[128];
        snprintf(msg, sizeof msg, "request body is larger than the limit of %zu bytes", h->cfg.max_body);
        return send_error(c, 413, msg, NULL);
    }
    if (!rc->post_route) return serve_get(h, c, rc->r);
    ext_reply rep = {0};
    const char *body = rc->buf ? rc->buf : "";
    if (rc->r == R_WEBHOOK) {
        ext_webhook_mutate(h->cfg.webhook, body, rc->len, &rep);
        if (rep.status != 200)
            kube_log(KUBE_LOG_INFO, "http=webhook status=%d body=%.300s", rep.status, rep.body ? rep.body : "");
        else if (rep.body && strstr(rep.body, "\"allowed\":false"))
            kube_log(KUBE_LOG_INFO, "http=webhook refused=%.400s", rep.body);
        return send_reply(c, &rep, NULL);
    }
    if (rc->r == R_BIND) return serve_bind(h, c, rc);
    ext_verb vb;
    switch (rc->r) {
    case R_FILTER: vb = EXT_VERB_FILTER; ext_verb_filter(h->cfg.verbs, body, rc->len, &rep); break;
    case R_PRIORITIZE: vb = EXT_VERB_PRIORITIZE; ext_verb_prioritize(h->cfg.verbs, body, rc->len, &rep); break;
    default: vb = EXT_VERB_PREEMPT; ext_verb_preempt(h->cfg.verbs, body, rc->len, &rep); break;
    }
    observe(h, vb, rc, &rep);
    return send_reply(c, &rep, NULL);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    req_ctx *rc = *con_cls;
    if (!rc) return;
    if (toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED)
        kube_log(KUBE_LOG_WARN, "http=timeout route=%d received=%zu", (int)rc->r, rc->len);
    body_give(rc->h, rc->cap);
    free(rc->buf);
    ext_reply_free(&rc->rep);
    free(rc);
    *con_cls = NULL;
}

/* Counts connections and marks those opened over the cap (their requests get 503, see handler). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    ext_http *h = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        int n = atomic_fetch_add(&h->conns, 1) + 1;
        *socket_context = n > h->cfg.max_conns ? &over_cap_tag : NULL;
        atomic_fetch_add(&h->metrics.http_connections, 1);
    } else {
        atomic_fetch_sub(&h->conns, 1);
        atomic_fetch_sub(&h->metrics.http_connections, 1);
    }
}

/* The server is built for thousands of connections: raise the soft descriptor limit to the hard
 * one (the usual soft default of 1024 would stop it first). Returns the limit now in force. */
static rlim_t raise_nofile(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t old = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) rl.rlim_cur = old;
    }
    return rl.rlim_cur;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    kube_log(KUBE_LOG_WARN, "http-server=\"%s\"", buf);
}

static char *slurp(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s", path);
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); snprintf(err, errlen, "out of memory"); return NULL; }
            buf = nb;
        }
        size_t r = fread(buf + len, 1, 4096, f);
        len += r;
        if (r < 4096) break;
    }
    fclose(f);
    buf[len] = 0;
    return buf;
}

/* "127.0.0.1:8888", "[::1]:8888", "localhost:8888" -> a socket address (kube/pod.h). */
static int parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *sl, char *err, size_t errlen) {
    char host[256];
    int rc = kube_pod_listen_addr(s, false, ss, sl, host, sizeof host);
    if (rc == KUBE_POD_LISTEN_UNRESOLVED) {
        snprintf(err, errlen, "--listen %s: cannot resolve host %s", s, host);
    } else if (rc < 0) {
        snprintf(err, errlen, "--listen %s: expected HOST:PORT", s);
    }
    return rc < 0 ? -1 : 0;
}

ext_http *ext_http_start(const ext_http_config *cfg, char *err, size_t errlen) {
    ext_http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->cfg = *cfg;
    h->cfg.tls_cert_pem = h->cfg.tls_key_pem = NULL;   /* the caller's strings may go away; h->tls_* are ours */
    if (!h->cfg.max_body) h->cfg.max_body = 8u << 20;
    if (h->cfg.conn_timeout_s <= 0) h->cfg.conn_timeout_s = 30;
    if (h->cfg.threads <= 0) {
        /* A connection stays with the thread that accepted it, and a thread answers its connections one at a
         * time: with one thread per CPU, a few busy keep-alive connections on one thread queue behind each
         * other while a CPU idles (8 connections of cheap calls on 2 threads: 0.73 x the requests/s of the
         * thread per connection before; bench_extender G). An idle polling thread costs a stack and an
         * poll set, not a thread per connection, so the pool is 8 threads, or 2 per CPU when that is more.
         * The probe and webhook servers, called rarely, keep one per CPU. */
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        if (h->cfg.ops_only || h->cfg.webhook_only) h->cfg.threads = n < 2 ? 2 : n > 8 ? 8 : (int)n;
        else h->cfg.threads = n < 4 ? 8 : n > 16 ? 32 : 2 * (int)n;
    }
    if (h->cfg.max_conns <= 0) h->cfg.max_conns = 4096;
    if (h->cfg.max_binds <= 0) h->cfg.max_binds = 64;
    if (!h->cfg.max_body_total) h->cfg.max_body_total = h->cfg.max_body * 4 > (256u << 20) ? h->cfg.max_body * 4 : (256u << 20);
    if (h->cfg.max_body_total < h->cfg.max_body + 1) h->cfg.max_body_total = h->cfg.max_body + 1;
    /* libmicrohttpd closes connections past its own limit unanswered: keep that limit 1024 above
     * ours (room to answer 503) and inside the descriptors we have (a few hundred kept for the API
     * client, watches and files). */
    rlim_t nofile = raise_nofile();
    unsigned mhd_limit = (unsigned)h->cfg.max_conns + 1024;
    if (nofile < (rlim_t)mhd_limit + 256) mhd_limit = nofile > 512 ? (unsigned)(nofile - 256) : 256;
    if ((unsigned)h->cfg.max_conns > mhd_limit) h->cfg.max_conns = (int)mhd_limit;
    size_t pl = strlen(h->cfg.prefix);
    while (pl > 0 && h->cfg.prefix[pl - 1] == '/') h->cfg.prefix[--pl] = 0;   /* as kube-scheduler trims it */
    struct sockaddr_storage ss;
    socklen_t sl;
    if (parse_listen(cfg->listen[0] ? cfg->listen : "127.0.0.1:8888", &ss, &sl, err, errlen) < 0) {
        free(h);
        return NULL;
    }
    /* poll(): no FD_SETSIZE ceiling; suspend/resume: binds off the polling threads (serve_bind).
     * Not epoll: libmicrohttpd 0.9.75's epoll loop drains its events 128 at a time and, when a
     * round returns exactly 128, waits again with the full blocking timeout, i.e. until the
     * earliest connection timeout (30 s by default) with nothing more to come. Every connection of
     * that thread sits unanswered meanwhile, and idle-timeout handling then closes them before
     * they are read: in a storm of 1,500 connections on a loaded 2-CPU machine, 3 runs in 60 lost
     * hundreds of connections that way (test ext_http_serves_more_than_1024_connections_at_once).
     * poll() scans all of a thread's connections per wake-up: no cost measurable with kube-scheduler's
     * few connections (bench_extender G: 0.98 of epoll's requests/s), a filter's p50 0.05 -> 0.20 ms
     * with 4,096 connections held (bench_connections). Answering beats being fast and silent. */
    unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_OptionItem tls[4];
    int nt = 0;
    bool pem = cfg->tls_cert_pem && cfg->tls_key_pem;
    if (pem || (cfg->tls_cert_file && cfg->tls_key_file)) {
        if (pem) {
            if (!(h->tls_cert = strdup(cfg->tls_cert_pem)) || !(h->tls_key = strdup(cfg->tls_key_pem))) {
                snprintf(err, errlen, "out of memory");
                goto fail;
            }
        } else if (!(h->tls_cert = slurp(cfg->tls_cert_file, err, errlen)) ||
                   !(h->tls_key = slurp(cfg->tls_key_file, err, errlen))) {
            goto fail;
        }
        flags |= MHD_USE_TLS;
        tls[nt++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, h->tls_cert};
        tls[nt++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, h->tls_key};
        if (cfg->tls_client_ca_file) {
#ifndef EXT_HAVE_GNUTLS
            snprintf(err, errlen, "--tls-client-ca: this binary was built without GnuTLS, so it cannot verify "
                                  "client certificates (build with EXT_HAVE_GNUTLS)");
            goto fail;
#endif
            if (!(h->tls_ca = slurp(cfg->tls_client_ca_file, err, errlen))) goto fail;
            tls[nt++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, h->tls_ca};
        }
    } else if (cfg->tls_cert_pem || cfg->tls_key_pem) {
        snprintf(err, errlen, "HTTPS needs both a certificate and a key");
        goto fail;
    } else if (cfg->tls_cert_file || cfg->tls_key_file || cfg->tls_client_ca_file) {
        snprintf(err, errlen, "HTTPS needs both --tls-cert and --tls-key");
        goto fail;
    }
    tls[nt++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, handler, h,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)h->cfg.conn_timeout_s,
                            MHD_OPTION_CONNECTION_LIMIT, mhd_limit,
                            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)h->cfg.threads,
                            /* each connection's buffer for headers and body chunks, 16 KiB (about 21 KiB of RSS per
                             * kept-alive connection in bench_connections; the body itself
                             * is copied out, bounded by max_body and max_body_total) */
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)4096,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, h,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                            MHD_OPTION_ARRAY, tls,
                            MHD_OPTION_END);
    if (!h->d) {
        snprintf(err, errlen, "cannot listen on %s (address in use, or TLS files invalid)",
                 cfg->listen[0] ? cfg->listen : "127.0.0.1:8888");
        goto fail;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_storage bound;
    socklen_t bl = sizeof bound;
    if (di && getsockname(di->listen_fd, (struct sockaddr *)&bound, &bl) == 0)
        h->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                    : ((struct sockaddr_in *)&bound)->sin_port);
    (void)sl;
    return h;
fail:
    free(h->tls_cert);
    free(h->tls_key);
    free(h->tls_ca);
    free(h);
    return NULL;
}

int ext_http_port(const ext_http *h) { return h ? h->port : 0; }
ext_metrics *ext_http_metrics(ext_http *h) { return h ? &h->metrics : NULL; }

void ext_http_stop(ext_http *h) {
    if (!h) return;
    if (h->d) {
        /* Let binds in flight finish (each is bounded by the API client's timeout; new ones are
         * refused): libmicrohttpd refuses to stop with a connection still suspended. No
         * MHD_quiesce_daemon: refusing new work through `stopping` is enough, and with epoll (which
         * this server used before) and a thread pool, libmicrohttpd 0.9.75's quiesce raced its own
         * worker threads and aborted the process ("Failed to remove listen FD from epoll set"). */
        atomic_store(&h->stopping, true);
        while (atomic_load(&h->binds) > 0) {
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        MHD_stop_daemon(h->d);
    }
    free(h->tls_cert);
    free(h->tls_key);
    free(h->tls_ca);
    free(h);
}
