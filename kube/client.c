/* client.c -- the Kubernetes API client of client.h: list+watch of nodes and pods, and pod binding, over libcurl.
 * Any failure we cannot explain (connection error, 5xx, malformed JSON) ends in a fresh list after a backoff,
 * never in resuming a watch: a cache rebuilt from a list cannot drift from the API, a patched-up one can. */
#include "kube/client.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kube/log.h"

#define KUBE_PAGE_LIMIT     500
#define KUBE_MAX_LINE       (16u << 20)  /* one watch event; a Node with huge annotations stays far below */
#define KUBE_MAX_BODY       (512u << 20) /* one list page of 500 objects */
#define KUBE_MAX_ERR_BODY   (64u << 10)  /* an error answer; and kube_request's answers unless cfg.max_answer */
#define KUBE_MAX_TOKEN      (64u << 10)
#define KUBE_BACKOFF_MIN_MS 200
#define KUBE_HEALTHY_MS     5000         /* a watch that lived this long resets the backoff */
#define KUBE_POOL           8            /* idle bind handles kept for connection reuse */
#define SA_DIR              "/var/run/secrets/kubernetes.io/serviceaccount/"

enum { OUT_OK = 0, OUT_ENDED, OUT_GONE, OUT_ERROR, OUT_STOP, OUT_RELIST, OUT_ABSENT };

/* optional: only with cfg.dra, and a 404 means "not served here" (client.h). */
static const struct { const char *path, *name, *resource; bool optional; } kube_kinds[KUBE_NKINDS] = {
    {"/api/v1/nodes", "Node", "nodes", false},
    {"/api/v1/pods", "Pod", "pods", false},
    {"/apis/resource.k8s.io/v1/resourceslices", "ResourceSlice", "resourceslices", true},
    {"/apis/resource.k8s.io/v1/resourceclaims", "ResourceClaim", "resourceclaims", true},
    {"/apis/resource.k8s.io/v1/deviceclasses", "DeviceClass", "deviceclasses", true},
};
#define kube_path(kind) (kube_kinds[kind].path)
#define kube_resource(kind) (kube_kinds[kind].resource)

const char *kube_kind_name(kube_kind kind) {
    return kind >= 0 && kind < KUBE_NKINDS ? kube_kinds[kind].name : "?";
}

/* Why a list or watch failed, for the reporter: the HTTP status (or KUBE_*), and the API's message or the
 * transport's error. */
typedef struct kube_fail { int code; kube_reason reason; char msg[512]; } kube_fail;

static bool kind_on(const kube_client *k, int kind);

struct kube_client {
    kube_config cfg;
    char base[512]; /* api_url without the trailing '/' */
    kube_handler handler;
    void *user;
    pthread_t thr[KUBE_NKINDS];
    bool running[KUBE_NKINDS];
    CURLM *multi[KUBE_NKINDS]; /* one per thread: curl_multi_wakeup lets kube_free interrupt a watch at once */
    bool started;
    atomic_bool stop;
    pthread_mutex_t mu; /* stats, and the condition backoff sleeps wait on */
    pthread_cond_t cv;  /* CLOCK_MONOTONIC */
    kube_stats st;
    pthread_mutex_t pool_mu;
    CURL *pool[KUBE_POOL];
    int npool;
    /* kube_relist: tickets asked for, the ticket each thread's current list serves (that thread only),
     * and the latest ticket a completed list served (under mu). */
    _Atomic uint64_t relist_req[KUBE_NKINDS];
    uint64_t relist_served[KUBE_NKINDS];
    uint64_t relist_done[KUBE_NKINDS];
    int absent_code[KUBE_NKINDS];   /* the 404 or 403 an optional kind's list got (that thread only) */
};

/* Tell the configured reporter (client.h) how a dependency fared; msg NULL for a success. */
static void report(const kube_client *k, kube_dep dep, int kind, int code, kube_reason reason, const char *msg) {
    if (k->cfg.report) k->cfg.report(k->cfg.report_user, dep, (kube_kind)kind, msg == NULL, code, reason, msg);
}
#define report_ok(k, dep, kind) report(k, dep, kind, 0, KUBE_REASON_UNREACHABLE, NULL)

/* over: max was reached; truncate: then drop the rest quietly (error bodies) instead of failing the transfer */
typedef struct kube_buf { char *p; size_t n, cap, max; bool over, truncate; } kube_buf;

static pthread_once_t kube_once = PTHREAD_ONCE_INIT;
static CURLcode kube_global_rc = CURLE_OK;
static void kube_global_init(void) { kube_global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* ---- configuration ----------------------------------------------------------------------------------- */

void kube_config_defaults(kube_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->request_timeout_ms = 10000;
    cfg->watch_timeout_s = 300;
    cfg->backoff_max_ms = 30000;
    snprintf(cfg->user_agent, sizeof cfg->user_agent, "tessera");
}

int kube_config_in_cluster(kube_config *cfg, char *err, size_t errlen) {
    const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port) {
        snprintf(err, errlen, "not running in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set");
        return -1;
    }
    /* a token or CA file given on the command line wins over the service account's */
    const char *token = cfg->token_file[0] ? cfg->token_file : SA_DIR "token";
    if (access(token, R_OK) != 0) {
        snprintf(err, errlen, "in-cluster: cannot read %s: %s", token, strerror(errno));
        return -1;
    }
    /* an IPv6 service address needs brackets in a URL */
    snprintf(cfg->api_url, sizeof cfg->api_url, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
    if (!cfg->token_file[0]) snprintf(cfg->token_file, sizeof cfg->token_file, "%s", SA_DIR "token");
    if (!cfg->ca_file[0] && access(SA_DIR "ca.crt", R_OK) == 0)
        snprintf(cfg->ca_file, sizeof cfg->ca_file, "%s", SA_DIR "ca.crt");
    return 0;
}

void kube_own_namespace(char *buf, size_t len, const char *fallback) {
    const char *env = getenv("POD_NAMESPACE");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return;
    }
    char ns[256] = "";
    FILE *f = fopen(SA_DIR "namespace", "r");
    if (f) {
        if (!fgets(ns, sizeof ns, f)) ns[0] = 0;
        fclose(f);
    }
    size_t n = strlen(ns);
    while (n && isspace((unsigned char)ns[n - 1])) ns[--n] = 0;
    snprintf(buf, len, "%s", n ? ns : fallback);
}

/* ---- what failed, in words --------------------------------------------------------------------------- */

kube_reason kube_reason_of(int code) {
    if (code == KUBE_TIMEOUT) return KUBE_REASON_TIMEOUT;
    if (code == KUBE_NO_REQUEST) return KUBE_REASON_FILE;   /* in practice: the token file */
    if (code <= 0) return KUBE_REASON_UNREACHABLE;
    if (code == 401) return KUBE_REASON_UNAUTHORIZED;
    if (code == 403) return KUBE_REASON_FORBIDDEN;
    if (code == 404) return KUBE_REASON_NOT_FOUND;
    if (code == 429) return KUBE_REASON_THROTTLED;
    if (code >= 500) return KUBE_REASON_SERVER_ERROR;
    return KUBE_REASON_REJECTED;
}

void kube_api_msg(char *out, size_t len, int code, const char *verb, const char *resource, const char *kind,
                  const char *ns, const char *name, const char *rbac, const char *api_msg) {
    if (!len) return;
    ns = ns ? ns : "";
    name = name ? name : "";
    api_msg = api_msg && *api_msg ? api_msg : "no message";
    char what[400];   /* "Lease tessera/tessera-extender" or "pods in namespace x" or "nodes" */
    if (*name)
        snprintf(what, sizeof what, "%s %s%s%s", kind && *kind ? kind : resource, ns, *ns ? "/" : "", name);
    else
        snprintf(what, sizeof what, "%s%s%s", resource, *ns ? " in namespace " : "", ns);
    if (code == 403) {
        /* RBAC grants verb x resource x namespace: name exactly those, and where the rule lives */
        snprintf(out, len, "forbidden: cannot %s %s %s%s: check the %s (%s)", verb, resource,
                 *ns ? "in namespace " : "cluster-wide", ns, rbac && *rbac ? rbac : "RBAC rules", api_msg);
    } else if (code == 401) {
        snprintf(out, len, "unauthorized: the API server did not accept tessera's service account token "
                 "(cannot %s %s): check --token-file or the pod's service account (%s)", verb, what, api_msg);
    } else if (code == KUBE_NO_REQUEST) {
        snprintf(out, len, "cannot %s %s: %s", verb, what, api_msg);
    } else if (code == KUBE_TIMEOUT) {
        snprintf(out, len, "cannot %s %s: the API server did not answer in time (%s)", verb, what, api_msg);
    } else if (code <= 0) {
        snprintf(out, len, "cannot %s %s: API server unreachable: %s", verb, what, api_msg);
    } else if (code >= 500 || code == 429) {
        snprintf(out, len, "cannot %s %s: the API server answered %d: %s", verb, what, code, api_msg);
    } else {
        snprintf(out, len, "cannot %s %s: %s", verb, what, api_msg);
    }
}

/* ---- small helpers ----------------------------------------------------------------------------------- */

static size_t buf_write(char *ptr, size_t size, size_t nmemb, void *ud) {
    kube_buf *b = ud;
    size_t n = size * nmemb;
    if (b->over || b->n + n > b->max) { b->over = true; return b->truncate ? n : 0; }
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 16384;
        while (c < b->n + n + 1) c *= 2;
        char *q = realloc(b->p, c);
        if (!q) { b->over = true; return 0; }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, ptr, n);
    b->n += n;
    b->p[b->n] = 0;
    return n;
}

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Interruptible sleep: kube_free must not wait out a 30 s backoff. */
static void kube_sleep(kube_client *k, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&k->mu);
    while (!atomic_load(&k->stop)) {
        if (pthread_cond_timedwait(&k->cv, &k->mu, &ts) == ETIMEDOUT) break;
    }
    pthread_mutex_unlock(&k->mu);
}

/* Aborts any transfer once kube_free has been called; curl calls this at least once a second even when
 * the connection is idle, which bounds how long a blocked watch delays shutdown. */
static int kube_xferinfo(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
    return atomic_load(&((kube_client *)ud)->stop) ? 1 : 0;
}

/* Headers for one request; the token is re-read each time because projected service-account tokens rotate.
 * NULL with err when the token file is unusable: sending no token would only earn a confusing 401. */
/* content_type: the body's media type, NULL for a request without a body. */
static struct curl_slist *kube_headers(kube_client *k, const char *content_type, char *err, size_t errlen) {
    struct curl_slist *h = NULL, *t;
    if (k->cfg.token_file[0]) {
        FILE *fp = fopen(k->cfg.token_file, "rb");
        if (!fp) {
            snprintf(err, errlen, "cannot read token file %s: %s", k->cfg.token_file, strerror(errno));
            report(k, KUBE_DEP_TOKEN_FILE, 0, 0, KUBE_REASON_FILE, err);
            return NULL;
        }
        char *tok = malloc(KUBE_MAX_TOKEN + 1);
        size_t n = tok ? fread(tok, 1, KUBE_MAX_TOKEN + 1, fp) : 0;
        fclose(fp);
        if (!tok || n > KUBE_MAX_TOKEN) {
            free(tok);
            snprintf(err, errlen, tok ? "token file %s is too big" : "out of memory reading token file %s", k->cfg.token_file);
            report(k, KUBE_DEP_TOKEN_FILE, 0, 0, KUBE_REASON_FILE, err);
            return NULL;
        }
        while (n && isspace((unsigned char)tok[n - 1])) n--;
        size_t s = 0;
        while (s < n && isspace((unsigned char)tok[s])) s++;
        bool ok = n > s;
        for (size_t i = s; i < n; i++) ok = ok && tok[i] > 0x20 && tok[i] < 0x7f; /* no header injection */
        if (!ok) {
            free(tok);
            snprintf(err, errlen, "token file %s is empty or not a token", k->cfg.token_file);
            report(k, KUBE_DEP_TOKEN_FILE, 0, 0, KUBE_REASON_FILE, err);
            return NULL;
        }
        report_ok(k, KUBE_DEP_TOKEN_FILE, 0);
        /* in place: the token can be 64 KiB, too much for the stack of a verb-server thread calling bind */
        static const char pre[] = "Authorization: Bearer ";
        char *line = malloc(sizeof pre + (n - s));
        if (line) {
            memcpy(line, pre, sizeof pre - 1);
            memcpy(line + sizeof pre - 1, tok + s, n - s);
            line[sizeof pre - 1 + (n - s)] = 0;
        }
        free(tok);
        t = line ? curl_slist_append(h, line) : NULL;
        free(line);
        if (!t) goto oom;
        h = t;
    }
    if (!(t = curl_slist_append(h, "Accept: application/json"))) goto oom;
    h = t;
    if (content_type) {
        char line[128];
        snprintf(line, sizeof line, "Content-Type: %s", content_type);
        if (!(t = curl_slist_append(h, line))) goto oom;
        h = t;
        if (!(t = curl_slist_append(h, "Expect:"))) goto oom; /* no 100-continue round trip */
        h = t;
    }
    return h;
oom:
    curl_slist_free_all(h);
    snprintf(err, errlen, "out of memory");
    return NULL;
}

static void kube_setup(kube_client *k, CURL *h, const char *url, struct curl_slist *hdrs, char *errbuf) {
    curl_easy_reset(h); /* keeps the connection cache: keep-alive survives between requests */
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_USERAGENT, k->cfg.user_agent);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    long ct = k->cfg.request_timeout_ms < 5000 ? k->cfg.request_timeout_ms : 5000;
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ct);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, kube_xferinfo);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, k);
    if (k->cfg.ca_file[0]) curl_easy_setopt(h, CURLOPT_CAINFO, k->cfg.ca_file);
    if (k->cfg.cert_file[0]) curl_easy_setopt(h, CURLOPT_SSLCERT, k->cfg.cert_file);
    if (k->cfg.key_file[0]) curl_easy_setopt(h, CURLOPT_SSLKEY, k->cfg.key_file);
    if (k->cfg.insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    errbuf[0] = 0;
}

/* The message of a v1 Status body, else a generic one. */
static void kube_status_msg(const kube_buf *b, long code, char *err, size_t errlen) {
    cJSON *s = b->p ? cJSON_ParseWithLength(b->p, b->n) : NULL;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(s, "message");
    if (cJSON_IsString(m) && *m->valuestring) snprintf(err, errlen, "%s", m->valuestring);
    else snprintf(err, errlen, "HTTP %ld from the API server", code);
    cJSON_Delete(s);
}

/* A transfer that got no usable answer (rc != CURLE_OK): which dependency reason it is. A CA file curl
 * cannot use is reported against the CA file as well. */
static void kube_transport_fail(kube_client *k, CURLcode rc, const char *errbuf, kube_fail *f) {
    const char *why = errbuf && errbuf[0] ? errbuf : curl_easy_strerror(rc);
    f->code = rc == CURLE_OPERATION_TIMEDOUT ? KUBE_TIMEOUT : KUBE_UNREACHABLE;
    f->reason = rc == CURLE_OPERATION_TIMEDOUT ? KUBE_REASON_TIMEOUT : KUBE_REASON_UNREACHABLE;
    snprintf(f->msg, sizeof f->msg, "%s", why);
    if (rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CONNECT_ERROR ||
        rc == CURLE_SSL_CERTPROBLEM) {
        f->reason = KUBE_REASON_TLS;
        snprintf(f->msg, sizeof f->msg, "TLS with the API server failed (CA file %.200s): %.250s",
                 k->cfg.ca_file[0] ? k->cfg.ca_file : "system CAs", why);
    }
    if (rc == CURLE_SSL_CACERT_BADFILE) {
        char m[700];
        snprintf(m, sizeof m, "cannot use CA file %s: %s", k->cfg.ca_file, why);
        report(k, KUBE_DEP_CA_FILE, 0, 0, KUBE_REASON_FILE, m);
    }
}

/* curl_easy_perform through the thread's multi handle, so kube_free can wake it instead of waiting for
 * the next progress callback (up to a second on an idle watch). */
static bool relist_wanted(kube_client *k, int kind) {
    return atomic_load(&k->relist_req[kind]) != k->relist_served[kind];
}

/* opened (a watch; NULL for a list) turns true as soon as the answer's status is 200: the watch works, even
 * if no event comes for minutes. */
static CURLcode kube_perform(kube_client *k, int kind, CURL *h, bool *opened) {
    CURLM *m = k->multi[kind];
    if (curl_multi_add_handle(m, h) != CURLM_OK) return CURLE_FAILED_INIT;
    CURLcode res = CURLE_ABORTED_BY_CALLBACK;
    for (;;) {
        int running = 0, queued = 0;
        if (curl_multi_perform(m, &running) != CURLM_OK) { res = CURLE_RECV_ERROR; break; }
        if (opened && !*opened) {
            long code = 0;
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
            if (code == 200) {
                *opened = true;
                report_ok(k, KUBE_DEP_KIND, kind);
            }
        }
        bool done = false;
        for (CURLMsg *msg; (msg = curl_multi_info_read(m, &queued));) {
            if (msg->msg == CURLMSG_DONE && msg->easy_handle == h) { res = msg->data.result; done = true; }
        }
        if (done || atomic_load(&k->stop) || relist_wanted(k, kind)) break;
        if (curl_multi_poll(m, NULL, 0, 1000, NULL) != CURLM_OK) { res = CURLE_RECV_ERROR; break; }
    }
    curl_multi_remove_handle(m, h);
    return res;
}

static const char *meta_str(const cJSON *obj, const char *field) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), field);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void set_rv(char **rv, const char *v) {
    if (!v || !*v) return;
    char *c = strdup(v);
    if (!c) return; /* keeping the older version only costs a replay of some events */
    free(*rv);
    *rv = c;
}

/* ---- list -------------------------------------------------------------------------------------------- */

/* All pages of one kind; RELIST goes out with the first page and SYNCED after the last, so a list that fails
 * half-way leaves the caller between RELIST and SYNCED, and the next list starts again with RELIST. */
static int kube_list(kube_client *k, CURL *h, int kind, char **rv, kube_fail *f) {
    char *cont = NULL, url[2048], errbuf[CURL_ERROR_SIZE], err[256];
    bool announced = false;
    int out = OUT_ERROR;
    for (;;) {
        int n;
        if (cont) {
            char *esc = curl_easy_escape(h, cont, 0);
            n = esc ? snprintf(url, sizeof url, "%s%s?limit=%d&continue=%s", k->base, kube_path(kind), KUBE_PAGE_LIMIT, esc) : -1;
            curl_free(esc);
        } else {
            n = snprintf(url, sizeof url, "%s%s?limit=%d", k->base, kube_path(kind), KUBE_PAGE_LIMIT);
        }
        if (n < 0 || (size_t)n >= sizeof url) {
            *f = (kube_fail){0, KUBE_REASON_BAD_RESPONSE, "the continue token makes the URL too long"};
            break;
        }
        struct curl_slist *hdrs = kube_headers(k, NULL, err, sizeof err);
        if (!hdrs) {
            f->code = 0;
            f->reason = KUBE_REASON_FILE;
            snprintf(f->msg, sizeof f->msg, "%s", err);
            break;
        }
        kube_buf b = {.max = KUBE_MAX_BODY};
        kube_setup(k, h, url, hdrs, errbuf);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)k->cfg.request_timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, buf_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        CURLcode rc = kube_perform(k, kind, h, NULL);
        long code = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        curl_slist_free_all(hdrs);
        if (atomic_load(&k->stop)) { free(b.p); out = OUT_STOP; break; }
        if (relist_wanted(k, kind)) { free(b.p); out = OUT_RELIST; break; } /* asked for a list begun later */
        if (rc != CURLE_OK || code != 200) {
            if (rc != CURLE_OK) {
                kube_transport_fail(k, rc, errbuf, f);
            } else {
                f->code = (int)code;
                f->reason = kube_reason_of((int)code);
                kube_status_msg(&b, code, f->msg, sizeof f->msg);
            }
            free(b.p);
            out = rc == CURLE_OK && code == 410 ? OUT_GONE : OUT_ERROR; /* 410: the continue token expired */
            if (rc == CURLE_OK && (code == 404 || code == 403) && kube_kinds[kind].optional && !announced) {
                out = OUT_ABSENT;
                k->absent_code[kind] = (int)code;
            }
            break;
        }
        cJSON *root = b.p ? cJSON_ParseWithLength(b.p, b.n) : NULL;
        free(b.p);
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items");
        const char *lrv = meta_str(root, "resourceVersion"), *next = meta_str(root, "continue");
        if (!cJSON_IsObject(root) || !(cJSON_IsArray(items) || cJSON_IsNull(items)) || !lrv || !*lrv) {
            *f = (kube_fail){200, KUBE_REASON_BAD_RESPONSE, ""};
            snprintf(f->msg, sizeof f->msg, "the API server's answer is not a %s list (malformed JSON, no items or "
                     "no resourceVersion)", kube_kinds[kind].name);
            cJSON_Delete(root);
            break;
        }
        if (!announced) {
            pthread_mutex_lock(&k->mu);
            k->st.synced[kind] = false;
            pthread_mutex_unlock(&k->mu);
            k->handler(k->user, (kube_kind)kind, KUBE_RELIST, NULL);
            announced = true;
        }
        const cJSON *it;
        cJSON_ArrayForEach(it, items)
            if (cJSON_IsObject(it)) k->handler(k->user, (kube_kind)kind, KUBE_ADDED, it);
        set_rv(rv, lrv);
        free(cont);
        cont = next && *next ? strdup(next) : NULL;
        cJSON_Delete(root);
        if (!cont) {
            if (next && *next) { /* strdup failed: retry the whole list later */
                *f = (kube_fail){0, KUBE_REASON_BAD_RESPONSE, "out of memory"};
                break;
            }
            k->handler(k->user, (kube_kind)kind, KUBE_SYNCED, NULL);
            pthread_mutex_lock(&k->mu);
            k->st.lists[kind]++;
            k->st.synced[kind] = true;
            pthread_mutex_unlock(&k->mu);
            out = OUT_OK;
            break;
        }
    }
    free(cont);
    return out;
}

/* ---- watch ------------------------------------------------------------------------------------------- */

typedef struct kube_stream {
    kube_client *k;
    CURL *h;
    int kind;
    long http;
    kube_buf line, errbody;
    char **rv;
    int outcome;
    int events;
    kube_fail *fail;     /* why the watch ended in OUT_ERROR, when the stream says */
} kube_stream;

/* One event line: 0, or the outcome that ends the watch. */
static int watch_line(kube_stream *w, const char *s, size_t n) {
    size_t i = 0;
    while (i < n && isspace((unsigned char)s[i])) i++;
    if (i == n) return 0; /* blank keep-alive lines are harmless */
    cJSON *ev = cJSON_ParseWithLength(s, n);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(ev, "type");
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(ev, "object");
    int out = 0;
    if (!cJSON_IsObject(ev) || !cJSON_IsString(type) || !cJSON_IsObject(obj)) {
        out = OUT_ERROR;
        *w->fail = (kube_fail){200, KUBE_REASON_BAD_RESPONSE, "a watch event that is not valid JSON with type and object"};
    } else if (strcmp(type->valuestring, "ERROR") == 0) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, "message");
        out = cJSON_IsNumber(code) && code->valueint == 410 ? OUT_GONE : OUT_ERROR;
        w->fail->code = cJSON_IsNumber(code) ? code->valueint : 500;
        w->fail->reason = kube_reason_of(w->fail->code);
        snprintf(w->fail->msg, sizeof w->fail->msg, "watch ERROR event: %s",
                 cJSON_IsString(m) ? m->valuestring : "no message");
    } else {
        kube_event e = strcmp(type->valuestring, "ADDED") == 0      ? KUBE_ADDED
                         : strcmp(type->valuestring, "MODIFIED") == 0   ? KUBE_MODIFIED
                         : strcmp(type->valuestring, "DELETED") == 0    ? KUBE_DELETED
                                                                        : KUBE_RELIST; /* = not for the handler */
        /* deliver first, then advance: a crash in between replays the event rather than losing it */
        if (e != KUBE_RELIST) w->k->handler(w->k->user, (kube_kind)w->kind, e, obj);
        set_rv(w->rv, meta_str(obj, "resourceVersion")); /* BOOKMARK and unknown types only move rv */
        w->events++;
    }
    cJSON_Delete(ev);
    return out;
}

/* Splits the stream into lines; a line may span any number of chunks. */
static size_t watch_write(char *p, size_t size, size_t nmemb, void *ud) {
    kube_stream *w = ud;
    size_t n = size * nmemb;
    if (atomic_load(&w->k->stop)) return 0;
    if (!w->http) curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &w->http);
    if (w->http != 200) { buf_write(p, 1, n, &w->errbody); return n; }
    size_t i = 0;
    while (i < n) {
        const char *nl = memchr(p + i, '\n', n - i);
        size_t seg = nl ? (size_t)(nl - (p + i)) : n - i;
        if (w->line.n + seg > KUBE_MAX_LINE) {
            *w->fail = (kube_fail){200, KUBE_REASON_BAD_RESPONSE, "a watch event longer than 16 MiB"};
            w->outcome = OUT_ERROR;
            return 0;
        }
        if (!nl) {
            if (buf_write(p + i, 1, seg, &w->line) != seg) { w->outcome = OUT_ERROR; return 0; }
            break;
        }
        int rc;
        if (w->line.n == 0) {
            rc = watch_line(w, p + i, seg); /* the common case: a whole line in this chunk, no copy */
        } else {
            if (buf_write(p + i, 1, seg, &w->line) != seg) { w->outcome = OUT_ERROR; return 0; }
            rc = watch_line(w, w->line.p, w->line.n);
            w->line.n = 0;
        }
        if (rc) { w->outcome = rc; return 0; }
        i += seg + 1;
    }
    return n;
}

static int kube_watch(kube_client *k, CURL *h, int kind, char **rv, int *events, kube_fail *f, bool *opened) {
    char url[2048], errbuf[CURL_ERROR_SIZE], err[256];
    char *esc = curl_easy_escape(h, *rv ? *rv : "", 0);
    int n = esc ? snprintf(url, sizeof url, "%s%s?watch=1&resourceVersion=%s&allowWatchBookmarks=true&timeoutSeconds=%d",
                           k->base, kube_path(kind), esc, k->cfg.watch_timeout_s) : -1;
    curl_free(esc);
    *events = 0;
    if (n < 0 || (size_t)n >= sizeof url) {
        *f = (kube_fail){0, KUBE_REASON_BAD_RESPONSE, "the resourceVersion makes the URL too long"};
        return OUT_ERROR;
    }
    struct curl_slist *hdrs = kube_headers(k, NULL, err, sizeof err);
    if (!hdrs) {
        f->code = 0;
        f->reason = KUBE_REASON_FILE;
        snprintf(f->msg, sizeof f->msg, "%s", err);
        return OUT_ERROR;
    }
    kube_stream w = {.k = k, .h = h, .kind = kind, .rv = rv, .fail = f,
                    .line = {.max = KUBE_MAX_LINE}, .errbody = {.max = KUBE_MAX_ERR_BODY, .truncate = true}};
    kube_setup(k, h, url, hdrs, errbuf);
    /* No total timeout: the server ends the watch after timeoutSeconds. A server that goes silent for much
     * longer than that without closing is dead, which the low-speed limit detects. */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)k->cfg.watch_timeout_s + 30L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, watch_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &w);
    CURLcode rc = kube_perform(k, kind, h, opened);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hdrs);
    int out;
    if (atomic_load(&k->stop)) out = OUT_STOP;
    else if (relist_wanted(k, kind)) out = OUT_RELIST;
    else if (w.outcome) out = w.outcome;
    else if (rc != CURLE_OK) { out = OUT_ERROR; kube_transport_fail(k, rc, errbuf, f); }
    else if (code == 410) out = OUT_GONE;
    else if (code != 200) {
        out = OUT_ERROR;
        f->code = (int)code;
        f->reason = kube_reason_of((int)code);
        kube_status_msg(&w.errbody, code, f->msg, sizeof f->msg);
    }
    else if (w.line.n) out = watch_line(&w, w.line.p, w.line.n) ? OUT_ERROR : OUT_ENDED; /* no final newline */
    else out = OUT_ENDED;
    *events = w.events;
    free(w.line.p);
    free(w.errbody.p);
    return out;
}

/* ---- the list+watch thread --------------------------------------------------------------------------- */

typedef struct kube_thread_arg { kube_client *k; int kind; } kube_thread_arg;

static void count(kube_client *k, uint64_t *field) {
    pthread_mutex_lock(&k->mu);
    (*field)++;
    pthread_mutex_unlock(&k->mu);
}

static int jitter(unsigned *seed, int ms) {
    /* 80..120%: reconnecting replicas (or the two kinds) must not hit a recovering API server in step */
    return ms * 8 / 10 + (int)(rand_r(seed) % (unsigned)(ms * 4 / 10 + 1));
}

static void *kube_thread(void *arg) {
    kube_thread_arg a = *(kube_thread_arg *)arg;
    free(arg);
    kube_client *k = a.k;
    const int kind = a.kind;
    unsigned seed = (unsigned)now_ms() ^ ((unsigned)kind * 7919u) ^ (unsigned)(uintptr_t)k;
    const int bmax = k->cfg.backoff_max_ms;
    int backoff = KUBE_BACKOFF_MIN_MS < bmax ? KUBE_BACKOFF_MIN_MS : bmax;
    const int bmin = backoff;
    char *rv = NULL;
    bool need_list = true, absent_said = false;
    int gones = 0;
    /* watches that failed since one last opened: a list that works after each does not make the kind healthy
     * (the cache is then only as fresh as the backoff allows) */
    int watch_fails = 0;
    CURL *h = NULL;
    while (!atomic_load(&k->stop)) {
        if (!h && !(h = curl_easy_init())) {
            count(k, &k->st.errors[kind]);
            kube_sleep(k, jitter(&seed, backoff));
            continue;
        }
        int out, events = 0;
        uint64_t t0 = now_ms();
        kube_fail fail = {0, KUBE_REASON_UNREACHABLE, "unknown error"};
        bool listing = need_list || relist_wanted(k, kind);
        if (relist_wanted(k, kind)) need_list = true;
        if (need_list) {
            k->relist_served[kind] = atomic_load(&k->relist_req[kind]);
            out = kube_list(k, h, kind, &rv, &fail);
            if (out == OUT_OK) {
                if (!watch_fails) report_ok(k, KUBE_DEP_KIND, kind);
                if (k->cfg.ca_file[0] && !strncmp(k->base, "https://", 8)) report_ok(k, KUBE_DEP_CA_FILE, 0);
                need_list = false;
                pthread_mutex_lock(&k->mu);
                k->st.absent[kind] = false;
                k->relist_done[kind] = k->relist_served[kind];
                pthread_mutex_unlock(&k->mu);
            }
        } else {
            bool opened = false;
            out = kube_watch(k, h, kind, &rv, &events, &fail, &opened);
            uint64_t lived = now_ms() - t0;
            if (opened) watch_fails = 0;   /* (and health is told in kube_perform) */
            else if (out == OUT_ERROR) watch_fails++;
            if (out != OUT_STOP && (events > 0 || lived >= KUBE_HEALTHY_MS || out == OUT_ENDED)) backoff = bmin;
            if (out == OUT_ENDED) {
                count(k, &k->st.watch_restarts[kind]);
                /* a server that ends every watch at once would otherwise make us spin */
                if (events == 0 && lived < 500) kube_sleep(k, jitter(&seed, backoff));
                continue;
            }
        }
        switch (out) {
        case OUT_OK:
            gones = 0;
            break;
        case OUT_GONE:
            /* the usual 410 (history compacted past our version) is cured by one relist, at once; a list that
             * keeps answering 410 gets the backoff */
            count(k, &k->st.gone[kind]);
            need_list = true;
            if (++gones > 1) {
                kube_sleep(k, jitter(&seed, backoff));
                backoff = backoff * 2 < bmax ? backoff * 2 : bmax;
            }
            break;
        case OUT_RELIST:
            need_list = true; /* at once: nothing failed */
            break;
        case OUT_ERROR: {
            char msg[700];
            const char *verb = listing ? "list" : "watch";
            if (fail.reason == KUBE_REASON_FILE || fail.reason == KUBE_REASON_TLS || fail.reason == KUBE_REASON_BAD_RESPONSE)
                snprintf(msg, sizeof msg, "cannot %s %s: %s", verb, kube_resource(kind), fail.msg);
            else
                kube_api_msg(msg, sizeof msg, fail.code, verb, kube_resource(kind), NULL, NULL, NULL, k->cfg.rbac,
                                   fail.msg);
            report(k, KUBE_DEP_KIND, kind, fail.code, fail.reason, msg);
            count(k, &k->st.errors[kind]);
            need_list = true;
            kube_sleep(k, jitter(&seed, backoff));
            backoff = backoff * 2 < bmax ? backoff * 2 : bmax;
            break;
        }
        case OUT_ABSENT:
            /* An older cluster: the kind is simply not there. Said once; the caller sees an empty list (so it
             * drops what an earlier list had and counts as synced); asked again quietly, in case it appears. */
            if (!absent_said && k->absent_code[kind] == 403)
                kube_log(KUBE_LOG_WARN, "event=api-absent kind=%s path=%s why=\"403: tessera's ServiceAccount may not list "
                         "it (deploy/rbac.yaml grants get/list/watch on resource.k8s.io); tessera carries on without it, "
                         "so GPUs held through claims are not accounted\"", kube_kinds[kind].name, kube_path(kind));
            else if (!absent_said)
                kube_log(KUBE_LOG_WARN, "event=api-absent kind=%s path=%s why=\"404: this API server does not serve "
                         "it (resource.k8s.io/v1 needs Kubernetes 1.34+ with DRA on); tessera carries on without it\"",
                         kube_kinds[kind].name, kube_path(kind));
            absent_said = true;
            if (k->absent_code[kind] == 403) {
                char m[300];
                snprintf(m, sizeof m, "forbidden: cannot list %s: check the %s", kube_resource(kind), k->cfg.rbac[0] ? k->cfg.rbac : "RBAC rules");
                report(k, KUBE_DEP_KIND, kind, 403, KUBE_REASON_FORBIDDEN, m);
            } else {
                report_ok(k, KUBE_DEP_KIND, kind);   /* not served by this API server: nothing to fail */
            }
            k->handler(k->user, (kube_kind)kind, KUBE_RELIST, NULL);
            k->handler(k->user, (kube_kind)kind, KUBE_SYNCED, NULL);
            pthread_mutex_lock(&k->mu);
            k->st.synced[kind] = k->st.absent[kind] = true;
            k->relist_done[kind] = k->relist_served[kind];
            pthread_mutex_unlock(&k->mu);
            need_list = true;
            kube_sleep(k, jitter(&seed, bmax));
            break;
        default:
            break;
        }
    }
    if (h) curl_easy_cleanup(h);
    free(rv);
    return NULL;
}

/* ---- public API -------------------------------------------------------------------------------------- */

int kube_init(char *err, size_t errlen) {
    pthread_once(&kube_once, kube_global_init);
    if (kube_global_rc == CURLE_OK) return 0;
    snprintf(err, errlen, "curl_global_init: %s", curl_easy_strerror(kube_global_rc));
    return -1;
}

kube_client *kube_new(const kube_config *cfg, char *err, size_t errlen) {
    if (kube_init(err, errlen) < 0) return NULL;
    if (!cfg || (strncmp(cfg->api_url, "http://", 7) != 0 && strncmp(cfg->api_url, "https://", 8) != 0)) {
        snprintf(err, errlen, "API server URL must start with http:// or https:// (got \"%s\")", cfg ? cfg->api_url : "");
        return NULL;
    }
    kube_client *k = calloc(1, sizeof *k);
    if (!k) { snprintf(err, errlen, "out of memory"); return NULL; }
    k->cfg = *cfg;
    if (k->cfg.request_timeout_ms <= 0) k->cfg.request_timeout_ms = 10000;
    if (k->cfg.watch_timeout_s <= 0) k->cfg.watch_timeout_s = 300;
    if (k->cfg.backoff_max_ms <= 0) k->cfg.backoff_max_ms = 30000;
    if (k->cfg.max_answer == 0) k->cfg.max_answer = KUBE_MAX_ERR_BODY;
    if (!k->cfg.user_agent[0]) snprintf(k->cfg.user_agent, sizeof k->cfg.user_agent, "tessera");
    snprintf(k->base, sizeof k->base, "%s", cfg->api_url);
    size_t n = strlen(k->base);
    while (n > 0 && k->base[n - 1] == '/') k->base[--n] = 0;
    atomic_init(&k->stop, false);
    pthread_mutex_init(&k->mu, NULL);
    pthread_mutex_init(&k->pool_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&k->cv, &ca);
    pthread_condattr_destroy(&ca);
    return k;
}

static bool kind_on(const kube_client *k, int kind) { return !kube_kinds[kind].optional || k->cfg.dra; }

int kube_start(kube_client *k, kube_handler handler, void *user, char *err, size_t errlen) {
    if (!k || !handler) { snprintf(err, errlen, "no client or handler"); return -1; }
    if (k->started) { snprintf(err, errlen, "already started"); return -1; }
    k->handler = handler;
    k->user = user;
    for (int i = 0; i < KUBE_NKINDS; i++) {
        if (kind_on(k, i) && !k->multi[i] && !(k->multi[i] = curl_multi_init())) {
            snprintf(err, errlen, "curl_multi_init failed");
            return -1;
        }
    }
    for (int i = 0; i < KUBE_NKINDS; i++) {
        if (!kind_on(k, i)) continue;
        kube_thread_arg *a = malloc(sizeof *a);
        if (a) *a = (kube_thread_arg){k, i};
        int rc = a ? pthread_create(&k->thr[i], NULL, kube_thread, a) : ENOMEM;
        if (rc != 0) {
            free(a);
            snprintf(err, errlen, "cannot start the watch thread: %s", strerror(rc));
            atomic_store(&k->stop, true);
            for (int j = 0; j < i; j++)
                if (k->running[j]) pthread_join(k->thr[j], NULL);
            return -1;
        }
        k->running[i] = true;
    }
    k->started = true;
    return 0;
}

void kube_free(kube_client *k) {
    if (!k) return;
    pthread_mutex_lock(&k->mu);
    atomic_store(&k->stop, true);
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    for (int i = 0; i < KUBE_NKINDS; i++)
        if (k->multi[i]) curl_multi_wakeup(k->multi[i]);
    for (int i = 0; k->started && i < KUBE_NKINDS; i++)
        if (k->running[i]) pthread_join(k->thr[i], NULL);
    for (int i = 0; i < KUBE_NKINDS; i++)
        if (k->multi[i]) curl_multi_cleanup(k->multi[i]);
    for (int i = 0; i < k->npool; i++) curl_easy_cleanup(k->pool[i]);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    pthread_mutex_destroy(&k->pool_mu);
    free(k);
}

void kube_get_stats(kube_client *k, kube_stats *out) {
    pthread_mutex_lock(&k->mu);
    *out = k->st;
    pthread_mutex_unlock(&k->mu);
}

/* Bind handles are pooled so consecutive binds reuse a kept-alive (TLS) connection. */
static CURL *pool_get(kube_client *k) {
    CURL *h = NULL;
    pthread_mutex_lock(&k->pool_mu);
    if (k->npool > 0) h = k->pool[--k->npool];
    pthread_mutex_unlock(&k->pool_mu);
    return h ? h : curl_easy_init();
}

static void pool_put(kube_client *k, CURL *h) {
    pthread_mutex_lock(&k->pool_mu);
    if (k->npool < KUBE_POOL) { k->pool[k->npool++] = h; h = NULL; }
    pthread_mutex_unlock(&k->pool_mu);
    if (h) curl_easy_cleanup(h);
}

int kube_bind(kube_client *k, const char *ns, const char *name, const char *uid, const char *node,
                  const cJSON *annotations, char *err, size_t errlen) {
    if (errlen) err[0] = 0;
    if (!k || !ns || !*ns || !name || !*name || !node || !*node) {
        snprintf(err, errlen, "bind: namespace, name and node are required");
        return -1;
    }
    cJSON *b = cJSON_CreateObject(), *meta = NULL, *ann = NULL, *target = NULL;
    bool ok = b && cJSON_AddStringToObject(b, "apiVersion", "v1") && cJSON_AddStringToObject(b, "kind", "Binding") &&
              (meta = cJSON_AddObjectToObject(b, "metadata")) && cJSON_AddStringToObject(meta, "name", name) &&
              cJSON_AddStringToObject(meta, "namespace", ns) && (!uid || !*uid || cJSON_AddStringToObject(meta, "uid", uid));
    if (ok && annotations) {
        if (!cJSON_IsObject(annotations)) {
            cJSON_Delete(b);
            snprintf(err, errlen, "bind: annotations must be an object");
            return -1;
        }
        ok = (ann = cJSON_AddObjectToObject(meta, "annotations")) != NULL;
        for (const cJSON *a = annotations->child; ok && a; a = a->next) {
            /* the apiserver rejects non-string annotation values; refusing here names the culprit */
            if (!cJSON_IsString(a) || !a->string) {
                cJSON_Delete(b);
                snprintf(err, errlen, "bind: annotation \"%s\" is not a string", a->string ? a->string : "");
                return -1;
            }
            ok = cJSON_AddStringToObject(ann, a->string, a->valuestring) != NULL;
        }
    }
    ok = ok && (target = cJSON_AddObjectToObject(b, "target")) && cJSON_AddStringToObject(target, "apiVersion", "v1") &&
         cJSON_AddStringToObject(target, "kind", "Node") && cJSON_AddStringToObject(target, "name", node);
    char *body = ok ? cJSON_PrintUnformatted(b) : NULL;
    cJSON_Delete(b);
    CURL *h = body ? pool_get(k) : NULL;
    if (!h) {
        free(body);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    char *ens = curl_easy_escape(h, ns, 0), *ename = curl_easy_escape(h, name, 0);
    char url[2048], errbuf[CURL_ERROR_SIZE];
    int n = ens && ename ? snprintf(url, sizeof url, "%s/api/v1/namespaces/%s/pods/%s/binding", k->base, ens, ename) : -1;
    curl_free(ens);
    curl_free(ename);
    struct curl_slist *hdrs = n > 0 && (size_t)n < sizeof url ? kube_headers(k, "application/json", err, errlen) : NULL;
    if (!hdrs) {
        if (!err[0]) snprintf(err, errlen, "bind: name too long");
        free(body);
        pool_put(k, h);
        return -1;
    }
    kube_buf resp = {.max = KUBE_MAX_ERR_BODY, .truncate = true};
    kube_setup(k, h, url, hdrs, errbuf);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
                     (long)(k->cfg.bind_timeout_ms > 0 ? k->cfg.bind_timeout_ms : k->cfg.request_timeout_ms));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, buf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hdrs);
    int ret;
    if (code == 0) { /* no answer at all; an answer cut short still tells whether the bind happened */
        kube_fail f;
        kube_transport_fail(k, rc, errbuf, &f);
        int c = f.code;
        kube_api_msg(err, errlen, c, "create", "pods/binding", "Binding for pod", ns, name, k->cfg.rbac, f.msg);
        report(k, KUBE_DEP_BIND, 0, c, f.reason, err);
        ret = -1;
    } else {
        if (code < 200 || code > 299) kube_status_msg(&resp, code, err, errlen);
        /* 401/403, 429 and 5xx say the API server (or our rights) cannot bind at all; any other answer is
         * about this pod (gone, already bound: 404, 409) and shows binding itself works */
        if (code == 401 || code == 403 || code == 429 || code >= 500) {
            char api[512];
            snprintf(api, sizeof api, "%s", err);
            kube_api_msg(err, errlen, (int)code, "create", "pods/binding", "Binding for pod", ns, name, k->cfg.rbac, api);
            report(k, KUBE_DEP_BIND, 0, (int)code, kube_reason_of((int)code), err);
        } else {
            report_ok(k, KUBE_DEP_BIND, 0);
        }
        ret = (int)code;
    }
    free(resp.p);
    free(body);
    pool_put(k, h);
    return ret;
}

/* ---- other requests, and forced relists --------------------------------------------------------------- */

int kube_request(kube_client *k, const char *method, const char *path, const char *body, int timeout_ms,
                     char **resp, char *err, size_t errlen) {
    if (errlen) err[0] = 0;
    if (resp) *resp = NULL;
    if (!k || !method || !path || path[0] != '/') {
        snprintf(err, errlen, "request: method and an absolute path are required");
        return KUBE_UNREACHABLE;
    }
    char url[2048], errbuf[CURL_ERROR_SIZE];
    int n = snprintf(url, sizeof url, "%s%s", k->base, path);
    CURL *h = n > 0 && (size_t)n < sizeof url ? pool_get(k) : NULL;
    struct curl_slist *hdrs = h ? kube_headers(k, !body ? NULL : strcmp(method, "PATCH") == 0 ? "application/merge-patch+json" : "application/json", err, errlen) : NULL;
    if (!hdrs) {
        if (!err[0]) snprintf(err, errlen, h ? "out of memory" : "request: path too long or out of memory");
        if (h) pool_put(k, h);
        return KUBE_NO_REQUEST;   /* not the API server's fault: say so (client.h) */
    }
    kube_buf b = {.max = k->cfg.max_answer};
    kube_setup(k, h, url, hdrs, errbuf);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    if (timeout_ms <= 0) timeout_ms = k->cfg.request_timeout_ms;
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, buf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hdrs);
    int ret;
    if (rc == CURLE_OPERATION_TIMEDOUT) {
        snprintf(err, errlen, "%s %s: no answer within %d ms", method, path, timeout_ms);
        ret = KUBE_TIMEOUT;
    } else if (rc != CURLE_OK || code == 0 || b.over) {
        snprintf(err, errlen, "%s %s: %s", method, path,
                 b.over ? "answer too large" : errbuf[0] ? errbuf : curl_easy_strerror(rc));
        ret = KUBE_UNREACHABLE;
    } else {
        if (code < 200 || code > 299) kube_status_msg(&b, code, err, errlen);
        if (resp) { *resp = b.p; b.p = NULL; }
        ret = (int)code;
    }
    free(b.p);
    pool_put(k, h);
    return ret;
}

uint64_t kube_relist(kube_client *k, kube_kind kind) {
    uint64_t t = atomic_fetch_add(&k->relist_req[kind], 1) + 1;
    if (k->multi[kind]) curl_multi_wakeup(k->multi[kind]); /* an idle watch notices at once */
    return t;
}

bool kube_relisted(kube_client *k, kube_kind kind, uint64_t ticket) {
    pthread_mutex_lock(&k->mu);
    bool done = k->relist_done[kind] >= ticket;
    pthread_mutex_unlock(&k->mu);
    return done;
}

/* ---- helpers for the callers' requests ---------------------------------------------------------------- */

bool kube_name_ok(const char *what, const char *name, char *err, size_t errlen) {
    size_t n = name ? strlen(name) : 0;
    bool ok = n > 0 && n <= 253;
    for (size_t i = 0; ok && i < n; i++)
        ok = islower((unsigned char)name[i]) || isdigit((unsigned char)name[i]) || name[i] == '-' || name[i] == '.';
    if (!ok) snprintf(err, errlen, "%s \"%.300s\" is not a DNS subdomain", what, name ? name : "");
    return ok;
}

char *kube_annotations_patch(const char *const *keys, const char *const *values, int n) {
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON *ann = cJSON_AddObjectToObject(meta, "annotations");
    bool ok = ann != NULL;
    for (int i = 0; ok && i < n; i++)
        ok = (values[i] ? cJSON_AddStringToObject(ann, keys[i], values[i]) : cJSON_AddNullToObject(ann, keys[i])) != NULL;
    char *body = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return body;
}

bool kube_config_option(kube_config *cfg, int opt, const char *arg) {
    switch (opt) {
    case KUBE_OPT_API: snprintf(cfg->api_url, sizeof cfg->api_url, "%s", arg); return true;
    case KUBE_OPT_TOKEN: snprintf(cfg->token_file, sizeof cfg->token_file, "%s", arg); return true;
    case KUBE_OPT_CA: snprintf(cfg->ca_file, sizeof cfg->ca_file, "%s", arg); return true;
    case KUBE_OPT_CERT: snprintf(cfg->cert_file, sizeof cfg->cert_file, "%s", arg); return true;
    case KUBE_OPT_KEY: snprintf(cfg->key_file, sizeof cfg->key_file, "%s", arg); return true;
    case KUBE_OPT_INSECURE: cfg->insecure = true; return true;
    default: return false;
    }
}
