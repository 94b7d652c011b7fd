/* test_ext_http.c -- the real HTTP server on 127.0.0.1 (port picked at run time) driven
 * with libcurl: every kind of bad input gets a JSON error with the right status and
 * changes nothing; keep-alive, body limit (413), 404/405, slow clients, readiness, and one
 * end-to-end GPU filter/prioritize/bind with /debug/state and /metrics.
 */
#include <curl/curl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "ext_helpers.h"
#include "ext_proc.h"
#include "extender/http.h"

typedef struct srv {
    ext_state *st;
    ext_verbs v;
    ext_http *h;
    char base[64];
    CURL *c;
} srv;

static bool srv_start(srv *s, ext_state *st, size_t max_body) {
    memset(s, 0, sizeof *s);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    s->st = st;
    ext_verbs_init(&s->v, st, NULL, NULL, NULL);
    ext_http_config hc = {.max_body = max_body, .conn_timeout_s = 1, .verbs = &s->v};
    snprintf(hc.listen, sizeof hc.listen, "127.0.0.1:0");
    snprintf(hc.prefix, sizeof hc.prefix, "/tessera/");   /* trailing '/' trimmed, as kube-scheduler does */
    char err[256];
    s->h = ext_http_start(&hc, err, sizeof err);
    if (!s->h) {
        fprintf(stderr, "http: %s\n", err);
        return false;
    }
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%d", ext_http_port(s->h));
    s->c = curl_easy_init();
    return s->c != NULL;
}

static void srv_stop(srv *s) {
    if (s->c) curl_easy_cleanup(s->c);
    ext_http_stop(s->h);
    ext_state_free(s->st);
    curl_global_cleanup();
}

/* One request on the server's keep-alive handle. Returns the status; *body (caller frees). */
static long req(srv *s, const char *method, const char *path, const char *body, size_t len, bool chunked, char **out,
                long *connects) {
    char url[512];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    cbuf b = {0};
    CURL *c = s->c;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (chunked) hdr = curl_slist_append(hdr, "Transfer-Encoding: chunked");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        if (!chunked) curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    long code = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (connects) curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, connects);
    curl_slist_free_all(hdr);
    if (out) *out = b.p ? b.p : strdup("");
    else free(b.p);
    return code;
}

TEST(ext_http_bad_input_gets_json_errors_and_changes_nothing) {
    srv s;
    CHECK(srv_start(&s, demo_state(), 64 * 1024));
    char *trunc = test_fixture("extender-samples/node-list/01-filter.request.raw.json", NULL);
    trunc[strlen(trunc) / 2] = 0;
    char *gpod = pod_json("p", "uid-p", 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL);
    char wrongnames[4096], podarray[64], preempt_bad[4096], unknown_node[4096], preempt_unknown[4096];
    snprintf(preempt_unknown, sizeof preempt_unknown,
             "{\"Pod\":%s,\"NodeNameToVictims\":null,\"NodeNameToMetaVictims\":{\"no-such-node\":{\"Pods\":[{\"UID\":\"u9\"}]}}}", gpod);
    snprintf(wrongnames, sizeof wrongnames, "{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":\"gpu-a100-whole\"}", gpod);
    snprintf(podarray, sizeof podarray, "{\"Pod\":[],\"Nodes\":null,\"NodeNames\":[]}");
    snprintf(preempt_bad, sizeof preempt_bad,
             "{\"Pod\":%s,\"NodeNameToVictims\":null,\"NodeNameToMetaVictims\":{\"gpu-a100-whole\":{\"Pods\":[{\"X\":1}]}}}", gpod);
    snprintf(unknown_node, sizeof unknown_node, "{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":[\"no-such-node\"]}", gpod);
    struct { const char *m, *path, *body; long want; const char *needle; } cases[] = {
        {"POST", "/tessera/filter", "{", 400, "\"FailedNodes\""},
        {"POST", "/tessera/filter", trunc, 400, "malformed or truncated"},
        {"POST", "/tessera/filter", wrongnames, 400, "NodeNames"},
        {"POST", "/tessera/filter", podarray, 400, "Pod"},
        {"POST", "/tessera/filter", "{\"Pod\":{\"metadata\":{\"name\":\"x\"}}}", 400, "neither Nodes nor NodeNames"},
        {"POST", "/tessera/filter", "{\"Pod\":{\"metadata\":{\"name\":\"x\"}},\"Nodes\":{\"items\":[{\"metadata\":{}}]}}", 400, "metadata.name"},
        {"POST", "/tessera/filter", "{\"Pod\":{\"metadata\":{\"name\":\"x\"}},\"Nodes\":5}", 400, "Nodes: expected"},
        {"POST", "/tessera/filter", "{\"Pod\":{\"metadata\":{\"name\":\"x\"}},\"Nodes\":{\"items\":{}}}", 400, "Nodes.items"},
        {"POST", "/tessera/filter", "{\"Pod\":{\"metadata\":{\"name\":\"x\"}},\"Nodes\":{\"items\":[7]}}", 400, "items[0]"},
        {"POST", "/tessera/filter", "{\"Pod\":{\"metadata\":{\"name\":\"x\"}},\"Nodes\":{\"items\":null}}", 200, "\"items\":[]"},
        {"POST", "/tessera/filter", "{\"Pod\":{\"metadata\":{\"name\":\"x\"}},\"NodeNames\":[\"a\",1]}", 400, "NodeNames[1]"},
        {"POST", "/tessera/filter", "{\"Pod\":{\"metadata\":{\"name\":5}},\"NodeNames\":[]}", 400, "Pod.metadata.name"},
        {"POST", "/tessera/filter", "{\"Pod\":{\"metadata\":{\"name\":\"x\"}},\"NodeNames\":[]} x", 400, "malformed"},
        {"POST", "/tessera/filter", "{\"Pod\":{\"metadata\":{\"name\":\"x\"}},\"NodeNames\":[\"a\" \"b\"]}", 400, "malformed"},
        {"POST", "/tessera/prioritize", unknown_node, 200, "{\"Host\":\"no-such-node\",\"Score\":0}"},
        {"POST", "/tessera/preempt", "{\"NodeNameToVictims\":null}", 400, "Pod"},
        {"POST", "/tessera/preempt", preempt_unknown, 200, "\"NodeNameToMetaVictims\":{}"},
        {"POST", "/tessera/prioritize", "[]", 400, "\"Error\""},
        {"POST", "/tessera/prioritize", "null", 400, "\"Error\""},
        {"POST", "/tessera/bind", "{\"PodName\":5,\"PodNamespace\":\"d\",\"PodUID\":\"u\",\"Node\":\"n\"}", 400, "PodName"},
        {"POST", "/tessera/bind", "", 400, "\"Error\""},
        {"POST", "/tessera/bind", "{\"PodName\":\"x\",\"PodNamespace\":\"d\",\"PodUID\":\"u\"}", 400, "Node"},
        {"POST", "/tessera/preempt", preempt_bad, 400, "UID"},
        {"POST", "/tessera/preempt", "{\"Pod\":{\"metadata\":{\"name\":\"x\"}},\"NodeNameToVictims\":7}", 400, "NodeNameToVictims"},
        {"POST", "/tessera/bind", "{\"PodName\":\"ghost\",\"PodNamespace\":\"d\",\"PodUID\":\"u-ghost\",\"Node\":\"gpu-a100-whole\"}", 200, "unknown"},
        {"POST", "/tessera/filter", unknown_node, 200, "no-such-node"},
        {"GET", "/tessera/filter", NULL, 405, "POST"},
        {"PUT", "/tessera/bind", "{}", 405, "POST"},
        {"POST", "/healthz", "{}", 405, "GET"},
        {"DELETE", "/metrics", NULL, 405, "GET"},
        {"GET", "/nope", NULL, 404, "no such endpoint"},
        {"POST", "/tessera/nope", "{}", 404, "no such endpoint"},
        {"POST", "/filter", "{}", 404, "no such endpoint"},
        {"GET", "/healthz", NULL, 200, "ok"},
        {"GET", "/readyz", NULL, 200, "ready"},
        {"GET", "/debug/state", NULL, 200, "\"nodes\""},
        {"GET", "/debug/state?pod=default/nobody", NULL, 404, "\"Error\""},
    };
    int bad = -1;
    char *got = NULL;
    long code = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0] && bad < 0; i++) {
        free(got);
        const char *b = cases[i].body;
        code = req(&s, cases[i].m, cases[i].path, b, b ? strlen(b) : 0, false, &got, NULL);
        bool json_ok = code == 200 && (!strcmp(cases[i].path, "/healthz") || !strcmp(cases[i].path, "/readyz"));
        if (!json_ok) {
            cJSON *j = cJSON_Parse(got);
            json_ok = j != NULL;
            cJSON_Delete(j);
        }
        if (code != cases[i].want || !strstr(got, cases[i].needle) || !json_ok) bad = (int)i;
    }
    if (bad >= 0)
        test_fail(__FILE__, __LINE__, "case %d %s %s: status %ld body %.300s", bad, cases[bad].m, cases[bad].path, code, got);
    free(got);
    ext_state_lock(s.st);
    ext_state_stats st;
    ext_state_get_stats(s.st, &st);
    ext_state_unlock(s.st);
    char why[256];
    bool consistent = all_nodes_consistent(s.st, why, sizeof why);
    free(trunc);
    free(gpod);
    srv_stop(&s);
    CHECK_INT(st.pods, 0);
    CHECK(consistent);
}

TEST(ext_http_oversize_body_is_413) {
    srv s;
    CHECK(srv_start(&s, demo_state(), 4096));
    size_t n = 10000;
    char *big = malloc(n + 1);
    memset(big, ' ', n);
    big[0] = '{';
    big[n - 1] = '}';
    big[n] = 0;
    char *got = NULL;
    long declared = req(&s, "POST", "/tessera/filter", big, n, false, &got, NULL);
    bool j1 = strstr(got, "\"Error\"") != NULL;
    free(got);
    long chunked = req(&s, "POST", "/tessera/filter", big, n, true, &got, NULL);
    bool j2 = strstr(got, "limit") != NULL;
    free(got);
    /* Just under the limit is accepted (and is simply not ExtenderArgs). */
    big[4000 - 1] = '}';
    big[4000] = 0;
    long under = req(&s, "POST", "/tessera/filter", big, 4000, false, &got, NULL);
    free(got);
    free(big);
    srv_stop(&s);
    CHECK_INT(declared, 413);
    CHECK(j1);
    CHECK_INT(chunked, 413);
    CHECK(j2);
    CHECK_INT(under, 400);
}

TEST(ext_http_keep_alive_reuses_the_connection) {
    srv s;
    CHECK(srv_start(&s, demo_state(), 0));
    long c1 = -1, c2 = -1, c3 = -1;
    char *body = test_fixture("extender-samples/node-cache/01-filter.request.raw.json", NULL);
    long s1 = req(&s, "POST", "/tessera/filter", body, strlen(body), false, NULL, &c1);
    long s2 = req(&s, "POST", "/tessera/prioritize", body, strlen(body), false, NULL, &c2);
    long s3 = req(&s, "GET", "/metrics", NULL, 0, false, NULL, &c3);
    free(body);
    srv_stop(&s);
    CHECK_INT(s1, 200);
    CHECK_INT(s2, 200);
    CHECK_INT(s3, 200);
    CHECK_INT(c1, 1);
    CHECK_INT(c2, 0);
    CHECK_INT(c3, 0);
}

TEST(ext_http_slow_client_is_cut_off) {
    srv s;
    CHECK(srv_start(&s, demo_state(), 0));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)ext_http_port(s.h))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool conn = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    const char *part = "POST /tessera/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"Pod\":";
    ssize_t w = conn ? send(fd, part, strlen(part), 0) : -1;
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char tmp[512];
    ssize_t r = recv(fd, tmp, sizeof tmp, 0);   /* 0 = the server closed it; -1 = still open after 5 s */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    close(fd);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    long after = req(&s, "GET", "/healthz", NULL, 0, false, NULL, NULL);
    srv_stop(&s);
    CHECK(conn);
    CHECK(w > 0);
    CHECK_MSG(r <= 0 && secs < 4.5, "slow connection still open after %.1f s (recv %zd)", secs, r);
    CHECK_INT(after, 200);
}

TEST(ext_http_not_ready_until_synced) {
    ext_state_config cfg = {.standalone = false};
    srv s;
    CHECK(srv_start(&s, ext_state_new(&cfg), 0));
    char *body = test_fixture("extender-samples/node-cache/01-filter.request.raw.json", NULL);
    char *got = NULL;
    long ready = req(&s, "GET", "/readyz", NULL, 0, false, NULL, NULL);
    long health = req(&s, "GET", "/healthz", NULL, 0, false, NULL, NULL);
    long f = req(&s, "POST", "/tessera/filter", body, strlen(body), false, &got, NULL);
    bool says = strstr(got, "not synced") != NULL;
    free(got);
    long p = req(&s, "POST", "/tessera/prioritize", body, strlen(body), false, NULL, NULL);
    free(body);
    ext_state_on_event(s.st, KUBE_NODE, KUBE_RELIST, NULL);
    ext_state_on_event(s.st, KUBE_NODE, KUBE_SYNCED, NULL);
    ext_state_on_event(s.st, KUBE_POD, KUBE_RELIST, NULL);
    ext_state_on_event(s.st, KUBE_POD, KUBE_SYNCED, NULL);
    long ready2 = req(&s, "GET", "/readyz", NULL, 0, false, NULL, NULL);
    srv_stop(&s);
    CHECK_INT(ready, 503);
    CHECK_INT(health, 200);
    CHECK_INT(f, 200);   /* the FilterResult with Error set: kube-scheduler shows the message */
    CHECK(says);
    CHECK_INT(p, 503);
    CHECK_INT(ready2, 200);
}

/* The cluster's fragmentation ratio is reported, and is a share (0..1). */
static bool frag_ok(const char *metrics) {
    const char *f = strstr(metrics, "\ntessera_cluster_fragmentation_ratio ");
    if (!f) return false;
    double r = strtod(f + strlen("\ntessera_cluster_fragmentation_ratio "), NULL);
    return r >= 0 && r <= 1;
}

TEST(ext_http_end_to_end_gpu_pod_with_debug_and_metrics) {
    srv s;
    CHECK(srv_start(&s, demo_state(), 0));
    char *pod = pod_json("p", "uid-p", 0, "\"nvidia.com/gpumem\":\"20000\"", NULL, NULL);
    const char *names[] = {"gpu-a100-whole", "gpu-t4-timeslice", "gpu-h100-mps", "cpu-only"};
    char *args = args_names(pod, names, 4);
    char *f = NULL, *p = NULL, *b = NULL, *d = NULL, *m = NULL;
    long fs = req(&s, "POST", "/tessera/filter", args, strlen(args), false, &f, NULL);
    long ps = req(&s, "POST", "/tessera/prioritize", args, strlen(args), false, &p, NULL);
    const char *bind = "{\"PodName\":\"p\",\"PodNamespace\":\"default\",\"PodUID\":\"uid-p\",\"Node\":\"gpu-a100-whole\"}";
    long bs = req(&s, "POST", "/tessera/bind", bind, strlen(bind), false, &b, NULL);
    long ds = req(&s, "GET", "/debug/state?pod=default/p", NULL, 0, false, &d, NULL);
    long ms = req(&s, "GET", "/metrics", NULL, 0, false, &m, NULL);
    bool ok = fs == 200 && strstr(f, "\"NodeNames\":[\"gpu-a100-whole\"]") && ps == 200 &&
              strstr(p, "{\"Host\":\"gpu-a100-whole\",\"Score\":10}") && bs == 200 && !strcmp(b, "{\"Error\":\"\"}") &&
              ds == 200 && strstr(d, "\"fits\":true") && ms == 200 &&
              strstr(m, "tessera_binds_total{result=\"ok\"} 1") &&
              strstr(m, "tessera_gpu_memory_allocated_bytes{node=\"gpu-a100-whole\",gpu=\"0\",mode=\"whole\"} 20971520000\n") &&
              strstr(m, "tessera_gpu_memory_free_bytes{node=\"gpu-a100-whole\",gpu=\"0\",mode=\"whole\"} 64927825920\n") &&
              strstr(m, "tessera_gpu_compute_free_ratio{node=\"gpu-a100-whole\",gpu=\"1\",mode=\"whole\"} 1\n") &&
              strstr(m, "tessera_mig_instances_free{node=\"gpu-a100-mig\",gpu=\"0\",profile=\"") &&
              strstr(m, "\ntessera_cluster_free_gpus ") && frag_ok(m) &&
              strstr(m, "tessera_request_duration_seconds_count{verb=\"filter\"} 1");
    if (!ok) test_fail(__FILE__, __LINE__, "filter %ld %s | prioritize %ld %s | bind %ld %s | debug %ld", fs, f, ps, p, bs, b, ds);
    free(f);
    free(p);
    free(b);
    free(d);
    free(m);
    free(pod);
    free(args);
    srv_stop(&s);
}

/* --metrics-listen: a second server on the same verbs serves only the probes and /metrics,
 * showing the verb server's request histograms; verbs and /debug/state are not there. */
TEST(ext_http_ops_server_serves_only_probes_and_metrics) {
    srv s;
    CHECK(srv_start(&s, demo_state(), 0));
    ext_http_config oc = {.conn_timeout_s = 1, .verbs = &s.v, .ops_only = true, .metrics_from = ext_http_metrics(s.h)};
    snprintf(oc.listen, sizeof oc.listen, "127.0.0.1:0");
    snprintf(oc.prefix, sizeof oc.prefix, "/tessera");
    char err[256];
    ext_http *ops = ext_http_start(&oc, err, sizeof err);
    CHECK_MSG(ops != NULL, "ops server: %s", err);
    char *pod = pod_json("p", "uid-p", 0, "\"nvidia.com/gpumem\":\"1000\"", NULL, NULL);
    const char *names[] = {"gpu-a100-whole"};
    char *args = args_names(pod, names, 1);
    long f = req(&s, "POST", "/tessera/filter", args, strlen(args), false, NULL, NULL);
    char verb_base[64];
    snprintf(verb_base, sizeof verb_base, "%s", s.base);
    snprintf(s.base, sizeof s.base, "http://127.0.0.1:%d", ext_http_port(ops));
    char *m = NULL;
    long of = req(&s, "POST", "/tessera/filter", args, strlen(args), false, NULL, NULL);
    long od = req(&s, "GET", "/debug/state", NULL, 0, false, NULL, NULL);
    long oh = req(&s, "GET", "/healthz", NULL, 0, false, NULL, NULL);
    long orz = req(&s, "GET", "/readyz", NULL, 0, false, NULL, NULL);
    long om = req(&s, "GET", "/metrics", NULL, 0, false, &m, NULL);
    bool counted = m && strstr(m, "tessera_request_duration_seconds_count{verb=\"filter\"} 1\n");
    free(m);
    free(pod);
    free(args);
    ext_http_stop(ops);
    snprintf(s.base, sizeof s.base, "%s", verb_base);
    srv_stop(&s);
    CHECK_INT(f, 200);
    CHECK_INT(of, 404);
    CHECK_INT(od, 404);
    CHECK_INT(oh, 200);
    CHECK_INT(orz, 200);
    CHECK_INT(om, 200);
    CHECK(counted);
}

/* HTTPS with a client CA (--tls-cert/--tls-key/--tls-client-ca), with certificates made by
 * openssl for this run: a client certificate the CA signed is served, no certificate or
 * one the CA did not sign is refused. */
static long tls_get(int port, const char *dir, const char *client) {
    char url[64], ca[256], crt[256], key[256];
    snprintf(url, sizeof url, "https://127.0.0.1:%d/healthz", port);
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    CURL *c = curl_easy_init();
    cbuf b = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    if (client) {
        snprintf(crt, sizeof crt, "%s/%s.crt", dir, client);
        snprintf(key, sizeof key, "%s/%s.key", dir, client);
        curl_easy_setopt(c, CURLOPT_SSLCERT, crt);
        curl_easy_setopt(c, CURLOPT_SSLKEY, key);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    long code = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    free(b.p);
    return code;
}

TEST(ext_http_tls_client_ca_admits_only_signed_clients) {
    if (system("command -v openssl >/dev/null 2>&1") != 0) {
        printf("    skipped: openssl is not installed, so no certificates can be made for the HTTPS test\n");
        return;
    }
    char dir[] = "/tmp/tessera-tls-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    const char *ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd %s && { openssl req -x509 %s -keyout ca.key -out ca.crt -days 2 -subj /CN=tessera-test-ca && "
             "openssl req %s -keyout srv.key -out srv.csr -subj /CN=127.0.0.1 && "
             "printf 'subjectAltName=IP:127.0.0.1\\n' > srv.ext && "
             "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt -days 2 -extfile srv.ext && "
             "openssl req %s -keyout cli.key -out cli.csr -subj /CN=kube-scheduler && "
             "openssl x509 -req -in cli.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out cli.crt -days 2 && "
             "openssl req -x509 %s -keyout rogue.key -out rogue.crt -days 2 -subj /CN=rogue; } >/dev/null 2>&1",
             dir, ec, ec, ec, ec);
    int made = system(cmd);
    char cert[256], key[256], ca[256];
    snprintf(cert, sizeof cert, "%s/srv.crt", dir);
    snprintf(key, sizeof key, "%s/srv.key", dir);
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    ext_state *st = demo_state();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    ext_http_config hc = {.conn_timeout_s = 2, .verbs = &v, .tls_cert_file = cert, .tls_key_file = key,
                          .tls_client_ca_file = ca};
    snprintf(hc.listen, sizeof hc.listen, "127.0.0.1:0");
    char err[256] = "";
    ext_http *h = made == 0 ? ext_http_start(&hc, err, sizeof err) : NULL;
    long signed_ = h ? tls_get(ext_http_port(h), dir, "cli") : -1;
    long none = h ? tls_get(ext_http_port(h), dir, NULL) : -1;
    long rogue = h ? tls_get(ext_http_port(h), dir, "rogue") : -1;
    printf("    https: signed client %ld, no certificate %ld, unsigned certificate %ld (0 = refused in the handshake)\n",
           signed_, none, rogue);
    ext_http_stop(h);
    ext_state_free(st);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    CHECK_MSG(made == 0, "openssl could not make the test certificates");
    CHECK_MSG(h != NULL, "HTTPS server: %s", err);
    CHECK_INT(signed_, 200);
    CHECK_MSG(none == 403 || none == 0, "no client certificate: %ld", none);      /* 0: refused in the handshake */
    CHECK_MSG(rogue == 403 || rogue == 0, "unsigned client certificate: %ld", rogue);
}
