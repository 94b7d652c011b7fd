/* bench_connections.c -- the extender's HTTP server in a connection storm: thousands of kept-alive
 * connections at once, the latency of filter and prioritize meanwhile, the server's RSS and
 * descriptors, and how many calls over the connection cap were answered 503 (never dropped).
 * The server runs in a child process (the demo cluster, standalone), so its RSS and descriptor
 * count are its own. Prints figures; it is not a test.
 *
 *   make build/bench/bench_connections && build/bench/bench_connections
 *   BENCH_CONNS=N (default 5000: the cap and 904 over it, inside the 1024 connections past the cap that are answered 503), BENCH_CAP=N (default 4096, the server's default cap),
 *   BENCH_CALLS=N (default 4000) latency samples per verb
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "extender/http.h"
#include "kube/log.h"
#include "extender/mirror/state.h"
#include "extender/verbs.h"
#include "tests/unit/ext_proc.h"

extern const unsigned char sim_demo_cluster_json[];
extern const size_t sim_demo_cluster_json_len;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static int env_int(const char *k, int dflt) {
    const char *v = getenv(k);
    return v && atoi(v) > 0 ? atoi(v) : dflt;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strdup(buf);
}

static void proc_figures(pid_t pid, long *rss_kb, int *fds) {
    char p[64], line[256];
    *rss_kb = -1;
    *fds = 0;
    snprintf(p, sizeof p, "/proc/%d/status", (int)pid);
    FILE *f = fopen(p, "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) *rss_kb = atol(line + 6);
    if (f) fclose(f);
    snprintf(p, sizeof p, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(p);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') (*fds)++;
    if (d) closedir(d);
}

/* As kube-scheduler's Go client connects: no Nagle delay between the header and the body. */
static int conn_open(int port) { return loopback_connect(port, 20, true); }

static int send_req(int fd, const char *path, const char *body) {
    char head[256];
    size_t bl = strlen(body);
    int n = snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\n"
                                        "Content-Length: %zu\r\n\r\n", path, bl);
    if (send(fd, head, (size_t)n, MSG_NOSIGNAL) != n) return -1;
    return send(fd, body, bl, MSG_NOSIGNAL) == (ssize_t)bl ? 0 : -1;
}

/* One answer's status (0: none -- closed, reset or timed out); *closes: the server said Connection: close. */
static int read_status(int fd, int *closes) {
    char buf[65536];
    size_t len = 0;
    char *end = NULL;
    while (!end && len < sizeof buf - 1) {
        ssize_t k = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (k <= 0) return 0;
        len += (size_t)k;
        buf[len] = 0;
        end = strstr(buf, "\r\n\r\n");
    }
    if (!end) return 0;
    *closes = strcasestr(buf, "\r\nConnection: close") != NULL;
    const char *cl = strcasestr(buf, "\r\nContent-Length:");
    size_t want = cl ? strtoul(cl + 17, NULL, 10) : 0, have = len - (size_t)(end + 4 - buf);
    while (have < want) {
        ssize_t k = recv(fd, buf, want - have < sizeof buf ? want - have : sizeof buf, 0);
        if (k <= 0) return 0;
        have += (size_t)k;
    }
    return atoi(buf + 9);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[(int)(p * (n - 1) + 0.5)];
}

static void child(int cap, int wfd) {
    kube_log_set_level(KUBE_LOG_OFF);
    ext_state_config sc = {.standalone = true};
    ext_state *st = ext_state_new(&sc);
    char err[256];
    if (ext_state_load_cluster(st, (const char *)sim_demo_cluster_json, sim_demo_cluster_json_len, err, sizeof err)) {
        fprintf(stderr, "cluster: %s\n", err);
        _exit(1);
    }
    static ext_verbs v;
    ext_verbs_init(&v, st, NULL, NULL, NULL);
    ext_http_config hc = {.verbs = &v, .max_conns = cap, .conn_timeout_s = 30};
    snprintf(hc.listen, sizeof hc.listen, "127.0.0.1:0");
    snprintf(hc.prefix, sizeof hc.prefix, "/tessera");
    ext_http *h = ext_http_start(&hc, err, sizeof err);
    if (!h) {
        fprintf(stderr, "http: %s\n", err);
        _exit(1);
    }
    int port = ext_http_port(h);
    if (write(wfd, &port, sizeof port) != sizeof port) _exit(1);
    for (;;) pause();
}

int main(void) {
    int nconn = env_int("BENCH_CONNS", 5000), cap = env_int("BENCH_CAP", 4096), calls = env_int("BENCH_CALLS", 4000);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if ((long)rl.rlim_cur < nconn + 100) {
        nconn = (int)rl.rlim_cur - 100;
        printf("RLIMIT_NOFILE is %llu: %d connections\n", (unsigned long long)rl.rlim_cur, nconn);
    }
    char *filter = slurp("tests/fixtures/extender-samples/node-cache/01-filter.request.raw.json");
    char *prio = slurp("tests/fixtures/extender-samples/node-cache/02-prioritize.request.raw.json");
    if (!filter || !prio) {
        fprintf(stderr, "run from the repository root (tests/fixtures/extender-samples is read)\n");
        return 1;
    }
    int pfd[2];
    if (pipe(pfd) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) child(cap, pfd[1]);
    int port = 0;
    if (read(pfd[0], &port, sizeof port) != sizeof port) return 1;
    long rss[5];
    int fds[5];
    proc_figures(pid, &rss[0], &fds[0]);

    /* 1. the storm: every connection opened and a filter sent on each before any answer is read */
    int *c = malloc(sizeof *c * (size_t)nconn), opened = 0;
    double t0 = now_s();
    for (int i = 0; i < nconn; i++) opened += (c[i] = conn_open(port)) >= 0;
    for (int i = 0; i < nconn; i++)
        if (c[i] >= 0 && send_req(c[i], "/tessera/filter", filter) != 0) { close(c[i]); c[i] = -1; }
    int ok = 0, shed = 0, failed = 0;
    for (int i = 0; i < nconn; i++) {
        int closes = 0, st = c[i] >= 0 ? read_status(c[i], &closes) : 0;
        if (st == 200) ok++;
        else if (st == 503) shed++;
        else failed++;
        if (st != 200 || closes) {   /* an over-cap connection is closed by the server after its 503 */
            if (c[i] >= 0) close(c[i]);
            c[i] = -1;
        }
    }
    double storm = now_s() - t0;
    proc_figures(pid, &rss[1], &fds[1]);
    int held = 0;
    for (int i = 0; i < nconn; i++) held += c[i] >= 0;

    /* 2. latency of filter and prioritize while the kept-alive connections stay open: rotate over them */
    double *lf = malloc(sizeof *lf * (size_t)calls), *lp = malloc(sizeof *lp * (size_t)calls);
    int nf = 0, np = 0, bad = 0, k = 0;
    for (int i = 0; i < 2 * calls; i++) {
        while (c[k % nconn] < 0) k++;
        int fd = c[k++ % nconn], closes = 0;
        bool isf = i % 2 == 0;
        double s = now_s();
        int st = send_req(fd, isf ? "/tessera/filter" : "/tessera/prioritize", isf ? filter : prio) == 0
                     ? read_status(fd, &closes) : 0;
        double d = now_s() - s;
        if (st != 200) {
            if (!bad) fprintf(stderr, "first failure: status %d errno %d after %.3f s, call %d\n", st, errno, d, i);
            bad++;
            continue;
        }
        if (isf) lf[nf++] = d * 1e3;
        else lp[np++] = d * 1e3;
    }
    proc_figures(pid, &rss[2], &fds[2]);

    /* 3. everything closes: the server gives its descriptors back */
    for (int i = 0; i < nconn; i++)
        if (c[i] >= 0) close(c[i]);
    for (double dl = now_s() + 10; now_s() < dl; usleep(50000)) {
        proc_figures(pid, &rss[3], &fds[3]);
        if (fds[3] <= fds[0]) break;
    }
    long rss_later = -1;   /* the allocator hands freed memory back over seconds, not at once */
    int fds_later = 0;
    sleep(12);
    proc_figures(pid, &rss_later, &fds_later);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);

    printf("bench_connections: %d connections at once, server cap %d (MHD poll, thread pool)\n", nconn, cap);
    printf("  storm: %d opened, a filter on each: %d answered 200, %d answered 503 + Retry-After, %d failed"
           " (dropped or reset), %.2f s\n", opened, ok, shed, failed, storm);
    printf("  held: %d kept-alive connections\n", held);
    if (nf && np)
        printf("  latency meanwhile (ms, %d calls each, rotating over the held connections): filter p50 %.3f p99 %.3f"
               " | prioritize p50 %.3f p99 %.3f | failed %d\n", calls, pct(lf, nf, .5), pct(lf, nf, .99),
               pct(lp, np, .5), pct(lp, np, .99), bad);
    printf("  server RSS (MiB) / fds: start %.1f / %d, storm held %.1f / %d, after latency %.1f / %d, all closed %.1f / %d\n",
           rss[0] / 1024.0, fds[0], rss[1] / 1024.0, fds[1], rss[2] / 1024.0, fds[2], rss[3] / 1024.0, fds[3]);
    printf("  12 s after all closed: RSS %.1f MiB, %d fds\n", rss_later / 1024.0, fds_later);
    if (held)
        printf("  per held connection: %.1f KiB RSS\n", (double)(rss[1] - rss[0]) / held);
    free(c);
    free(lf);
    free(lp);
    free(filter);
    free(prio);
    return failed ? 1 : 0;
}
