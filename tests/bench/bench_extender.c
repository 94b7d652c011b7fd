/* bench_extender.c -- the real tessera-extender binary, driven over loopback with
 * keep-alive connections, as kube-scheduler drives it. Prints figures; it is not a test.
 *
 *   A  nodeCacheCapable, 5,000 nodes x 8 GPUs, one fractional pod: filter + prioritize
 *      round trip, p50/p99, with 500 candidate names (what kube-scheduler sends for 5,000
 *      nodes at its default percentageOfNodesToScore) and with all 5,000; warm (the same
 *      pod shape again: the answer cache serves it) and cold (a new shape every call)
 *      (target p50 <= 1 ms, p99 <= 3 ms)
 *   B  full Node objects in the body, 1,000 nodes: filter p50 (target <= 50 ms)
 *   C  sustained filter throughput, 100 candidate names, 1 and 4 clients (target >= 3,000/s)
 *   D  cluster mode against the fake API server (tests/support): 5,000 nodes, 40,000 bound
 *      pods; time from start to /readyz, then RSS (target <= 150 MiB)
 *
 *   make build/bench/bench_extender && build/bench/bench_extender      (BENCH_ONLY=A|B|C|D)
 *
 * The extender binary is found next to the bench's directory (build/tessera-extender), or
 * at $TESSERA_EXTENDER. Cluster files are generated into a temporary directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "tests/support/fake_apiserver.h"

#define NODES 5000
#define GPUS 8

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, int n, double p) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static void die(const char *what) {
    fprintf(stderr, "bench_extender: %s\n", what);
    exit(1);
}

/* ------------------------------------------------------------ a growable string */

typedef struct buf { char *p; size_t len, cap; } buf;

static void bput(buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->cap + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) die("out of memory");
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void bstr(buf *b, const char *s) { bput(b, s, strlen(s)); }

static void bf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bf(buf *b, const char *fmt, ...) {
    char tmp[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) die("format overflow");
    bput(b, tmp, (size_t)n);
}

/* ------------------------------------------------------------ generated objects */

/* A node as GPU feature discovery labels an 8 x A100-80GB node. With full set, the rest
 * of what the apiserver returns for a Node (conditions, addresses, node info, images), so
 * that bodies have a realistic size (~5 KB a node). */
static void node_json(buf *b, int i, bool full) {
    bf(b, "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"node-%05d\",\"uid\":\"node-uid-%05d\","
          "\"resourceVersion\":\"%d\",\"labels\":{\"kubernetes.io/hostname\":\"node-%05d\","
          "\"kubernetes.io/arch\":\"amd64\",\"kubernetes.io/os\":\"linux\",\"topology.kubernetes.io/zone\":\"zone-%d\","
          "\"nvidia.com/gpu.present\":\"true\",\"nvidia.com/cuda.driver-version.full\":\"550.54.15\","
          "\"nvidia.com/gpu.mode\":\"compute\",\"nvidia.com/gpu.product\":\"NVIDIA-A100-SXM4-80GB\","
          "\"nvidia.com/gpu.count\":\"%d\",\"nvidia.com/gpu.memory\":\"81920\",\"nvidia.com/gpu.family\":\"ampere\","
          "\"nvidia.com/gpu.compute.major\":\"8\",\"nvidia.com/gpu.compute.minor\":\"0\",\"nvidia.com/gpu.replicas\":\"1\","
          "\"nvidia.com/gpu.sharing-strategy\":\"none\",\"nvidia.com/mig.capable\":\"true\",\"nvidia.com/mps.capable\":\"false\"}",
       i, i, 1000 + i, i, i % 3, GPUS);
    if (full)
        bf(b, ",\"annotations\":{\"node.alpha.kubernetes.io/ttl\":\"0\",\"volumes.kubernetes.io/controller-managed-attach-detach\":\"true\","
              "\"nfd.node.kubernetes.io/feature-labels\":\"cpu-cpuid.ADX,cpu-cpuid.AESNI,cpu-cpuid.AVX,cpu-cpuid.AVX2,cpu-cpuid.AVX512BW\"},"
              "\"creationTimestamp\":\"2025-05-14T18:00:00Z\"");
    bf(b, "},\"spec\":{\"podCIDR\":\"10.%d.%d.0/24\"},\"status\":{\"capacity\":{\"cpu\":\"128\",\"memory\":\"1056561424Ki\","
          "\"pods\":\"110\",\"ephemeral-storage\":\"1844284980Ki\",\"nvidia.com/gpu\":\"%d\"},"
          "\"allocatable\":{\"cpu\":\"127500m\",\"memory\":\"1055410448Ki\",\"pods\":\"110\","
          "\"ephemeral-storage\":\"1699713474258\",\"nvidia.com/gpu\":\"%d\"}",
       i / 250, i % 250, GPUS, GPUS);
    if (full) {
        static const char *conds[] = {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"};
        bstr(b, ",\"conditions\":[");
        for (int k = 0; k < 4; k++)
            bf(b, "%s{\"type\":\"%s\",\"status\":\"%s\",\"lastHeartbeatTime\":\"2025-05-14T18:01:00Z\","
                  "\"lastTransitionTime\":\"2025-05-01T00:00:00Z\",\"reason\":\"Kubelet%s\",\"message\":\"kubelet reports %s\"}",
               k ? "," : "", conds[k], k == 3 ? "True" : "False", conds[k], conds[k]);
        bf(b, "],\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.1.%d.%d\"},{\"type\":\"Hostname\",\"address\":\"node-%05d\"}],"
              "\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":10250}},"
              "\"nodeInfo\":{\"machineID\":\"3f2a%028d\",\"systemUUID\":\"4c4c4544-%012d\",\"bootID\":\"b00%029d\","
              "\"kernelVersion\":\"5.15.0-105-generic\",\"osImage\":\"Ubuntu 22.04.4 LTS\",\"containerRuntimeVersion\":\"containerd://1.7.13\","
              "\"kubeletVersion\":\"v1.30.1\",\"kubeProxyVersion\":\"v1.30.1\",\"operatingSystem\":\"linux\",\"architecture\":\"amd64\"},"
              "\"images\":[",
           i / 250, i % 250, i, i, i, i);
        for (int k = 0; k < 16; k++)
            bf(b, "%s{\"names\":[\"registry.example.com/ml/training-image-%d@sha256:%064d\",\"registry.example.com/ml/training-image-%d:v1.%d\"],"
                  "\"sizeBytes\":%d}",
               k ? "," : "", k, k, k, k, 100000000 + k);
        bstr(b, "]");
    }
    bstr(b, "}}");
}

/* One fractional pod: GPU memory (MiB) and 30 % of the SMs. */
#define FRACTIONAL_POD_FMT                                                                                        \
    "{\"metadata\":{\"name\":\"infer-7\",\"namespace\":\"ml\",\"uid\":\"6f1c2a9e-0000-4000-8000-000000000007\","     \
    "\"annotations\":{}},\"spec\":{\"schedulerName\":\"tessera-scheduler\",\"priority\":0,\"containers\":[{\"name\":\"main\","   \
    "\"image\":\"registry.example.com/ml/infer:v3\",\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"8Gi\"},"      \
    "\"limits\":{\"nvidia.com/gpumem\":\"%d\",\"nvidia.com/gpucores\":\"30\"}}}]}}"
#define FRACTIONAL_POD_MIB 10240

/* {"Pod":..., "Nodes":null, "NodeNames":[node-00000 .. node-(n-1)]}, the pod asking mem_mib
 * of GPU memory (another amount is another request shape). */
static char *args_names_mem(int n, int mem_mib, size_t *len) {
    buf b = {0};
    bstr(&b, "{\"Pod\":");
    bf(&b, FRACTIONAL_POD_FMT, mem_mib);
    bstr(&b, ",\"Nodes\":null,\"NodeNames\":[");
    for (int i = 0; i < n; i++) bf(&b, "%s\"node-%05d\"", i ? "," : "", i);
    bstr(&b, "]}");
    *len = b.len;
    return b.p;
}

static char *args_names(int n, size_t *len) { return args_names_mem(n, FRACTIONAL_POD_MIB, len); }

static char *args_nodes(int n, size_t *len) {
    buf b = {0};
    bstr(&b, "{\"Pod\":");
    bf(&b, FRACTIONAL_POD_FMT, FRACTIONAL_POD_MIB);
    bstr(&b, ",\"Nodes\":{\"metadata\":{},\"items\":[");
    for (int i = 0; i < n; i++) {
        if (i) bstr(&b, ",");
        node_json(&b, i, true);
    }
    bstr(&b, "]},\"NodeNames\":null}");
    *len = b.len;
    return b.p;
}

static char tmpdir[64];

static const char *cluster_file(int n) {
    static char path[128];
    snprintf(path, sizeof path, "%s/cluster-%d.json", tmpdir, n);
    if (access(path, R_OK) == 0) return path;
    buf b = {0};
    bstr(&b, "{\"kind\":\"NodeList\",\"apiVersion\":\"v1\",\"items\":[");
    for (int i = 0; i < n; i++) {
        if (i) bstr(&b, ",");
        node_json(&b, i, false);
    }
    bstr(&b, "]}");
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b.p, 1, b.len, f) != b.len || fclose(f) != 0) die("cannot write the cluster file");
    free(b.p);
    return path;
}

/* ------------------------------------------------------------ the extender process */

static char ext_bin[512];
static pid_t ext_pid;
static int ext_port;

/* Copies the extender's warnings and errors to our stderr until it exits. */
static void *drain(void *arg) {
    FILE *f = arg;
    char line[1024];
    while (fgets(line, sizeof line, f))
        if (strstr(line, "level=error") || strstr(line, "level=warn")) fputs(line, stderr);
    fclose(f);
    return NULL;
}

/* Start the extender with the given flags (NULL-terminated); wait until /healthz would
 * answer, i.e. until it printed its URL (standalone) or logged event=serving (cluster). */
static void ext_start(const char *const *flags) {
    int out[2];
    if (pipe(out) != 0) die("pipe");
    ext_pid = fork();
    if (ext_pid < 0) die("fork");
    if (ext_pid == 0) {
        const char *argv[32];
        int n = 0;
        argv[n++] = ext_bin;
        argv[n++] = "--listen";
        argv[n++] = "127.0.0.1:0";
        argv[n++] = "--log-level";
        argv[n++] = "info";
        for (int i = 0; flags[i] && n < 30; i++) argv[n++] = flags[i];
        argv[n] = NULL;
        dup2(out[1], 2);   /* the serving line is on stderr in both modes */
        close(out[0]);
        close(out[1]);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        execv(ext_bin, (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    FILE *f = fdopen(out[0], "r");
    char line[1024];
    ext_port = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = strstr(line, "event=serving listen=");
        if (p && (p = strstr(p, " port="))) {
            ext_port = atoi(p + 6);
            break;
        }
    }
    if (!ext_port) die("the extender did not start (see its output above)");
    /* Keep draining its log so it never blocks on a full pipe. */
    pthread_t th;
    if (pthread_create(&th, NULL, drain, f) != 0) die("pthread_create");
    pthread_detach(th);
}

static long ext_rss_kib(const char *field) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)ext_pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    size_t fl = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl)) v = atol(line + fl + 1);
    if (f) fclose(f);
    return v;
}

static void ext_stop(void) {
    kill(ext_pid, SIGTERM);
    int st;
    waitpid(ext_pid, &st, 0);
}

/* ------------------------------------------------------------ a keep-alive HTTP/1.1 client */

typedef struct conn { int fd; buf in; } conn;

static void conn_open(conn *c) {
    memset(c, 0, sizeof *c);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)ext_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) die("connect");
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void conn_close(conn *c) {
    close(c->fd);
    free(c->in.p);
}

/* One request; returns the status, *body points into the connection's buffer. */
static int call(conn *c, const char *method, const char *path, const char *body, size_t len, const char **resp,
                size_t *rlen) {
    char hdr[256];
    int hl = snprintf(hdr, sizeof hdr, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n", method, path, len);
    struct iovec io[2] = {{hdr, (size_t)hl}, {(void *)body, len}};
    size_t left = (size_t)hl + len;
    int k = 0;
    while (left > 0) {
        ssize_t w = writev(c->fd, io + k, 2 - k);
        if (w <= 0) die("write");
        left -= (size_t)w;
        while (k < 2 && (size_t)w >= io[k].iov_len) { w -= (ssize_t)io[k].iov_len; io[k].iov_len = 0; k++; }
        if (k < 2) { io[k].iov_base = (char *)io[k].iov_base + w; io[k].iov_len -= (size_t)w; }
    }
    c->in.len = 0;
    size_t need = 0, hend = 0;
    for (;;) {
        if (c->in.cap < c->in.len + 65536) {
            c->in.cap = (c->in.len + 65536) * 2;
            c->in.p = realloc(c->in.p, c->in.cap);
        }
        ssize_t r = read(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len - 1);
        if (r <= 0) die("read: connection closed");
        c->in.len += (size_t)r;
        c->in.p[c->in.len] = 0;
        if (!hend) {
            char *e = strstr(c->in.p, "\r\n\r\n");
            if (!e) continue;
            hend = (size_t)(e - c->in.p) + 4;
            const char *cl = strcasestr(c->in.p, "\r\nContent-Length:");
            if (!cl || cl > e) die("reply without Content-Length");
            need = hend + strtoul(cl + 17, NULL, 10);
        }
        if (c->in.len >= need) break;
    }
    *resp = c->in.p + hend;
    *rlen = need - hend;
    return atoi(c->in.p + 9);
}

static void expect_ok(int status, const char *what, const char *resp) {
    if (status != 200) {
        fprintf(stderr, "%s: HTTP %d: %.300s\n", what, status, resp);
        die("unexpected reply");
    }
}

/* ------------------------------------------------------------ A */

/* Warm: the same pod again and again, as kube-scheduler asks about a Deployment's
 * replicas; the answer cache (extender/README.md) serves every node. Cold: each call a
 * new request shape (64 GPU-memory sizes in turn), so every node is computed afresh. */
#define COLD_SHAPES 64

static void bench_a(void) {
    const char *flags[] = {"--cluster", cluster_file(NODES), NULL};
    double t0 = now_ms();
    ext_start(flags);
    printf("A  standalone, %d nodes x %d GPUs loaded and serving in %.0f ms\n", NODES, GPUS, now_ms() - t0);
    conn c;
    conn_open(&c);
    static const int ncand[2] = {500, NODES};
    for (int k = 0; k < 2; k++)
        for (int cold = 0; cold < 2; cold++) {
            size_t len[COLD_SHAPES];
            char *body[COLD_SHAPES];
            int nb = cold ? COLD_SHAPES : 1;
            for (int s = 0; s < nb; s++) body[s] = args_names_mem(ncand[k], FRACTIONAL_POD_MIB + (cold ? 1 + s : 0), &len[s]);
            const int iters = ncand[k] == NODES ? 300 : 1000;
            double *rt = malloc(sizeof *rt * iters), *tf = malloc(sizeof *tf * iters), *tp = malloc(sizeof *tp * iters);
            for (int i = -20; i < iters; i++) {   /* 20 warm-up calls */
                const char *resp;
                size_t rl;
                int s = (i + 20) % nb;
                double a = now_ms();
                int st = call(&c, "POST", "/tessera/filter", body[s], len[s], &resp, &rl);
                expect_ok(st, "filter", resp);
                if (i == 0 && !strstr(resp, "\"node-00000\"")) die("filter kept no node");
                double b = now_ms();
                st = call(&c, "POST", "/tessera/prioritize", body[s], len[s], &resp, &rl);
                expect_ok(st, "prioritize", resp);
                double e = now_ms();
                if (i >= 0) { rt[i] = e - a; tf[i] = b - a; tp[i] = e - b; }
            }
            printf("A  nodeCacheCapable, %4d candidate names, %s: filter+prioritize p50 %.3f ms p99 %.3f ms "
                   "(filter p50 %.3f, prioritize p50 %.3f; %d round trips, body %zu B)\n",
                   ncand[k], cold ? "cold (new shape each call)" : "warm (same pod shape)", pct(rt, iters, 0.5),
                   pct(rt, iters, 0.99), pct(tf, iters, 0.5), pct(tp, iters, 0.5), iters, len[0]);
            free(rt);
            free(tf);
            free(tp);
            for (int s = 0; s < nb; s++) free(body[s]);
        }
    conn_close(&c);
    ext_stop();
}

/* ------------------------------------------------------------ B */

static void bench_b(void) {
    const int n = 1000;
    const char *flags[] = {"--cluster", cluster_file(NODES), NULL};
    ext_start(flags);
    size_t len;
    char *body = args_nodes(n, &len);
    conn c;
    conn_open(&c);
    const int iters = 40;
    double *t = malloc(sizeof *t * iters);
    for (int i = -3; i < iters; i++) {
        const char *resp;
        size_t rl;
        double a = now_ms();
        int s = call(&c, "POST", "/tessera/filter", body, len, &resp, &rl);
        expect_ok(s, "filter", resp);
        if (i >= 0) t[i] = now_ms() - a;
    }
    printf("B  full Node objects, %d nodes in the body (%.1f MB): filter p50 %.2f ms p99 %.2f ms (%d calls)\n", n,
           (double)len / 1e6, pct(t, iters, 0.5), pct(t, iters, 0.99), iters);
    free(t);
    free(body);
    conn_close(&c);
    ext_stop();
}

/* ------------------------------------------------------------ C */

typedef struct client { const char *body; size_t len; double until; long done; } client;

static void *client_run(void *arg) {
    client *cl = arg;
    conn c;
    conn_open(&c);
    while (now_ms() < cl->until) {
        const char *resp;
        size_t rl;
        int s = call(&c, "POST", "/tessera/filter", cl->body, cl->len, &resp, &rl);
        expect_ok(s, "filter", resp);
        cl->done++;
    }
    conn_close(&c);
    return NULL;
}

static void bench_c(void) {
    const char *flags[] = {"--cluster", cluster_file(NODES), NULL};
    ext_start(flags);
    size_t len;
    char *body = args_names(100, &len);
    static const int nclients[2] = {1, 4};
    for (int k = 0; k < 2; k++) {
        const double secs = 3;
        client cl[4];
        pthread_t th[4];
        double t0 = now_ms();
        for (int i = 0; i < nclients[k]; i++) {
            cl[i] = (client){body, len, t0 + secs * 1000, 0};
            pthread_create(&th[i], NULL, client_run, &cl[i]);
        }
        long total = 0;
        for (int i = 0; i < nclients[k]; i++) {
            pthread_join(th[i], NULL);
            total += cl[i].done;
        }
        double el = (now_ms() - t0) / 1000;
        printf("C  filter, 100 candidate names, %d client%s: %.0f requests/s (%ld in %.1f s)\n", nclients[k],
               nclients[k] > 1 ? "s" : "", (double)total / el, total, el);
    }
    free(body);
    ext_stop();
}

/* ------------------------------------------------------------ D */

static void bench_d(void) {
    const int pods = 40000;
    char err[256];
    fake_api *api = fake_api_start(0, err, sizeof err);
    if (!api) die(err);
    double t0 = now_ms();
    buf b = {0};
    for (int i = 0; i < NODES; i++) {
        b.len = 0;
        node_json(&b, i, true);
        if (fake_api_put(api, "nodes", b.p) < 0) die("fake_api_put node");
    }
    /* 8 pods a node: each takes one GPU's worth of a fraction or a whole GPU. */
    for (int i = 0; i < pods; i++) {
        b.len = 0;
        int node = i % NODES, k = i / NODES;
        bf(&b, "{\"metadata\":{\"name\":\"job-%05d\",\"namespace\":\"team-%d\",\"uid\":\"pod-uid-%06d\","
               "\"labels\":{\"app\":\"job-%05d\",\"team\":\"team-%d\"}},"
               "\"spec\":{\"nodeName\":\"node-%05d\",\"schedulerName\":\"tessera-scheduler\",\"priority\":0,"
               "\"containers\":[{\"name\":\"main\",\"image\":\"registry.example.com/ml/train:v1\","
               "\"resources\":{\"requests\":{\"cpu\":\"4\",\"memory\":\"32Gi\"},\"limits\":{%s}}}]},"
               "\"status\":{\"phase\":\"Running\",\"podIP\":\"10.2.%d.%d\"}}",
           i, i % 20, i, i, i % 20, node,
           k % 2 ? "\"nvidia.com/gpu\":\"1\"" : "\"nvidia.com/gpumem\":\"20480\",\"nvidia.com/gpucores\":\"25\"",
           (i / 250) % 250, i % 250);
        if (fake_api_put(api, "pods", b.p) < 0) die("fake_api_put pod");
    }
    free(b.p);
    printf("D  fake API server filled: %d nodes, %d pods in %.0f ms\n", NODES, pods, now_ms() - t0);
    char url[128];
    fake_api_url(api, url, sizeof url);
    const char *flags[] = {"--kube-api", url, "--webhook-listen", "", NULL};
    t0 = now_ms();
    ext_start(flags);
    conn c;
    conn_open(&c);
    double synced = -1;
    while (now_ms() - t0 < 120000) {
        const char *resp;
        size_t rl;
        if (call(&c, "GET", "/readyz", "", 0, &resp, &rl) == 200) { synced = now_ms() - t0; break; }
        usleep(20000);
    }
    if (synced < 0) die("the extender did not sync within 120 s");
    /* RSS right after the sync and after jemalloc's background purge (about a second):
     * measured before any /metrics or /debug/state call, whose replies for 5,000 nodes
     * are tens of MB themselves. */
    long rss_sync = ext_rss_kib("VmRSS:");
    int settle = getenv("BENCH_D_SETTLE") ? atoi(getenv("BENCH_D_SETTLE")) : 3;
    sleep((unsigned)settle);
    long rss = ext_rss_kib("VmRSS:"), hwm = ext_rss_kib("VmHWM:");
    const char *resp;
    size_t rl;
    int s = call(&c, "GET", "/metrics", "", 0, &resp, &rl);
    expect_ok(s, "/metrics", resp);
    const char *bound = strstr(resp, "tessera_pods{phase=\"bound\"} ");
    printf("D  cluster mode, %d nodes, %d pods: synced (readyz) in %.0f ms; RSS %.1f MiB at sync, %.1f MiB %d s later "
           "(peak %.1f MiB); bound pods in the cache %ld\n",
           NODES, pods, synced, rss_sync / 1024.0, rss / 1024.0, settle, hwm / 1024.0,
           bound ? strtol(bound + strlen("tessera_pods{phase=\"bound\"} "), NULL, 10) : -1L);
    conn_close(&c);
    ext_stop();
    fake_api_free(api);
}

int main(int argc, char **argv) {
    const char *env = getenv("TESSERA_EXTENDER");
    if (env) snprintf(ext_bin, sizeof ext_bin, "%s", env);
    else {
        snprintf(ext_bin, sizeof ext_bin, "%s", argv[0]);
        char *slash = strrchr(ext_bin, '/');
        if (slash) *slash = 0;
        else snprintf(ext_bin, sizeof ext_bin, ".");
        strncat(ext_bin, "/../tessera-extender", sizeof ext_bin - strlen(ext_bin) - 1);
    }
    if (access(ext_bin, X_OK) != 0) {
        fprintf(stderr, "bench_extender: %s not found; run make first or set TESSERA_EXTENDER\n", ext_bin);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tessera-bench-XXXXXX");
    if (!mkdtemp(tmpdir)) die("mkdtemp");
    const char *only = getenv("BENCH_ONLY");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    printf("bench_extender: %s, %ld CPUs, loopback, keep-alive\n", ext_bin, cpus);
    fflush(stdout);
    if (!only || strchr(only, 'A')) bench_a();
    if (!only || strchr(only, 'B')) bench_b();
    if (!only || strchr(only, 'C')) bench_c();
    if (!only || strchr(only, 'D')) bench_d();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "bench_extender: could not remove %s\n", tmpdir);
    return 0;
}
