/* status.c -- see status.h. */
#include "agent/status.h"

#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "kube/pod.h"
#include "kube/strbuf.h"

#define MAX_ANNOTATIONS 4

static const char *const comp_names[AGENT_NCOMP] = {"nvml", "pod-resources", "api", "topology"};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    bool tried[AGENT_NCOMP], degraded[AGENT_NCOMP];
    char why[AGENT_NCOMP][512];
    uint64_t errors[AGENT_NCOMP];
    double last_ok[AGENT_NCOMP];           /* unix seconds; 0 = never */
    char ann[MAX_ANNOTATIONS][64];
    uint64_t writes[MAX_ANNOTATIONS];
    int nann;
    uint64_t write_errors;
    struct timespec tick;                  /* CLOCK_MONOTONIC */
} st;
static struct MHD_Daemon *daemon_;
static int stall_limit_ms = 60000;

const char *agent_comp_name(agent_comp c) { return c < AGENT_NCOMP ? comp_names[c] : "?"; }

static double unix_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void agent_status_ok(agent_comp c) {
    pthread_mutex_lock(&mu);
    st.tried[c] = true;
    st.degraded[c] = false;
    st.why[c][0] = 0;
    st.last_ok[c] = unix_now();
    pthread_mutex_unlock(&mu);
}

void agent_status_fail(agent_comp c, const char *why) {
    pthread_mutex_lock(&mu);
    st.tried[c] = st.degraded[c] = true;
    snprintf(st.why[c], sizeof st.why[c], "%s", why ? why : "failed");
    st.errors[c]++;
    pthread_mutex_unlock(&mu);
}

void agent_status_written(const char *const *annotations, int n) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < st.nann && strcmp(st.ann[j], annotations[i]) != 0) j++;
        if (j == st.nann && st.nann < MAX_ANNOTATIONS) snprintf(st.ann[st.nann++], sizeof st.ann[0], "%s", annotations[i]);
        if (j < st.nann) st.writes[j]++;
    }
    pthread_mutex_unlock(&mu);
}

void agent_status_write_failed(void) {
    pthread_mutex_lock(&mu);
    st.write_errors++;
    pthread_mutex_unlock(&mu);
}

void agent_status_tick(void) {
    pthread_mutex_lock(&mu);
    clock_gettime(CLOCK_MONOTONIC, &st.tick);
    pthread_mutex_unlock(&mu);
}

/* ---- the server ---------------------------------------------------------------------------------------- */

static int readyz(kube_strbuf *t) {
    int bad = 0;
    for (int c = 0; c < AGENT_NCOMP; c++) {
        /* the topology is only judged once NVML answered; untried, it is nvml's line that says why */
        if (c == AGENT_TOPOLOGY && !st.tried[c]) continue;
        if (!st.tried[c] || st.degraded[c]) {
            kube_strbuf_printf(t, "%s: %s\n", comp_names[c], st.tried[c] ? st.why[c] : "not tried yet");
            bad++;
        }
    }
    if (!bad) kube_strbuf_printf(t, "ok\n");
    return bad ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK;
}

static int healthz(kube_strbuf *t) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long ms = (now.tv_sec - st.tick.tv_sec) * 1000LL + (now.tv_nsec - st.tick.tv_nsec) / 1000000;
    if (st.tick.tv_sec && ms > stall_limit_ms) {
        kube_strbuf_printf(t, "main loop stalled for %lld ms\n", ms);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    kube_strbuf_printf(t, "ok\n");
    return MHD_HTTP_OK;
}

static int metrics(kube_strbuf *t) {
    kube_strbuf_printf(t, "# HELP tessera_node_agent_writes_total Node PATCHes that wrote the annotation.\n"
                          "# TYPE tessera_node_agent_writes_total counter\n");
    for (int i = 0; i < st.nann; i++)
        kube_strbuf_printf(t, "tessera_node_agent_writes_total{annotation=\"%s\"} %llu\n", st.ann[i],
                           (unsigned long long)st.writes[i]);
    kube_strbuf_printf(t, "# HELP tessera_node_agent_write_errors_total Node PATCHes that failed (retried with "
                          "back-off).\n"
                          "# TYPE tessera_node_agent_write_errors_total counter\n"
                          "tessera_node_agent_write_errors_total %llu\n", (unsigned long long)st.write_errors);
    kube_strbuf_printf(t, "# HELP tessera_node_agent_errors_total Failures per component (nvml, pod-resources, api, "
                          "topology).\n"
                          "# TYPE tessera_node_agent_errors_total counter\n");
    for (int c = 0; c < AGENT_NCOMP; c++)
        kube_strbuf_printf(t, "tessera_node_agent_errors_total{component=\"%s\"} %llu\n", comp_names[c],
                           (unsigned long long)st.errors[c]);
    kube_strbuf_printf(t, "# HELP tessera_node_agent_degraded 1 while the component is degraded or not tried yet "
                          "(/readyz says why).\n"
                          "# TYPE tessera_node_agent_degraded gauge\n");
    for (int c = 0; c < AGENT_NCOMP; c++)
        kube_strbuf_printf(t, "tessera_node_agent_degraded{component=\"%s\"} %d\n", comp_names[c],
                           c == AGENT_TOPOLOGY ? st.degraded[c] : !st.tried[c] || st.degraded[c]);
    kube_strbuf_printf(t, "# HELP tessera_node_agent_last_success_timestamp_seconds When the component last worked "
                          "(0: never).\n"
                          "# TYPE tessera_node_agent_last_success_timestamp_seconds gauge\n");
    for (int c = 0; c < AGENT_NCOMP; c++)
        kube_strbuf_printf(t, "tessera_node_agent_last_success_timestamp_seconds{component=\"%s\"} %.3f\n",
                           comp_names[c], st.last_ok[c]);
    return MHD_HTTP_OK;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)cls; (void)version; (void)upload; (void)upload_size; (void)con_cls;
    kube_strbuf t = {0};
    int code;
    bool prom = false;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        kube_strbuf_printf(&t, "method not allowed\n");
        code = MHD_HTTP_METHOD_NOT_ALLOWED;
    } else {
        pthread_mutex_lock(&mu);
        if (!strcmp(url, "/healthz")) code = healthz(&t);
        else if (!strcmp(url, "/readyz")) code = readyz(&t);
        else if (!strcmp(url, "/metrics")) { code = metrics(&t); prom = true; }
        else { kube_strbuf_printf(&t, "not found: /healthz, /readyz, /metrics\n"); code = MHD_HTTP_NOT_FOUND; }
        pthread_mutex_unlock(&mu);
    }
    if (t.oom) {
        kube_strbuf_free(&t);
        kube_strbuf_printf(&t, "out of memory\n");
        code = MHD_HTTP_INTERNAL_SERVER_ERROR;
        prom = false;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(t.len, t.p ? t.p : (char *)"", MHD_RESPMEM_MUST_COPY);
    kube_strbuf_free(&t);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", prom ? "text/plain; version=0.0.4" : "text/plain");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)code, r);
    MHD_destroy_response(r);
    return ret;
}

int agent_status_serve(const char *listen, int stall_ms, char *err, size_t errlen) {
    struct sockaddr_storage ss;
    socklen_t sl;
    /* numeric: no DNS lookup before the probes are served */
    if (kube_pod_listen_addr(listen, true, &ss, &sl, NULL, 0) < 0) {
        snprintf(err, errlen, "listen address \"%s\" is not HOST:PORT with a numeric host (e.g. 0.0.0.0:9090)", listen);
        return -1;
    }
    stall_limit_ms = stall_ms;
    agent_status_tick();
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    daemon_ = MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                               MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_CONNECTION_LIMIT, 64u, MHD_OPTION_END);
    if (!daemon_) {
        snprintf(err, errlen, "cannot serve on %s (address in use, or not this machine's)", listen);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
    return di ? (int)di->port : -1;
}

void agent_status_stop(void) {
    if (daemon_) MHD_stop_daemon(daemon_);
    daemon_ = NULL;
}
