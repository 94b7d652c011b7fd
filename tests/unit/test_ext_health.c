/* test_ext_health.c -- no silent failure: for each thing tessera needs (the Lease, bind, list/watch,
 * the API server itself, the token file), a failure that persists shows in four places an operator
 * or a user looks, and all four clear when it is cured:
 *   the log        one event=dependency-failing line at warn with the API's status and message
 *                  (not one per retry), event=dependency-recovered at info;
 *   /readyz        503 naming the dependency and the message;
 *   /metrics       tessera_dependency_ok{dependency} 0, tessera_dependency_failures_total{..,reason};
 *   the verb       bind's (or filter's) Error, which kube-scheduler puts in the pod's events.
 * In-process: the real API client, cache, leader election, verbs and HTTP server against the fake
 * API server, whose faults carry the messages a real API server sends.
 */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../support/fake_apiserver.h"
#include "ext_helpers.h"
#include "ext_proc.h"
#include "extender/certs.h"
#include "extender/base/health.h"
#include "extender/http.h"
#include "kube/client.h"
#include "extender/base/leader.h"
#include "log_capture.h"
#include "policy/policy.h"

#define HX_NODE "gpu-a100-whole"
/* What the API server answered the Lease create in a namespace that does not exist (observed on a real cluster,
 * issue 13: 404 NotFound). */
#define HX_NS_MISSING "namespaces \"tessera\" not found"

typedef struct hx {
    fake_api *api;
    ext_state *st;
    kube_client *k;
    ext_leader *l;
    ext_verbs v;
    ext_http *h;
    int port;
    bool with_events;   /* set before hx_run: post Events about binds, as in cluster mode */
    bool on_calls;      /* set before hx_run: another pod's kube-scheduler holds tessera/tessera-scheduler, so
                         * this replica campaigns only while scheduling calls come (leader.h, as deployed) */
    const char *ca_file;   /* set before hx_run: the CA bundle for an HTTPS fake API */
    bool dra;              /* set before hx_run: list+watch the DRA kinds too (--dra) */
    ext_events *ev;
} hx;

static void hx_nap(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void hx_kube_stats(void *user, kube_stats *out) { kube_get_stats(user, out); }

/* The fake API (over HTTPS with cert/key, else HTTP) with one A100 node and one pending GPU pod default/p1;
 * faults go in before hx_run. */
static bool hx_api_tls(hx *x, const char *cert, const char *key) {
    memset(x, 0, sizeof *x);
    ext_health_reset();
    char err[256];
    if (!(x->api = fake_api_start_tls(0, cert, key, err, sizeof err))) return false;
    cJSON *node = demo_node_as(HX_NODE, HX_NODE);
    char *txt = cJSON_PrintUnformatted(node);
    fake_api_put(x->api, "nodes", txt);
    free(txt);
    cJSON_Delete(node);
    char *pod = pod_json("p1", "uid-p1", 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL);
    fake_api_put(x->api, "pods", pod);
    free(pod);
    return true;
}

static bool hx_api(hx *x) { return hx_api_tls(x, NULL, NULL); }

/* The extender as main.c wires it in cluster mode (leader election only when asked). */
static bool hx_run(hx *x, const char *token_file, bool leader) {
    char err[256], url[128];
    fake_api_url(x->api, url, sizeof url);
    ext_state_config sc = {.standalone = false, .dra = x->dra};
    x->st = ext_state_new(&sc);
    kube_config kc;
    kube_config_defaults(&kc);
    snprintf(kc.api_url, sizeof kc.api_url, "%s", url);
    if (token_file) snprintf(kc.token_file, sizeof kc.token_file, "%s", token_file);
    if (x->ca_file) snprintf(kc.ca_file, sizeof kc.ca_file, "%s", x->ca_file);
    kc.dra = x->dra;
    snprintf(kc.rbac, sizeof kc.rbac, "%s", EXT_KUBE_RBAC);   /* as main.c wires it */
    kc.report = ext_health_kube_report;
    kc.backoff_max_ms = 300;
    kc.request_timeout_ms = TEST_PATIENCE_MS;   /* no test here times a request out: a loaded machine is slow */
    if (!(x->k = kube_new(&kc, err, sizeof err))) return false;
    if (leader) {
        ext_leader_config lc;
        ext_leader_config_defaults(&lc);
        snprintf(lc.ns, sizeof lc.ns, "tessera");
        lc.lease_ms = 1500;
        lc.renew_ms = 1000;
        lc.retry_ms = 100;
        /* without on_calls, no kube-scheduler Lease to follow (--scheduler-lease ""): it campaigns always */
        if (ext_leader_parse_scheduler_lease(&lc, x->on_calls ? "tessera/tessera-scheduler" : "", err, sizeof err) != 0)
            return false;
        snprintf(lc.pod_host, sizeof lc.pod_host, "pod-a");
        if (x->on_calls)
            fake_api_put(x->api, "leases", "{\"metadata\":{\"name\":\"tessera-scheduler\",\"namespace\":\"tessera\"},"
                         "\"spec\":{\"holderIdentity\":\"pod-z_5e0d-kube\",\"leaseDurationSeconds\":3600}}");
        if (!(x->l = ext_leader_new(&lc, x->k, err, sizeof err))) return false;
    }
    ext_verbs_init(&x->v, x->st, policy_find("binpack"), kube_bind_fn, x->k);
    x->v.leader = x->l;
    if (x->with_events && !(x->v.events = x->ev = ext_events_start(x->k, NULL, err, sizeof err))) return false;
    ext_http_config hc;
    memset(&hc, 0, sizeof hc);
    snprintf(hc.listen, sizeof hc.listen, "127.0.0.1:0");
    snprintf(hc.prefix, sizeof hc.prefix, "/tessera");
    hc.max_body = 1 << 20;
    hc.conn_timeout_s = 5;
    hc.verbs = &x->v;
    hc.health = true;
    hc.kube_stats = hx_kube_stats;
    hc.kube_user = x->k;
    if (!(x->h = ext_http_start(&hc, err, sizeof err))) return false;
    x->port = ext_http_port(x->h);
    if (kube_start(x->k, ext_state_on_event, x->st, err, sizeof err) != 0) return false;
    return !x->l || ext_leader_start(x->l, err, sizeof err) == 0;
}

static void hx_stop(hx *x) {
    ext_http_stop(x->h);
    ext_leader_free(x->l);
    ext_events_stop(x->ev);
    kube_free(x->k);
    ext_state_free(x->st);
    fake_api_free(x->api);
    ext_health_reset();
}

typedef struct hx_buf { char *p; size_t n; } hx_buf;

static size_t hx_sink(char *p, size_t size, size_t n, void *ud) {
    hx_buf *b = ud;
    size_t len = size * n;
    char *nb = realloc(b->p, b->n + len + 1);
    if (!nb) return 0;
    memcpy(nb + b->n, p, len);
    b->n += len;
    nb[b->n] = 0;
    b->p = nb;
    return len;
}

/* GET path; the status, and the body (malloc'd, "" when none) in *body. */
static long hx_get(hx *x, const char *path, char **body) {
    hx_buf out = {NULL, 0};
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", x->port, path);
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, hx_sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)TEST_PATIENCE_MS);
    long code = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    *body = out.p ? out.p : strdup("");
    return code;
}

/* /readyz: the status, and the reason (the Error of a 503, else the text) in why. */
static long hx_readyz(hx *x, char *why, size_t len) {
    char *body;
    long code = hx_get(x, "/readyz", &body);
    cJSON *o = cJSON_Parse(body);
    const cJSON *e = cJSON_GetObjectItem(o, "Error");
    snprintf(why, len, "%s", cJSON_IsString(e) ? e->valuestring : body);
    cJSON_Delete(o);
    free(body);
    return code;
}

static bool hx_wait_readyz(hx *x, long want, char *why, size_t len) {
    return WAIT_FOR(hx_readyz(x, why, len) == want);
}

/* Whether /metrics has a line that starts with prefix. */
static bool hx_metric(hx *x, const char *prefix) {
    char *body;
    hx_get(x, "/metrics", &body);
    bool found = false;
    for (char *l = body; l && *l && !found;) {
        found = !strncmp(l, prefix, strlen(prefix));
        char *nl = strchr(l, '\n');
        l = nl ? nl + 1 : NULL;
    }
    free(body);
    return found;
}

static bool hx_wait_log(const char *a, const char *b, int count) { return WAIT_FOR(logcap_count(a, b, NULL) >= count); }

static bool hx_wait_synced(hx *x) { return WAIT_FOR(ext_state_ready(x->st)); }

/* One scheduling attempt for p1 as kube-scheduler makes it, a retry included: filter, then
 * bind to the node the filter let through. */
static void hx_bind_p1(hx *x, char *err, size_t len) {
    char *pod = pod_json("p1", "uid-p1", 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL);
    place_pod(&x->v, pod, "p1", "uid-p1", HX_NODE, err, len);
    free(pod);
}

/* A filter call's Error (what kube-scheduler reports when the extender cannot answer). */
static void hx_filter_error(hx *x, char *err, size_t len) {
    char *pod = pod_json("p1", "uid-p1", 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL);
    const char *names[1] = {HX_NODE};
    char *args = args_names(pod, names, 1);
    cJSON *r = call_verb(&x->v, ext_verb_filter, args, NULL);
    const cJSON *e = cJSON_GetObjectItem(r, "Error");
    snprintf(err, len, "%s", cJSON_IsString(e) ? e->valuestring : "");
    cJSON_Delete(r);
    free(args);
    free(pod);
}

/* The case: no tessera namespace, so the Lease create gets 404 and no replica ever binds. */
TEST(ext_health_lease_in_a_missing_namespace_is_logged_shown_counted_and_told) {
    hx x;
    CHECK(hx_api(&x));
    logcap_start(KUBE_LOG_INFO);
    fake_api_inject_msg(x.api, "POST /apis/coordination.k8s.io/v1/namespaces/tessera/leases", 404, "NotFound",
                        HX_NS_MISSING, 100000);
    bool run = hx_run(&x, NULL, true), synced = run && hx_wait_synced(&x);
    bool warned = hx_wait_log("event=dependency-failing dependency=lease", NULL, 1);
    /* many more attempts (every 100 ms), still one warn line */
    WAIT_FOR(fake_api_requests(x.api, "POST /apis/coordination.k8s.io/") >= 8);
    int posts = fake_api_requests(x.api, "POST /apis/coordination.k8s.io/");
    int warns = logcap_count("event=dependency-failing dependency=lease", NULL, NULL);
    int warn_text = logcap_count("level=warn event=dependency-failing dependency=lease reason=not_found code=404",
                                 "err=\"cannot create Lease tessera/tessera-extender: " HX_NS_MISSING "\"", NULL);
    char why[2048], berr[1024];
    long rz = hx_readyz(&x, why, sizeof why);
    bool m_ok0 = hx_metric(&x, "tessera_dependency_ok{dependency=\"lease\"} 0");
    bool m_fail = hx_metric(&x, "tessera_dependency_failures_total{dependency=\"lease\",reason=\"not_found\"} ");
    hx_bind_p1(&x, berr, sizeof berr);
    /* cured: the namespace exists now */
    fake_api_clear_injections(x.api);
    char why2[2048], berr2[1024] = "?";
    bool ready2 = hx_wait_readyz(&x, 200, why2, sizeof why2);
    bool recovered = hx_wait_log("level=info event=dependency-recovered dependency=lease", NULL, 1);
    bool m_ok1 = hx_metric(&x, "tessera_dependency_ok{dependency=\"lease\"} 1");
    WAIT_FOR(({   /* the new leader relists pods before it binds */
        hx_bind_p1(&x, berr2, sizeof berr2);
        if (berr2[0]) hx_nap(50);
        !berr2[0];
    }));
    char *log = logcap_text();
    hx_stop(&x);
    logcap_stop();
    CHECK(run && synced);
    CHECK_MSG(warned && warns == 1 && posts >= 8, "%d warn lines after %d Lease creates; log:\n%s", warns, posts, log);
    CHECK_MSG(warn_text == 1, "the warn line names the dependency, status and message; log:\n%s", log);
    free(log);
    CHECK_INT(rz, 503);
    CHECK_CONTAINS(why, "lease: cannot create Lease tessera/tessera-extender: " HX_NS_MISSING);
    CHECK(m_ok0 && m_fail);
    CHECK_CONTAINS(berr, "not the tessera leader: cannot create Lease tessera/tessera-extender: " HX_NS_MISSING);
    CHECK_MSG(ready2, "/readyz after the cure: %s", why2);
    CHECK(recovered && m_ok1);
    CHECK_STR(berr2, "");
}

/* A replica whose kube-scheduler is not the active one stops campaigning once calls stop, so nothing would
 * retry the Lease to clear its failure: it is forgotten rather than keeping the replica unready for ever. */
TEST(ext_health_lease_failure_is_forgotten_when_the_replica_goes_idle) {
    hx x;
    CHECK(hx_api(&x));
    logcap_start(KUBE_LOG_INFO);
    fake_api_inject_msg(x.api, "POST /apis/coordination.k8s.io/v1/namespaces/tessera/leases", 404, "NotFound",
                        HX_NS_MISSING, 100000);
    x.on_calls = true;
    bool run = hx_run(&x, NULL, true), synced = run && hx_wait_synced(&x);
    char why[2048], why2[2048];
    /* filter calls: each makes it campaign for the next lease duration (1.5 s); they go on until /readyz has shown
     * the failure, however long a loaded machine takes, and then stop */
    long rz = 0;
    WAIT_FOR((ext_leader_note_call(x.l), (rz = hx_readyz(&x, why, sizeof why)) == 503));
    bool warned = hx_wait_log("level=warn event=dependency-failing dependency=lease", NULL, 1);
    bool idle = hx_wait_log("level=info event=dependency-idle dependency=lease", NULL, 1);
    long rz2 = hx_readyz(&x, why2, sizeof why2);
    hx_stop(&x);
    logcap_stop();
    CHECK(run && synced && warned);
    CHECK_INT(rz, 503);
    CHECK_CONTAINS(why, "lease: cannot create Lease");
    CHECK(idle);
    CHECK_MSG(rz2 == 200, "%s", why2);
}

/* RBAC without pods/binding: the error names verb, resource, namespace and the role to fix. */
TEST(ext_health_bind_forbidden_names_what_rbac_lacks) {
    hx x;
    CHECK(hx_api(&x));
    logcap_start(KUBE_LOG_INFO);
    /* the API server's wording for an RBAC denial: "User %q cannot %s resource %q in API group %q in the namespace
     * %q" (forbiddenMessage, k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go), after
     * "<resource> \"<name>\" is forbidden: " */
    fake_api_inject_msg(x.api, "POST /api/v1/namespaces/default/pods/p1/binding", 403, "Forbidden",
                        "pods \"p1\" is forbidden: User \"system:serviceaccount:tessera:tessera-scheduler\" cannot create "
                        "resource \"pods/binding\" in API group \"\" in the namespace \"default\"", 2);
    bool run = hx_run(&x, NULL, false), synced = run && hx_wait_synced(&x);
    char e1[1024], e2[1024], e3[1024], why[2048], why3[2048];
    hx_bind_p1(&x, e1, sizeof e1);
    int warns1 = logcap_count("event=dependency-failing dependency=bind", NULL, NULL);   /* one failure: a blip */
    hx_bind_p1(&x, e2, sizeof e2);
    int warns2 = logcap_count("level=warn event=dependency-failing dependency=bind reason=forbidden code=403",
                              "check the tessera-extender ClusterRole", NULL);
    long rz = hx_readyz(&x, why, sizeof why);
    bool m_ok0 = hx_metric(&x, "tessera_dependency_ok{dependency=\"bind\"} 0");
    bool m_fail = hx_metric(&x, "tessera_dependency_failures_total{dependency=\"bind\",reason=\"forbidden\"} 2");
    hx_bind_p1(&x, e3, sizeof e3);   /* the role was fixed (the injection is used up) */
    long rz3 = hx_readyz(&x, why3, sizeof why3);
    int recovered = logcap_count("level=info event=dependency-recovered dependency=bind", NULL, NULL);
    bool m_ok1 = hx_metric(&x, "tessera_dependency_ok{dependency=\"bind\"} 1");
    hx_stop(&x);
    logcap_stop();
    CHECK(run && synced);
    CHECK_CONTAINS(e1, "binding default/p1 to " HX_NODE " failed: forbidden: cannot create pods/binding in namespace "
                       "default: check the tessera-extender ClusterRole");
    CHECK_CONTAINS(e1, "cannot create resource \"pods/binding\"");   /* and the API's own words */
    CHECK_INT(warns1, 0);
    CHECK_INT(warns2, 1);
    CHECK_INT(rz, 503);
    CHECK_CONTAINS(why, "bind: forbidden: cannot create pods/binding in namespace default");
    CHECK(m_ok0 && m_fail);
    CHECK_STR(e3, "");
    CHECK_MSG(rz3 == 200, "/readyz after the cure: %s", why3);
    CHECK_INT(recovered, 1);
    CHECK(m_ok1);
    CHECK_CONTAINS(e2, "forbidden");
}

/* 500s on the pod list keep the cache from syncing; then 500s on the watch alone (each relist works). */
TEST(ext_health_list_and_watch_500s_are_shown_until_they_stop) {
    hx x;
    CHECK(hx_api(&x));
    logcap_start(KUBE_LOG_INFO);
    fake_api_inject(x.api, "LIST /api/v1/pods", 500, 100000);
    bool run = hx_run(&x, NULL, false);
    bool warned = hx_wait_log("level=warn event=dependency-failing dependency=api-pods reason=server_error code=500",
                              "cannot list pods: the API server answered 500: injected 500", 1);
    char why[2048], ferr[2048], why2[2048];
    long rz = hx_readyz(&x, why, sizeof why);
    bool m_ok0 = hx_metric(&x, "tessera_dependency_ok{dependency=\"api-pods\"} 0");
    bool m_fail = hx_metric(&x, "tessera_dependency_failures_total{dependency=\"api-pods\",reason=\"server_error\"} ");
    hx_filter_error(&x, ferr, sizeof ferr);
    fake_api_clear_injections(x.api);
    bool ready = hx_wait_readyz(&x, 200, why2, sizeof why2);
    bool recovered = hx_wait_log("level=info event=dependency-recovered dependency=api-pods", NULL, 1);
    /* the watch fails, every relist works: still failing, for the watch */
    fake_api_inject(x.api, "WATCH /api/v1/pods", 500, 100000);
    fake_api_drop_watches(x.api);
    bool warned2 = hx_wait_log("event=dependency-failing dependency=api-pods", "cannot watch pods: the API server "
                               "answered 500", 1);
    char why3[2048], why4[2048];
    long rz3 = hx_readyz(&x, why3, sizeof why3);
    fake_api_clear_injections(x.api);
    bool ready4 = hx_wait_readyz(&x, 200, why4, sizeof why4);
    bool recovered2 = hx_wait_log("event=dependency-recovered dependency=api-pods", NULL, 2);
    bool m_ok1 = hx_metric(&x, "tessera_dependency_ok{dependency=\"api-pods\"} 1");
    char *log = logcap_text();
    hx_stop(&x);
    logcap_stop();
    CHECK(run);
    CHECK_MSG(warned, "log:\n%s", log);
    free(log);
    CHECK_INT(rz, 503);
    CHECK_CONTAINS(why, "the cache has not synced with the API server yet");
    CHECK_CONTAINS(why, "api-pods: cannot list pods: the API server answered 500: injected 500");
    CHECK(m_ok0 && m_fail);
    CHECK_CONTAINS(ferr, "tessera is not synced with the API server yet: api-pods: cannot list pods");
    CHECK_MSG(ready, "/readyz after the cure: %s", why2);
    CHECK(recovered);
    CHECK(warned2);
    CHECK_INT(rz3, 503);
    CHECK_CONTAINS(why3, "api-pods: cannot watch pods: the API server answered 500");
    CHECK_MSG(ready4, "/readyz after the cure: %s", why4);
    CHECK(recovered2 && m_ok1);
}

/* The API server goes away and comes back. */
TEST(ext_health_api_server_down_is_shown_and_clears_when_it_is_back) {
    hx x;
    CHECK(hx_api(&x));
    logcap_start(KUBE_LOG_INFO);
    bool run = hx_run(&x, NULL, false), synced = run && hx_wait_synced(&x);
    fake_api_down(x.api);
    bool warned = hx_wait_log("level=warn event=dependency-failing dependency=api-pods reason=unreachable",
                              "cannot list pods: API server unreachable", 1) &&
                  hx_wait_log("level=warn event=dependency-failing dependency=api-nodes reason=unreachable",
                              "cannot list nodes: API server unreachable", 1);
    char why[2048], berr[1024], why2[2048], berr2[1024], err[256];
    long rz = hx_readyz(&x, why, sizeof why);
    bool m_ok0 = hx_metric(&x, "tessera_dependency_ok{dependency=\"api-nodes\"} 0");
    bool m_fail = hx_metric(&x, "tessera_dependency_failures_total{dependency=\"api-pods\",reason=\"unreachable\"} ");
    hx_bind_p1(&x, berr, sizeof berr);
    bool up = fake_api_up(x.api, err, sizeof err) == 0;
    bool ready = hx_wait_readyz(&x, 200, why2, sizeof why2);
    bool recovered = hx_wait_log("level=info event=dependency-recovered dependency=api-pods", NULL, 1) &&
                     hx_wait_log("level=info event=dependency-recovered dependency=api-nodes", NULL, 1);
    bool m_ok1 = hx_metric(&x, "tessera_dependency_ok{dependency=\"api-pods\"} 1");
    hx_bind_p1(&x, berr2, sizeof berr2);
    hx_stop(&x);
    logcap_stop();
    CHECK(run && synced);
    CHECK(warned);
    CHECK_INT(rz, 503);
    CHECK_CONTAINS(why, "api-nodes: cannot list nodes: API server unreachable");
    CHECK_CONTAINS(why, "api-pods: cannot list pods: API server unreachable");
    CHECK(m_ok0 && m_fail);
    CHECK_CONTAINS(berr, "binding default/p1 to " HX_NODE " failed: cannot create Binding for pod default/p1: API server "
                         "unreachable");
    CHECK_MSG(up, "fake_api_up: %s", err);
    CHECK_MSG(ready, "/readyz after the cure: %s", why2);
    CHECK(recovered && m_ok1);
    CHECK_STR(berr2, "");
}

/* Events are best-effort: failing, they are logged, counted and listed as degraded, but /readyz stays 200 and
 * binds go on. */
TEST(ext_health_events_forbidden_degrade_but_do_not_block) {
    hx x;
    CHECK(hx_api(&x));
    for (int i = 2; i <= 3; i++) {
        char name[16], uid[24];
        snprintf(name, sizeof name, "p%d", i);
        snprintf(uid, sizeof uid, "uid-p%d", i);
        char *pod = pod_json(name, uid, 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL);
        fake_api_put(x.api, "pods", pod);
        free(pod);
    }
    logcap_start(KUBE_LOG_INFO);
    fake_api_inject_msg(x.api, "POST /api/v1/namespaces/default/events", 403, "Forbidden",
                        "events is forbidden: User \"system:serviceaccount:tessera:tessera-scheduler\" cannot create "
                        "resource \"events\" in API group \"\" in the namespace \"default\"", 2);
    x.with_events = true;
    bool run = hx_run(&x, NULL, false), synced = run && hx_wait_synced(&x);
    char e1[1024], e2[1024], e3[1024], why[2048], why3[2048];
    bind_pod(&x.v, "p1", "uid-p1", HX_NODE, e1, sizeof e1);
    bind_pod(&x.v, "p2", "uid-p2", HX_NODE, e2, sizeof e2);
    bool warned = hx_wait_log("level=warn event=dependency-failing dependency=events reason=forbidden code=403",
                              "forbidden: cannot create events in namespace default: check the tessera-extender "
                              "ClusterRole", 1);
    long rz = hx_readyz(&x, why, sizeof why);
    bool m_ok0 = hx_metric(&x, "tessera_dependency_ok{dependency=\"events\"} 0");
    bool m_fail = hx_metric(&x, "tessera_dependency_failures_total{dependency=\"events\",reason=\"forbidden\"} 2");
    bind_pod(&x.v, "p3", "uid-p3", HX_NODE, e3, sizeof e3);
    bool recovered = hx_wait_log("level=info event=dependency-recovered dependency=events", NULL, 1);
    long rz3 = hx_readyz(&x, why3, sizeof why3);
    hx_stop(&x);
    logcap_stop();
    CHECK(run && synced);
    CHECK_STR(e1, "");
    CHECK_STR(e2, "");
    CHECK(warned);
    CHECK_INT(rz, 200);
    CHECK_CONTAINS(why, "degraded: events: forbidden: cannot create events in namespace default");
    CHECK(m_ok0 && m_fail);
    CHECK_STR(e3, "");
    CHECK(recovered);
    CHECK_INT(rz3, 200);
    CHECK_MSG(!strstr(why3, "degraded"), "%s", why3);
}

/* --token-file names a file that is missing, then empty, then holds a token the API server refuses (401), then
 * the right one. */
TEST(ext_health_token_file_missing_or_empty_is_shown_until_it_is_there) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/tessera-test-token-%d", (int)getpid());
    unlink(path);
    hx x;
    CHECK(hx_api(&x));
    logcap_start(KUBE_LOG_INFO);
    fake_api_require_token(x.api, "s3cret");
    bool run = hx_run(&x, path, false);
    char want[256];
    snprintf(want, sizeof want, "cannot read token file %s: No such file or directory", path);
    bool warned = hx_wait_log("level=warn event=dependency-failing dependency=token-file reason=file", want, 1);
    char why[2048], ferr[2048], why2[2048];
    long rz = hx_readyz(&x, why, sizeof why);
    bool m_ok0 = hx_metric(&x, "tessera_dependency_ok{dependency=\"token-file\"} 0");
    bool m_fail = hx_metric(&x, "tessera_dependency_failures_total{dependency=\"token-file\",reason=\"file\"} ");
    hx_filter_error(&x, ferr, sizeof ferr);
    FILE *f = fopen(path, "w");   /* empty: a changed message is logged again at once */
    if (f) fclose(f);
    bool changed = hx_wait_log("level=warn event=dependency-still-failing dependency=token-file", "is empty or not a token",
                               1);
    f = fopen(path, "w");   /* a token the API server does not accept: 401 */
    if (f) {
        fputs("wrong\n", f);
        fclose(f);
    }
    bool recovered = hx_wait_log("level=info event=dependency-recovered dependency=token-file", NULL, 1);
    char why401[2048];
    bool said401 = false;
    said401 = WAIT_FOR((hx_readyz(&x, why401, sizeof why401),
                        strstr(why401, "api-pods: unauthorized: the API server did not accept tessera's service account "
                               "token (cannot list pods)") != NULL));
    f = fopen(path, "w");
    if (f) {
        fputs("s3cret\n", f);
        fclose(f);
    }
    bool ready = hx_wait_readyz(&x, 200, why2, sizeof why2);
    bool m_ok1 = hx_metric(&x, "tessera_dependency_ok{dependency=\"token-file\"} 1");
    hx_stop(&x);
    logcap_stop();
    unlink(path);
    CHECK(run);
    CHECK(warned);
    CHECK_INT(rz, 503);
    CHECK_CONTAINS(why, "token-file: ");
    CHECK_CONTAINS(why, want);
    CHECK(m_ok0 && m_fail);
    CHECK_CONTAINS(ferr, "tessera is not synced with the API server yet: ");
    CHECK_CONTAINS(ferr, want);
    CHECK(changed);
    CHECK(recovered);
    CHECK_MSG(said401, "/readyz with a wrong token: %s", why401);
    CHECK_MSG(ready, "/readyz after the cure: %s", why2);
    CHECK(m_ok1);
}

/* The API server's CA bundle: missing, then the wrong CA (the API server's certificate is not trusted), then
 * the right one. Each failure is one warn line, a /readyz reason, a metric and the verbs' error text; the
 * right CA clears them. */
TEST(ext_health_ca_file_missing_or_wrong_is_shown_until_it_is_right) {
    ext_cert_pem ca = {0}, other = {0}, srv = {0};
    char cerr[256] = "";
    const char *dns[] = {"localhost"};
    bool certs = ext_certs_make_ca("test API CA", 2, &ca, cerr, sizeof cerr) == 0 &&
                 ext_certs_make_ca("some other CA", 2, &other, cerr, sizeof cerr) == 0 &&
                 ext_certs_make_serving(&ca, dns, 1, 1, &srv, cerr, sizeof cerr) == 0;
    CHECK_MSG(certs, "certificates: %s", cerr);
    char path[128];
    snprintf(path, sizeof path, "/tmp/tessera-test-ca-%d.pem", (int)getpid());
    unlink(path);
    hx x;
    bool api = hx_api_tls(&x, srv.cert, srv.key);
    if (!api) {
        ext_cert_pem_free(&ca), ext_cert_pem_free(&other), ext_cert_pem_free(&srv);
        CHECK(api);
    }
    x.ca_file = path;
    logcap_start(KUBE_LOG_INFO);
    bool run = hx_run(&x, NULL, false);
    /* missing: the CA file itself is the dependency that fails */
    bool warned = hx_wait_log("level=warn event=dependency-failing dependency=ca-file", path, 1);
    char why[2048] = "", ferr[2048] = "", why2[2048] = "", why3[2048] = "";
    bool said = false;
    said = WAIT_FOR((hx_readyz(&x, why, sizeof why), strstr(why, "ca-file: ") != NULL));
    bool m_fail = hx_metric(&x, "tessera_dependency_ok{dependency=\"ca-file\"} 0");
    hx_filter_error(&x, ferr, sizeof ferr);
    /* the wrong CA: the API server's certificate does not verify */
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(other.cert, f);
        fclose(f);
    }
    bool tls_said = false;
    tls_said = WAIT_FOR((hx_readyz(&x, why2, sizeof why2), strstr(why2, "TLS with the API server failed") != NULL));
    /* the right CA */
    f = fopen(path, "w");
    if (f) {
        fputs(ca.cert, f);
        fclose(f);
    }
    bool ready = hx_wait_readyz(&x, 200, why3, sizeof why3);
    bool recovered = hx_wait_log("level=info event=dependency-recovered dependency=ca-file", NULL, 1);
    bool m_ok = hx_metric(&x, "tessera_dependency_ok{dependency=\"ca-file\"} 1");
    hx_stop(&x);
    logcap_stop();
    unlink(path);
    ext_cert_pem_free(&ca);
    ext_cert_pem_free(&other);
    ext_cert_pem_free(&srv);
    CHECK(run);
    CHECK(warned);
    CHECK_MSG(said, "/readyz with no CA file: %s", why);
    CHECK_CONTAINS(why, path);
    CHECK(m_fail);
    CHECK_CONTAINS(ferr, "tessera is not synced with the API server yet: ");
    CHECK_MSG(tls_said, "/readyz with the wrong CA: %s", why2);
    CHECK_MSG(ready, "/readyz with the right CA: %s", why3);
    CHECK(recovered);
    CHECK(m_ok);
}

/* ResourceClaims the API server cannot list: GPUs held through claims would go unaccounted, so tessera is not
 * ready, says why in /readyz, the metric and the verbs' error text, and is ready again when the list works. */
TEST(ext_health_dra_claims_that_cannot_be_listed_block_readiness_until_they_can) {
    hx x;
    CHECK(hx_api(&x));
    x.dra = true;
    fake_api_inject(x.api, "LIST /apis/resource.k8s.io/v1/resourceclaims", 500, 100000);
    logcap_start(KUBE_LOG_INFO);
    bool run = hx_run(&x, NULL, false);
    bool warned = hx_wait_log("level=warn event=dependency-failing dependency=api-resourceclaims", "cannot list resourceclaims",
                              1);
    char why[2048] = "", why2[2048] = "", ferr[2048] = "";
    bool said = false;
    long rz = 0;
    said = WAIT_FOR(((rz = hx_readyz(&x, why, sizeof why)) == 503 &&
                     strstr(why, "api-resourceclaims: cannot list resourceclaims") != NULL));
    bool m_fail = hx_metric(&x, "tessera_dependency_ok{dependency=\"api-resourceclaims\"} 0");
    hx_filter_error(&x, ferr, sizeof ferr);
    fake_api_clear_injections(x.api);
    bool recovered = hx_wait_log("level=info event=dependency-recovered dependency=api-resourceclaims", NULL, 1);
    bool ready = hx_wait_readyz(&x, 200, why2, sizeof why2);
    hx_stop(&x);
    logcap_stop();
    CHECK(run);
    CHECK(warned);
    CHECK_MSG(said, "/readyz while claims fail: %ld %s", rz, why);
    CHECK(m_fail);
    CHECK_CONTAINS(ferr, "api-resourceclaims");
    CHECK(recovered);
    CHECK_MSG(ready, "/readyz after the cure: %s", why2);
}

/* The words for each status, which the tests above see only in part. */
TEST(ext_health_api_messages) {
    char m[512];
    kube_api_msg(m, sizeof m, 403, "create", "leases", "Lease", "tessera", "tessera-extender",
                       "tessera-leader-election Role", "leases is forbidden");
    CHECK_STR(m, "forbidden: cannot create leases in namespace tessera: check the tessera-leader-election Role "
                 "(leases is forbidden)");
    kube_api_msg(m, sizeof m, 403, "list", "nodes", NULL, NULL, NULL, "tessera-extender ClusterRole", "x");
    CHECK_STR(m, "forbidden: cannot list nodes cluster-wide: check the tessera-extender ClusterRole (x)");
    kube_api_msg(m, sizeof m, 401, "list", "pods", NULL, NULL, NULL, "r", "Unauthorized");
    CHECK_CONTAINS(m, "unauthorized: the API server did not accept tessera's service account token (cannot list pods)");
    kube_api_msg(m, sizeof m, 404, "create", "leases", "Lease", "tessera", "tessera-extender", "r", HX_NS_MISSING);
    CHECK_STR(m, "cannot create Lease tessera/tessera-extender: " HX_NS_MISSING);
    kube_api_msg(m, sizeof m, KUBE_TIMEOUT, "get", "leases", "Lease", "tessera", "t", "r", "no answer");
    CHECK_CONTAINS(m, "did not answer in time");
    CHECK_INT(ext_health_reason_of(KUBE_UNREACHABLE), EXT_REASON_UNREACHABLE);
    CHECK_INT(ext_health_reason_of(429), EXT_REASON_THROTTLED);
    CHECK_INT(ext_health_reason_of(503), EXT_REASON_SERVER_ERROR);
    CHECK_INT(ext_health_reason_of(422), EXT_REASON_REJECTED);
    /* below the threshold nothing is failing; a success in between starts the count again */
    ext_health_reset();
    ext_health_fail(EXT_DEP_LEASE, 500, EXT_REASON_SERVER_ERROR, "a");
    ext_health_ok(EXT_DEP_LEASE);
    ext_health_fail(EXT_DEP_LEASE, 500, EXT_REASON_SERVER_ERROR, "a");
    bool failing1 = ext_health_failing(EXT_DEP_LEASE, NULL, 0);
    ext_health_fail(EXT_DEP_LEASE, 500, EXT_REASON_SERVER_ERROR, "b");
    bool failing2 = ext_health_failing(EXT_DEP_LEASE, m, sizeof m);
    char why[256];
    bool ready = ext_health_ready(why, sizeof why);
    ext_health_fail(EXT_DEP_EVENTS, 500, EXT_REASON_SERVER_ERROR, "ev");
    ext_health_fail(EXT_DEP_EVENTS, 500, EXT_REASON_SERVER_ERROR, "ev");
    char warn[256];
    ext_health_warnings(warn, sizeof warn);
    ext_health_ok(EXT_DEP_LEASE);
    bool ready2 = ext_health_ready(NULL, 0);   /* events do not block readiness */
    /* a bind failure nothing retries is forgotten after its forget time (60 s; 50 ms here) */
    ext_health_set_forget_ms(EXT_DEP_BIND, 50);
    ext_health_fail(EXT_DEP_BIND, 503, EXT_REASON_SERVER_ERROR, "x");
    ext_health_fail(EXT_DEP_BIND, 503, EXT_REASON_SERVER_ERROR, "x");
    bool bind_failing = ext_health_failing(EXT_DEP_BIND, NULL, 0), bind_blocks = !ext_health_ready(NULL, 0);
    hx_nap(80);
    bool bind_forgotten = !ext_health_failing(EXT_DEP_BIND, NULL, 0) && ext_health_ready(NULL, 0);
    ext_health_reset();
    CHECK(!failing1 && failing2);
    CHECK_STR(m, "b");
    CHECK(!ready);
    CHECK_STR(why, "lease: b");
    CHECK_STR(warn, "events: ev");
    CHECK(ready2);
    CHECK(bind_failing && bind_blocks && bind_forgotten);
}
