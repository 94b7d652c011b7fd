/* test_ext_http_overload.c -- the HTTP server under connection storms and slow binds, over raw
 * sockets on 127.0.0.1: more than 1,024 connections at once are all answered (no FD_SETSIZE
 * ceiling), a connection over the cap gets 503 + Retry-After + a JSON Error and a clean close,
 * an idle connection is closed after the timeout, and binds stalled on the API server neither
 * hold up filter calls nor exceed their cap.
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "ext_helpers.h"
#include "ext_proc.h"
#include "extender/http.h"
#include "tests/support/wait.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* Reads wait as long as a test may (wait.h): on a loaded machine an answer can take seconds. */
static int conn_open(int port) { return loopback_connect(port, TEST_PATIENCE_MS / 1000, false); }

static bool send_req(int fd, const char *method, const char *path, const char *body) {
    char head[512];
    size_t bl = body ? strlen(body) : 0;
    int n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                                        "Content-Length: %zu\r\n\r\n", method, path, bl);
    if (send(fd, head, (size_t)n, MSG_NOSIGNAL) != n) return false;
    return !bl || send(fd, body, bl, MSG_NOSIGNAL) == (ssize_t)bl;
}

typedef struct resp {
    int status;             /* 0: no answer (closed, reset or timed out) */
    int why;                /* with status 0: the errno of the read that failed, 0 if the server closed */
    char head[2048];
    char *body;             /* malloc'd */
} resp;

/* Read one response (Content-Length framed, as the server always answers). */
static void read_resp(int fd, resp *r) {
    memset(r, 0, sizeof *r);
    char buf[65536];
    size_t len = 0;
    char *end = NULL;
    while (!end && len < sizeof buf - 1) {
        ssize_t k = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (k <= 0) {
            r->why = k < 0 ? errno : 0;
            return;
        }
        len += (size_t)k;
        buf[len] = 0;
        end = strstr(buf, "\r\n\r\n");
    }
    if (!end) return;
    size_t hl = (size_t)(end - buf) + 4;
    snprintf(r->head, sizeof r->head, "%.*s", (int)hl, buf);
    const char *cl = strcasestr(r->head, "\r\nContent-Length:");
    size_t want = cl ? strtoul(cl + 17, NULL, 10) : 0;
    r->body = calloc(1, want + 1);
    size_t have = len - hl < want ? len - hl : want;
    memcpy(r->body, buf + hl, have);
    while (have < want) {
        ssize_t k = recv(fd, r->body + have, want - have, 0);
        if (k <= 0) return;
        have += (size_t)k;
    }
    r->status = atoi(r->head + 9);
}

/* recv after the answer: 0 once the server has closed the connection (within the receive timeout). */
static ssize_t wait_closed(int fd) {
    char b[64];
    return recv(fd, b, sizeof b, 0);
}

static ext_http *start(ext_verbs *v, int max_conns, int timeout_s, int threads, int max_binds) {
    ext_http_config hc = {.conn_timeout_s = timeout_s, .verbs = v, .max_conns = max_conns, .threads = threads,
                          .max_binds = max_binds};
    snprintf(hc.listen, sizeof hc.listen, "127.0.0.1:0");
    snprintf(hc.prefix, sizeof hc.prefix, "/tessera");
    char err[256];
    ext_http *h = ext_http_start(&hc, err, sizeof err);
    if (!h) fprintf(stderr, "http: %s\n", err);
    return h;
}

static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

#define NCONN 1500

/* Serial: 3,000 sockets and a burst of 1,500 requests, which would starve the tests beside it. */
TEST_SERIAL(ext_http_serves_more_than_1024_connections_at_once) {
    raise_fd_limit();
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < 2 * NCONN + 200) {
        fprintf(stderr, "    skipped: RLIMIT_NOFILE %llu is below %d\n", (unsigned long long)rl.rlim_cur, 2 * NCONN + 200);
        return;
    }
    ext_state *st = demo_state();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    /* the idle timeout is not under test here: longer than any wait, so no connection is cut while it waits */
    ext_http *h = start(&v, 0, 2 * TEST_PATIENCE_MS / 1000, 2, 0);
    CHECK(h);
    char *body = test_fixture("extender-samples/node-cache/01-filter.request.raw.json", NULL);
    static int fds[NCONN];
    int opened = 0, sent = 0, ok = 0, other = 0, timed_out = 0, closed = 0, first_bad = -1;
    double first_bad_s = 0;
    /* Every connection is open (and kept open) before the first answer is read: the server holds
     * NCONN client sockets at once, most of them numbered above 1024. */
    for (int i = 0; i < NCONN; i++)
        if ((fds[i] = conn_open(ext_http_port(h))) >= 0) opened++;
    for (int i = 0; i < NCONN; i++)
        if (fds[i] >= 0 && send_req(fds[i], "POST", "/tessera/filter", body)) sent++;
    double t0 = now_s();
    for (int i = 0; i < NCONN; i++) {
        if (fds[i] < 0) continue;
        resp r;
        read_resp(fds[i], &r);
        if (r.status == 200 && strstr(r.body, "\"NodeNames\"")) ok++;
        else {
            other++;
            timed_out += r.status == 0 && (r.why == EAGAIN || r.why == EWOULDBLOCK);
            closed += r.status == 0 && r.why != EAGAIN && r.why != EWOULDBLOCK;
            if (first_bad < 0) first_bad = i, first_bad_s = now_s() - t0;
        }
        free(r.body);
    }
    double secs = now_s() - t0;
    long long open_now = atomic_load(&ext_http_metrics(h)->http_connections);
    /* a second request on the same (kept-alive) connections */
    int again = 0;
    for (int i = 0; i < NCONN; i += 100) {
        resp r;
        if (fds[i] >= 0 && send_req(fds[i], "GET", "/healthz", NULL)) read_resp(fds[i], &r);
        else r.status = 0, r.body = NULL;
        again += r.status == 200;
        free(r.body);
    }
    for (int i = 0; i < NCONN; i++)
        if (fds[i] >= 0) close(fds[i]);
    free(body);
    ext_http_stop(h);
    ext_state_free(st);
    fprintf(stderr, "    %d connections: %d answered 200 in %.2f s, %d other; %lld open at the server\n", NCONN, ok,
            secs, other, open_now);
    if (other)   /* what the unanswered ones met: a read timed out (the server holds the request) or a close */
        fprintf(stderr, "    unanswered: %d timed out, %d closed or reset; the first is connection %d, read %.2f s "
                        "after the first\n", timed_out, closed, first_bad, first_bad_s);
    CHECK_INT(opened, NCONN);
    CHECK_INT(sent, NCONN);
    CHECK_INT(ok, NCONN);
    CHECK_INT(open_now, NCONN);
    CHECK_INT(again, NCONN / 100);
}

TEST(ext_http_over_the_connection_cap_gets_503_with_retry_after) {
    ext_state *st = demo_state();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    ext_http *h = start(&v, 8, 2 * TEST_PATIENCE_MS / 1000, 2, 0);
    CHECK(h);
    char *body = test_fixture("extender-samples/node-cache/01-filter.request.raw.json", NULL);
    int fds[8], served = 0;
    for (int i = 0; i < 8; i++) {   /* the cap's worth, each answered (so the server has counted it) */
        resp r;
        fds[i] = conn_open(ext_http_port(h));
        if (fds[i] >= 0 && send_req(fds[i], "POST", "/tessera/filter", body)) read_resp(fds[i], &r);
        else r.status = 0, r.body = NULL;
        served += r.status == 200;
        free(r.body);
    }
    /* the ninth: a filter gets 503 with Retry-After and a JSON Error, and then a clean close */
    int x = conn_open(ext_http_port(h));
    resp over;
    bool sent = x >= 0 && send_req(x, "POST", "/tessera/filter", body);
    read_resp(x, &over);
    ssize_t closed = wait_closed(x);
    close(x);
    cJSON *ej = over.body ? cJSON_Parse(over.body) : NULL;
    const cJSON *e = cJSON_GetObjectItem(ej, "Error");
    /* probes are answered even over the cap */
    int y = conn_open(ext_http_port(h));
    resp probe;
    if (y >= 0 && send_req(y, "GET", "/healthz", NULL)) read_resp(y, &probe);
    else probe.status = 0, probe.body = NULL;
    close(y);
    /* the kept-alive connections under the cap go on being served */
    resp under;
    send_req(fds[0], "POST", "/tessera/filter", body);
    read_resp(fds[0], &under);
    /* one closes: a new connection is served again (the server notices the close asynchronously) */
    close(fds[7]);
    int after = 0;
    for (double dl = now_s() + TEST_PATIENCE_MS / 1000; now_s() < dl && after != 200;) {
        int z = conn_open(ext_http_port(h));
        resp r;
        if (z >= 0 && send_req(z, "POST", "/tessera/filter", body)) read_resp(z, &r);
        else r.status = 0, r.body = NULL;
        after = r.status;
        free(r.body);
        if (z >= 0) close(z);
        if (after != 200) usleep(20000);
    }
    uint64_t shed = atomic_load(&ext_http_metrics(h)->http_shed[EXT_HTTP_SHED_CONNS]);
    for (int i = 0; i < 7; i++)
        if (fds[i] >= 0) close(fds[i]);
    free(body);
    ext_http_stop(h);
    ext_state_free(st);
    CHECK_INT(served, 8);
    CHECK(sent);
    CHECK_INT(over.status, 503);
    CHECK_CONTAINS(over.head, "Retry-After: 1");
    CHECK(cJSON_IsString(e));
    CHECK_CONTAINS(e->valuestring, "too many connections");
    CHECK_INT(closed, 0);
    CHECK_INT(probe.status, 200);
    CHECK_INT(under.status, 200);
    CHECK_INT(after, 200);
    CHECK(shed >= 1);
    cJSON_Delete(ej);
    free(over.body);
    free(probe.body);
    free(under.body);
}

TEST(ext_http_idle_connection_is_closed_after_the_timeout) {
    ext_state *st = demo_state();
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    ext_http *h = start(&v, 0, 1, 2, 0);
    CHECK(h);
    int fd = conn_open(ext_http_port(h));
    resp r;
    /* The server's last activity on the connection (its answer) comes after t0: the close cannot come less than
     * the timeout after t0. How late it may come depends on the machine's load: it must come, that is all. */
    double t0 = now_s();
    if (fd >= 0 && send_req(fd, "GET", "/healthz", NULL)) read_resp(fd, &r);
    else r.status = 0, r.body = NULL;
    long long during = atomic_load(&ext_http_metrics(h)->http_connections);
    ssize_t k = wait_closed(fd);   /* idle from now on */
    double idle = now_s() - t0;
    close(fd);
    long long left = -1;
    WAIT_FOR((left = atomic_load(&ext_http_metrics(h)->http_connections)) == 0);
    ext_http_stop(h);
    ext_state_free(st);
    free(r.body);
    CHECK_INT(r.status, 200);
    CHECK_INT(during, 1);
    CHECK_INT(k, 0);
    CHECK_MSG(idle >= 0.9, "idle connection closed %.2f s after its request, before the 1 s timeout", idle);
    CHECK_INT(left, 0);
}

/* A Binding POST that stalls until the test lets it go, as against a slow API server (and at the latest after
 * twice the test's patience, so that a filter held up behind it times out first). */
typedef struct stall {
    _Atomic int entered;
    _Atomic bool release;
} stall;

static int stalled_bind(void *user, const char *ns, const char *name, const char *uid, const char *node,
                        const cJSON *annotations, char *err, size_t errlen) {
    stall *s = user;
    atomic_fetch_add(&s->entered, 1);
    for (double dl = now_s() + 2 * TEST_PATIENCE_MS / 1000; !atomic_load(&s->release) && now_s() < dl;) usleep(5000);
    return 0;
}

TEST(ext_http_slow_binds_do_not_hold_up_filter) {
    ext_state *st = demo_state();
    stall s = {0};
    ext_verbs v;
    ext_verbs_init(&v, st, NULL, stalled_bind, &s);
    /* two polling threads, three binds allowed: the binds outnumber the threads */
    ext_http *h = start(&v, 0, 2 * TEST_PATIENCE_MS / 1000, 2, 3);
    CHECK(h);
    char bodies[4][512], uids[4][64];
    for (int i = 0; i < 4; i++) {   /* teach the memo each pod's request, as kube-scheduler's filter would */
        char name[32];
        snprintf(name, sizeof name, "slow-%d", i);
        snprintf(uids[i], sizeof uids[i], "00000000-0000-0000-0000-00000000000%d", i);
        char *pod = pod_json(name, uids[i], 0, "\"nvidia.com/gpu\":\"1\"", NULL, NULL);
        const char *nodes[1] = {"gpu-a100-whole"};
        char *args = args_names(pod, nodes, 1);
        cJSON_Delete(call_verb(&v, ext_verb_filter, args, NULL));
        free(args);
        free(pod);
        snprintf(bodies[i], sizeof bodies[i],
                 "{\"PodName\":\"%s\",\"PodNamespace\":\"default\",\"PodUID\":\"%s\",\"Node\":\"gpu-a100-whole\"}", name,
                 uids[i]);
    }
    int bfd[4];
    for (int i = 0; i < 3; i++) {
        bfd[i] = conn_open(ext_http_port(h));
        if (bfd[i] >= 0) send_req(bfd[i], "POST", "/tessera/bind", bodies[i]);
    }
    WAIT_FOR(atomic_load(&s.entered) >= 3);
    int entered = atomic_load(&s.entered);
    /* a fourth bind while three wait: over the bind cap */
    bfd[3] = conn_open(ext_http_port(h));
    resp r4;
    if (bfd[3] >= 0 && send_req(bfd[3], "POST", "/tessera/bind", bodies[3])) read_resp(bfd[3], &r4);
    else r4.status = 0, r4.body = NULL;
    /* filter calls meanwhile, on a connection of their own: all answered while the binds still wait (one held up
     * behind them would time out before they are let go); how fast depends on the machine's load */
    char *fbody = test_fixture("extender-samples/node-cache/01-filter.request.raw.json", NULL);
    int f = conn_open(ext_http_port(h)), fok = 0;
    double worst = 0;
    for (int i = 0; i < 20; i++) {
        double t0 = now_s();
        resp r;
        if (send_req(f, "POST", "/tessera/filter", fbody)) read_resp(f, &r);
        else r.status = 0, r.body = NULL;
        double d = now_s() - t0;
        if (d > worst) worst = d;
        fok += r.status == 200;
        free(r.body);
    }
    close(f);
    free(fbody);
    bool still_waiting = atomic_load(&s.entered) == 3 && !atomic_load(&s.release);
    atomic_store(&s.release, true);
    int bok = 0;
    for (int i = 0; i < 3; i++) {
        resp r;
        read_resp(bfd[i], &r);
        if (r.status == 200 && r.body && strstr(r.body, "\"Error\":\"\"")) bok++;
        free(r.body);
        close(bfd[i]);
    }
    close(bfd[3]);
    ext_http_stop(h);
    char why[256] = "";
    bool consistent = all_nodes_consistent(st, why, sizeof why);
    ext_state_free(st);
    fprintf(stderr, "    3 binds stalled on 2 polling threads: 20 filters, slowest %.1f ms\n", worst * 1e3);
    CHECK_INT(entered, 3);
    CHECK_INT(r4.status, 503);
    CHECK_CONTAINS(r4.head, "Retry-After: 1");
    CHECK_CONTAINS(r4.body, "too many binds");
    CHECK_INT(fok, 20);
    CHECK(still_waiting);
    CHECK_INT(bok, 3);
    CHECK_MSG(consistent, "%s", why);
    free(r4.body);
}
