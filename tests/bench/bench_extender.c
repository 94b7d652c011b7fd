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
 * Only when BENCH_ONLY names them (minutes each), and with $TESSERA_EXTENDER_OLD (an older build, e.g. one built
 * in `git worktree add ../old COMMIT`) measured beside this one in the same run, cells alternated:
 *   E  memory: 1,000 and 5,000 nodes x 8 GPUs as GPU feature discovery labels them, and the same with every
 *      node's GPUs also published as a ResourceSlice, synced from the fake API server; RSS after the sync,
 *      after 10,000 pods filtered, bound through the extender and deleted (BENCH_CHURN), bytes per node
 *      (targets at 5,000 nodes: <= 64 MiB without DRA, <= 96 MiB with slices, flat across the churn)
 *   F  fgd and fgd-pack prioritize over 5,000 names with the answer cache defeated (64 request shapes in
 *      turn): the extender's CPU time per call (/proc/PID/stat, in cells of BENCH_F_CALLS = 384 calls: a
 *      clock tick is then 0.5 % of a cell)
 *   G  8 keep-alive connections of cheap calls (a warm filter of 100 names): requests/s, CPU per request
 *   H  what GPU topology costs (issue 30): 5,000 nodes alternating a DGX A100 and an 8-GPU PCIe server with NVLink
 *      pairs, whose tessera.io/gpus annotation has the `topo` rows, served by one extender, and the same nodes
 *      without them (the annotation's index, uuid and pci only: topology unknown) by another; binpack and fgd-pack,
 *      prioritize and filter over all 5,000 names, cold (pods on 1..5 whole GPUs in turn: the answer cache keeps
 *      four shapes a node, so none is served from it) and warm (one pod again: every answer from the cache). The
 *      extender's CPU per call (/proc/PID/stat), cells alternated between the two, medians over the cells, and
 *      with/without (target <= 1.2). A cell is as many calls as take about BENCH_H_MS (default 1000) ms of CPU.
 *      The pods carry what tessera's webhook declares for them on this cluster (README, Quotas), which filter
 *      checks each node against; and the webhook's own latency, sizing a pod over the 5,000 nodes, is printed.
 *      Both extenders run on the last CPU and the bench on the first (BENCH_H_PIN=0: where the kernel puts
 *      them): unpinned, where the scheduler happened to put an extender's threads beside the client moved one
 *      cell's CPU per call by up to 1.7x in either extender alike, more than any difference of the code.
 *   BENCH_REPS (E, default 3) and BENCH_CELLS (F, G, H, default 7): medians over that many.
 *
 *   make build/bench/bench_extender && build/bench/bench_extender      (BENCH_ONLY=A|B|C|D|E|F|G|H)
 *   BENCH_ONLY=EFG TESSERA_EXTENDER_OLD=../old/build/tessera-extender build/bench/bench_extender
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
#include <sched.h>
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

/* path: a NodeList of n nodes, node(b, i, flag) each, written unless it is there already. */
static const char *node_list_file(const char *path, int n, void (*node)(buf *, int, bool), bool flag) {
    if (access(path, R_OK) == 0) return path;
    buf b = {0};
    bstr(&b, "{\"kind\":\"NodeList\",\"apiVersion\":\"v1\",\"items\":[");
    for (int i = 0; i < n; i++) {
        if (i) bstr(&b, ",");
        node(&b, i, flag);
    }
    bstr(&b, "]}");
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b.p, 1, b.len, f) != b.len || fclose(f) != 0) die("cannot write the cluster file");
    free(b.p);
    return path;
}

static const char *cluster_file(int n) {
    static char path[128];
    snprintf(path, sizeof path, "%s/cluster-%d.json", tmpdir, n);
    return node_list_file(path, n, node_json, false);
}

/* ------------------------------------------------------------ the extender process */

static char ext_bin[512];
static pid_t ext_pid;
static int ext_port;

/* One extender process (sections E-G run two builds side by side: see bench_compare). */
typedef struct xproc { pid_t pid; int port; } xproc;

/* Copies the extender's warnings and errors to our stderr until it exits. */
static void *drain(void *arg) {
    FILE *f = arg;
    char line[1024];
    while (fgets(line, sizeof line, f))
        if (strstr(line, "level=error") || strstr(line, "level=warn")) fputs(line, stderr);
    fclose(f);
    return NULL;
}

/* Start extender binary bin with the given flags (NULL-terminated); wait until /healthz would
 * answer, i.e. until it printed its URL (standalone) or logged event=serving (cluster). */
/* >= 0: the CPU xstart pins the extenders it starts to (H; bench_pin) */
static int server_cpu = -1;

static xproc xstart(const char *bin, const char *const *flags) {
    int out[2];
    if (pipe(out) != 0) die("pipe");
    xproc x = {fork(), 0};
    if (x.pid < 0) die("fork");
    if (x.pid == 0) {
        const char *argv[40];
        int n = 0;
        argv[n++] = bin;
        argv[n++] = "--listen";
        argv[n++] = "127.0.0.1:0";
        argv[n++] = "--log-level";
        argv[n++] = "info";
        for (int i = 0; flags[i] && n < 38; i++) argv[n++] = flags[i];
        argv[n] = NULL;
        if (server_cpu >= 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(server_cpu, &one);
            if (sched_setaffinity(0, sizeof one, &one) != 0) _exit(126);
        }
        dup2(out[1], 2);   /* the serving line is on stderr in both modes */
        close(out[0]);
        close(out[1]);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    FILE *f = fdopen(out[0], "r");
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char *p = strstr(line, "event=serving listen=");
        if (p && (p = strstr(p, " port="))) {
            x.port = atoi(p + 6);
            break;
        }
    }
    if (!x.port) die("the extender did not start (see its output above)");
    /* Keep draining its log so it never blocks on a full pipe. */
    pthread_t th;
    if (pthread_create(&th, NULL, drain, f) != 0) die("pthread_create");
    pthread_detach(th);
    return x;
}

static void ext_start(const char *const *flags) {
    xproc x = xstart(ext_bin, flags);
    ext_pid = x.pid;
    ext_port = x.port;
}

static long xrss_kib(pid_t pid, const char *field) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    size_t fl = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl)) v = atol(line + fl + 1);
    if (f) fclose(f);
    return v;
}

static long ext_rss_kib(const char *field) { return xrss_kib(ext_pid, field); }

/* CPU time (user + system) the process has used so far, in ms. */
static double xcpu_ms(pid_t pid) {
    char path[64], line[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(line, sizeof line, f)) die("cannot read /proc/PID/stat");
    fclose(f);
    char *p = strrchr(line, ')');   /* the command name may hold spaces */
    unsigned long ut = 0, stm = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &stm) != 2)
        die("cannot parse /proc/PID/stat");
    return (double)(ut + stm) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

static void xstop(xproc x) {
    kill(x.pid, SIGTERM);
    int st;
    waitpid(x.pid, &st, 0);
}

static void ext_stop(void) { xstop((xproc){ext_pid, ext_port}); }

/* ------------------------------------------------------------ a keep-alive HTTP/1.1 client */

typedef struct conn { int fd; buf in; } conn;

static void conn_open_port(conn *c, int port) {
    memset(c, 0, sizeof *c);
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) die("connect");
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void conn_open(conn *c) { conn_open_port(c, ext_port); }

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

/* One client of C and G: the same filter on its own connection until the deadline. */
typedef struct client { int port; const char *body; size_t len; double until; long done; } client;

static void *client_run(void *arg) {
    client *cl = arg;
    conn c;
    conn_open_port(&c, cl->port);
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
            cl[i] = (client){ext_port, body, len, t0 + secs * 1000, 0};
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

/* ------------------------------------------------------------ E, F, G: this build beside another */

/* $TESSERA_EXTENDER_OLD, an older build measured in the same run, cells alternated with this one's (timings on
 * a shared machine drift; alternating keeps the drift out of the ratio). */
static char old_bin[512];

static int nbins(void) { return old_bin[0] ? 2 : 1; }
static const char *bin_at(int k) { return k ? old_bin : ext_bin; }
static const char *bin_label(int k) { return k ? "old" : "new"; }

static int env_int(const char *k, int dflt) {
    const char *v = getenv(k);
    return v && atoi(v) > 0 ? atoi(v) : dflt;
}

static double median(double *v, int n) { return n ? pct(v, n, 0.5) : -1; }

/* Whether a build knows word (a flag or a policy name): its --help mentions it. An older build may not. */
static bool bin_knows(const char *bin, const char *word) {
    char cmd[700], line[1024];
    snprintf(cmd, sizeof cmd, "'%s' --help 2>&1", bin);
    FILE *p = popen(cmd, "r");
    bool found = false;
    while (p && fgets(line, sizeof line, p))
        if (strstr(line, word)) found = true;
    if (p) pclose(p);
    return found;
}

/* The same 8 GPUs as node_json's, as NVIDIA's DRA driver publishes them: one ResourceSlice per node, one pool,
 * devices gpu-<minor> (the minor is how tessera matches them to the GPUs the labels describe). */
static void slice_json(buf *b, int i) {
    bf(b, "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":\"node-%05d-gpu.nvidia.com\"},"
          "\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"node-%05d\",\"pool\":{\"name\":\"node-%05d\","
          "\"generation\":1,\"resourceSliceCount\":1},\"devices\":[",
       i, i, i);
    for (int g = 0; g < GPUS; g++)
        bf(b, "%s{\"name\":\"gpu-%d\",\"attributes\":{\"type\":{\"string\":\"gpu\"},\"uuid\":{\"string\":\"GPU-%05d-%04d\"},"
              "\"productName\":{\"string\":\"NVIDIA A100-SXM4-80GB\"},\"index\":{\"int\":%d},\"minor\":{\"int\":%d}},"
              "\"capacity\":{\"memory\":{\"value\":\"80Gi\"}}}",
           g ? "," : "", g, i, g, g, g);
    bstr(b, "]}}");
}

static void wait_ready(int port, double limit_ms) {
    conn c;
    conn_open_port(&c, port);
    double t0 = now_ms();
    for (;;) {
        const char *resp;
        size_t rl;
        if (call(&c, "GET", "/readyz", "", 0, &resp, &rl) == 200) break;
        if (now_ms() - t0 > limit_ms) die("the extender did not sync in time");
        usleep(20000);
    }
    conn_close(&c);
}

typedef struct mem_fig { double sync_mib, churn_mib, sync_s, churn_s; } mem_fig;

/* One cell of E: n nodes (and with slices their ResourceSlices) in a fresh fake API server, the extender synced,
 * then `churn` pods each filtered, bound through the extender and deleted again, with up to 1,000 alive at a
 * time (one GPU each, spread over the nodes). RSS is read 2 s after the sync and 2 s after the last delete
 * (jemalloc purges in the background). */
static mem_fig mem_cell(const char *bin, int n, bool slices, int churn) {
    char err[256], url[128];
    fake_api *api = fake_api_start(0, err, sizeof err);
    if (!api) die(err);
    buf b = {0};
    for (int i = 0; i < n; i++) {
        b.len = 0;
        node_json(&b, i, true);
        if (fake_api_put(api, "nodes", b.p) < 0) die("fake_api_put node");
        if (!slices) continue;
        b.len = 0;
        slice_json(&b, i);
        if (fake_api_put(api, "resourceslices", b.p) < 0) die("fake_api_put slice");
    }
    fake_api_url(api, url, sizeof url);
    const char *flags[8] = {"--kube-api", url};
    int nf = 2;
    if (bin_knows(bin, "--webhook-listen")) { flags[nf++] = "--webhook-listen"; flags[nf++] = ""; }
    flags[nf] = NULL;
    mem_fig fig;
    double t0 = now_ms();
    xproc x = xstart(bin, flags);
    wait_ready(x.port, 300000);
    fig.sync_s = (now_ms() - t0) / 1000;
    sleep(2);
    fig.sync_mib = (double)xrss_kib(x.pid, "VmRSS:") / 1024;
    conn c;
    conn_open_port(&c, x.port);
    const int window = 1000;
    t0 = now_ms();
    for (int i = 0; i < churn + window; i++) {
        char name[32], uid[40], node[32];
        if (i < churn) {
            snprintf(name, sizeof name, "churn-%05d", i);
            snprintf(uid, sizeof uid, "churn-uid-%06d", i);
            snprintf(node, sizeof node, "node-%05d", i % n);
            b.len = 0;
            bf(&b, "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\",\"uid\":\"%s\"},\"spec\":{\"schedulerName\":"
                   "\"tessera-scheduler\",\"priority\":0,\"containers\":[{\"name\":\"main\",\"image\":\"registry.example.com/ml/train:v1\","
                   "\"resources\":{\"requests\":{\"cpu\":\"4\",\"memory\":\"32Gi\"},\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},"
                   "\"status\":{\"phase\":\"Pending\"}}",
               name, uid);
            if (fake_api_put(api, "pods", b.p) < 0) die("fake_api_put pod");
            char *pod = fake_api_get(api, "pods", "ml", name);
            b.len = 0;
            bf(&b, "{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":[\"%s\"]}", pod, node);
            free(pod);
            const char *resp;
            size_t rl;
            int st = call(&c, "POST", "/tessera/filter", b.p, b.len, &resp, &rl);
            expect_ok(st, "filter", resp);
            if (!strstr(resp, node)) die("churn: the filter kept no node");
            b.len = 0;
            bf(&b, "{\"PodName\":\"%s\",\"PodNamespace\":\"ml\",\"PodUID\":\"%s\",\"Node\":\"%s\"}", name, uid, node);
            st = call(&c, "POST", "/tessera/bind", b.p, b.len, &resp, &rl);
            expect_ok(st, "bind", resp);
            if (strstr(resp, "\"Error\":\"") && !strstr(resp, "\"Error\":\"\"")) {
                fprintf(stderr, "bind %s: %.300s\n", name, resp);
                die("churn: bind failed");
            }
        }
        if (i >= window) {
            snprintf(name, sizeof name, "churn-%05d", i - window);
            if (fake_api_delete(api, "pods", "ml", name) != 0) die("churn: delete");
        }
        if (getenv("BENCH_E_TRACE") && i % 2000 == 1999)
            fprintf(stderr, "E    %d: RSS %.1f MiB\n", i + 1, (double)xrss_kib(x.pid, "VmRSS:") / 1024);
    }
    fig.churn_s = (now_ms() - t0) / 1000;
    conn_close(&c);
    sleep(2);
    fig.churn_mib = (double)xrss_kib(x.pid, "VmRSS:") / 1024;
    xstop(x);
    fake_api_free(api);
    free(b.p);
    return fig;
}

static void bench_e(void) {
    const int reps = env_int("BENCH_REPS", 3), churn = env_int("BENCH_CHURN", 10000);
    static const int sizes[2] = {1000, NODES};
    enum { NS = 2, NM = 2 };
    double sync[NS][NM][2][16], after[NS][NM][2][16];
    for (int r = 0; r < reps && r < 16; r++)
        for (int k = 0; k < NS; k++)
            for (int m = 0; m < NM; m++)
                for (int bi = 0; bi < nbins(); bi++) {
                    mem_fig f = mem_cell(bin_at(bi), sizes[k], m == 1, churn);
                    sync[k][m][bi][r] = f.sync_mib;
                    after[k][m][bi][r] = f.churn_mib;
                    printf("E  %s %d nodes%s: synced in %.1f s, RSS %.1f MiB; %d binds+deletes in %.1f s, RSS %.1f MiB\n",
                           bin_label(bi), sizes[k], m ? " + ResourceSlices" : "", f.sync_s, f.sync_mib, churn, f.churn_s,
                           f.churn_mib);
                    fflush(stdout);
                }
    int n = reps < 16 ? reps : 16;
    for (int m = 0; m < NM; m++)
        for (int bi = 0; bi < nbins(); bi++) {
            double s0 = median(sync[0][m][bi], n), s1 = median(sync[1][m][bi], n);
            for (int k = 0; k < NS; k++)
                printf("E  median of %d, %s, %5d nodes x %d GPUs%s: RSS after sync %.1f MiB, after churn %.1f MiB, "
                       "%.0f bytes/node (RSS / nodes)\n",
                       n, bin_label(bi), sizes[k], GPUS, m ? " as ResourceSlices too" : " (labels)",
                       median(sync[k][m][bi], n), median(after[k][m][bi], n),
                       median(sync[k][m][bi], n) * 1048576.0 / sizes[k]);
            printf("E  median of %d, %s%s: %.0f bytes per node more (RSS at %d nodes - RSS at %d nodes) / %d\n", n,
                   bin_label(bi), m ? " with ResourceSlices" : " (labels)", (s1 - s0) * 1048576.0 / (NODES - 1000), NODES,
                   1000, NODES - 1000);
        }
}

/* A target workload for fgd: a few shapes, as a JSON array of pods. */
static const char *workload_file(void) {
    static char path[128];
    snprintf(path, sizeof path, "%s/workload.json", tmpdir);
    if (access(path, R_OK) == 0) return path;
    static const char *limits[] = {"\"nvidia.com/gpumem\":\"10240\",\"nvidia.com/gpucores\":\"30\"",
                                   "\"nvidia.com/gpumem\":\"20480\",\"nvidia.com/gpucores\":\"50\"",
                                   "\"nvidia.com/gpu\":\"1\"", "\"nvidia.com/gpu\":\"2\"", "\"nvidia.com/gpu\":\"8\""};
    buf b = {0};
    bstr(&b, "[");
    for (int i = 0; i < 5; i++)
        bf(&b, "%s{\"metadata\":{\"name\":\"w-%d\",\"namespace\":\"ml\",\"uid\":\"w-uid-%d\"},\"spec\":{\"containers\":[{\"name\":\"m\","
               "\"resources\":{\"limits\":{%s}}}]}}",
           i ? "," : "", i, i, limits[i]);
    bstr(&b, "]");
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b.p, 1, b.len, f) != b.len || fclose(f) != 0) die("cannot write the workload file");
    free(b.p);
    return path;
}

/* F: fgd and fgd-pack prioritize over all 5,000 nodes with the answer cache defeated (64 request shapes in turn),
 * both builds serving at once, cells of BENCH_F_CALLS calls alternated between them: the extender's CPU time per
 * call (/proc/PID/stat, user + system) and the wall time, medians over the cells. */
static void bench_f(void) {
    static const char *policies[2] = {"fgd", "fgd-pack"};
    const int cells = env_int("BENCH_CELLS", 7), per = env_int("BENCH_F_CALLS", 384);
    size_t len[COLD_SHAPES];
    char *body[COLD_SHAPES];
    for (int s = 0; s < COLD_SHAPES; s++) body[s] = args_names_mem(NODES, FRACTIONAL_POD_MIB + 1 + s, &len[s]);
    for (int p = 0; p < 2; p++) {
        xproc x[2];
        conn c[2];
        bool on[2] = {false, false};
        for (int bi = 0; bi < nbins(); bi++) {
            if (!bin_knows(bin_at(bi), policies[p])) {
                printf("F  %s: %s has no policy %s\n", bin_label(bi), bin_at(bi), policies[p]);
                continue;
            }
            const char *flags[] = {"--cluster", cluster_file(NODES), "--policy", policies[p], "--workload", workload_file(), NULL};
            x[bi] = xstart(bin_at(bi), flags);
            conn_open_port(&c[bi], x[bi].port);
            on[bi] = true;
        }
        double cpu[2][64], wall[2][64];
        int seq = 0;
        for (int cell = -1; cell < cells && cell < 64; cell++)   /* cell -1 warms up */
            for (int bi = 0; bi < nbins(); bi++) {
                if (!on[bi]) continue;
                double c0 = xcpu_ms(x[bi].pid), w0 = now_ms();
                for (int i = 0; i < per; i++, seq++) {
                    const char *resp;
                    size_t rl;
                    int s = seq % COLD_SHAPES;
                    int st = call(&c[bi], "POST", "/tessera/prioritize", body[s], len[s], &resp, &rl);
                    expect_ok(st, "prioritize", resp);
                }
                if (cell < 0) continue;
                cpu[bi][cell] = (xcpu_ms(x[bi].pid) - c0) / per;
                wall[bi][cell] = (now_ms() - w0) / per;
            }
        double ref = -1;
        for (int bi = 0; bi < nbins(); bi++) {
            if (!on[bi]) continue;
            double mc = median(cpu[bi], cells), mw = median(wall[bi], cells);
            if (bi == 0) ref = mc;
            printf("F  %-8s %s, prioritize %d names cold (%d shapes in turn): CPU %.3f ms/call, wall %.3f ms/call "
                   "(median of %d cells of %d)%s",
                   policies[p], bin_label(bi), NODES, COLD_SHAPES, mc, mw, cells, per, bi ? "" : "\n");
            if (bi) printf("; new/old CPU %.2f\n", ref / mc);
            conn_close(&c[bi]);
            xstop(x[bi]);
        }
    }
    for (int s = 0; s < COLD_SHAPES; s++) free(body[s]);
}

/* G: 8 clients on 8 keep-alive connections, each sending the same cheap filter (100 candidate names, answered
 * from the cache) as fast as it can; both builds serving at once, 2-second cells alternated: requests/s and
 * the extender's CPU per request, medians over the cells. */
static void bench_g(void) {
    enum { CLIENTS = 8 };
    const int cells = env_int("BENCH_CELLS", 7);
    size_t len;
    char *body = args_names(100, &len);
    xproc x[2];
    for (int bi = 0; bi < nbins(); bi++) {
        const char *flags[] = {"--cluster", cluster_file(NODES), NULL};
        x[bi] = xstart(bin_at(bi), flags);
    }
    double rps[2][64], cpu[2][64];
    for (int cell = -1; cell < cells && cell < 64; cell++)
        for (int bi = 0; bi < nbins(); bi++) {
            client g[CLIENTS];
            pthread_t th[CLIENTS];
            double t0 = now_ms(), c0 = xcpu_ms(x[bi].pid);
            for (int i = 0; i < CLIENTS; i++) {
                g[i] = (client){x[bi].port, body, len, t0 + (cell < 0 ? 500 : 2000), 0};
                if (pthread_create(&th[i], NULL, client_run, &g[i]) != 0) die("pthread_create");
            }
            long total = 0;
            for (int i = 0; i < CLIENTS; i++) {
                pthread_join(th[i], NULL);
                total += g[i].done;
            }
            if (cell < 0) continue;
            rps[bi][cell] = (double)total / ((now_ms() - t0) / 1000);
            cpu[bi][cell] = (xcpu_ms(x[bi].pid) - c0) * 1000 / (double)total;
        }
    double ref = -1;
    for (int bi = 0; bi < nbins(); bi++) {
        double r = median(rps[bi], cells);
        if (bi == 0) ref = r;
        printf("G  %s, %d keep-alive connections, filter of 100 names (warm): %.0f requests/s, CPU %.1f us/request "
               "(median of %d 2-s cells)%s",
               bin_label(bi), CLIENTS, r, median(cpu[bi], cells), cells, bi ? "" : "\n");
        if (bi) printf("; new/old requests/s %.2f\n", ref / r);
        xstop(x[bi]);
    }
    free(body);
}

/* ------------------------------------------------------------ H: topology */

/* Node i of H's cluster: even i a DGX A100 (every pair NV12, NUMA 0 for GPUs 0-3), odd i an 8-GPU PCIe server
 * with NVLink bridges on (0,1), (2,3), (4,5), (6,7) and a PCIe switch per socket (README, "Reference servers").
 * With topo the tessera.io/gpus annotation carries numa, nvlink and the `topo` rows as the node agent writes
 * them; without, only index, uuid and pci (the node's topology is then unknown). */
static void topo_node_json(buf *b, int i, bool topo) {
    bool dgx = i % 2 == 0;
    bf(b, "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"node-%05d\",\"uid\":\"node-uid-%05d\","
          "\"resourceVersion\":\"%d\",\"labels\":{\"kubernetes.io/hostname\":\"node-%05d\",\"nvidia.com/gpu.present\":\"true\","
          "\"nvidia.com/gpu.product\":\"%s\",\"nvidia.com/gpu.count\":\"%d\",\"nvidia.com/gpu.memory\":\"81920\","
          "\"nvidia.com/gpu.family\":\"ampere\",\"nvidia.com/gpu.compute.major\":\"8\",\"nvidia.com/gpu.compute.minor\":\"0\","
          "\"nvidia.com/gpu.replicas\":\"1\",\"nvidia.com/gpu.sharing-strategy\":\"none\",\"nvidia.com/mig.capable\":\"true\","
          "\"nvidia.com/gpu.mode\":\"compute\"},\"annotations\":{\"tessera.io/gpus\":\"[",
       i, i, 1000 + i, i, dgx ? "NVIDIA-A100-SXM4-80GB" : "NVIDIA-A100-80GB-PCIe", GPUS);
    static const char *const dgx_bus[GPUS] = {"07", "0F", "47", "4E", "87", "90", "B7", "BD"};
    static const char *const pcie_bus[GPUS] = {"1B", "1C", "1D", "1E", "9B", "9C", "9D", "9E"};
    for (int g = 0; g < GPUS; g++) {
        bf(b, "%s{\\\"index\\\":%d,\\\"uuid\\\":\\\"GPU-%08d-0000-4000-8000-%012d\\\",\\\"pci\\\":\\\"00000000:%s:00.0\\\"",
           g ? "," : "", g, i, g, (dgx ? dgx_bus : pcie_bus)[g]);
        if (topo) {
            bf(b, ",\\\"numa\\\":%d,\\\"nvlink\\\":[", g / 4);
            for (int h = 0, first = 1; h < GPUS; h++)
                if (h != g && (dgx || h / 2 == g / 2)) {
                    bf(b, "%s%d", first ? "" : ",", h);
                    first = 0;
                }
            bstr(b, "],\\\"topo\\\":[");
            for (int h = 0; h < GPUS; h++)
                bf(b, "%s\\\"%s\\\"", h ? "," : "",
                   h == g ? "X" : dgx || h / 2 == g / 2 ? "NV12" : h / 4 == g / 4 ? "PIX" : "SYS");
            bstr(b, "]");
        }
        bstr(b, "}");
    }
    bf(b, "]\"}},\"status\":{\"capacity\":{\"cpu\":\"128\",\"memory\":\"1056561424Ki\",\"pods\":\"110\",\"nvidia.com/gpu\":\"%d\"},"
          "\"allocatable\":{\"cpu\":\"127500m\",\"memory\":\"1055410448Ki\",\"pods\":\"110\",\"nvidia.com/gpu\":\"%d\"}}}",
       GPUS, GPUS);
}

static const char *topo_cluster_file(bool topo) {
    static char path[2][128];
    snprintf(path[topo], sizeof path[0], "%s/cluster-topo-%d.json", tmpdir, topo);
    return node_list_file(path[topo], NODES, topo_node_json, topo);
}

/* {"Pod":..., "NodeNames":[all]} for a pod on k whole GPUs, as tessera's webhook admitted it on this cluster
 * (k x 1000 milli-GPU and k x 81920 MiB declared: README, Quotas), which filter checks every node against. */
static char *args_whole(int k, size_t *len) {
    buf b = {0};
    bf(&b, "{\"Pod\":{\"metadata\":{\"name\":\"train-%d\",\"namespace\":\"ml\",\"uid\":\"7a0c0000-0000-4000-8000-00000000000%d\"},"
           "\"spec\":{\"schedulerName\":\"tessera-scheduler\",\"priority\":0,\"containers\":[{\"name\":\"main\","
           "\"image\":\"registry.example.com/ml/train:v1\",\"resources\":{\"requests\":{\"cpu\":\"8\",\"memory\":\"64Gi\","
           "\"tessera.io/gpu-milli\":\"%d\",\"tessera.io/gpu-memory-mib\":\"%d\"},\"limits\":{\"nvidia.com/gpu\":\"%d\","
           "\"tessera.io/gpu-milli\":\"%d\",\"tessera.io/gpu-memory-mib\":\"%d\"}}}]}},\"Nodes\":null,\"NodeNames\":[",
       k, k, 1000 * k, 81920 * k, k, 1000 * k, 81920 * k);
    for (int i = 0; i < NODES; i++) bf(&b, "%s\"node-%05d\"", i ? "," : "", i);
    bstr(&b, "]}");
    *len = b.len;
    return b.p;
}

/* One cell: calls of verb on x, the pod shapes in turn from *seq (cold: 1..5 GPUs; warm: always 2). The
 * extender's CPU ms per call. */
static double h_cell(xproc x, conn *c, const char *verb, char *const *body, const size_t *len, bool cold, int calls,
                     int *seq) {
    double c0 = xcpu_ms(x.pid);
    for (int i = 0; i < calls; i++, (*seq)++) {
        int k = cold ? *seq % 5 : 1;
        const char *resp;
        size_t rl;
        int st = call(c, "POST", verb, body[k], len[k], &resp, &rl);
        expect_ok(st, verb, resp);
    }
    return (xcpu_ms(x.pid) - c0) / calls;
}

/* The score prioritize gave host in its reply, or -1. */
static int reply_score(const char *resp, const char *host) {
    char key[64];
    snprintf(key, sizeof key, "\"Host\":\"%s\",\"Score\":", host);
    const char *p = strstr(resp, key);
    return p ? atoi(p + strlen(key)) : -1;
}

/* The admission of a 4-GPU pod, sized over the 5,000 nodes of the synced mirror (the webhook's declaration holds
 * the mirror's lock meanwhile, so filter and prioritize wait that long): wall p50 and p99. */
static void h_webhook(xproc x, conn *c) {
    static const char review[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"r-1\",\"kind\":{\"group\":"
        "\"\",\"version\":\"v1\",\"kind\":\"Pod\"},\"namespace\":\"ml\",\"operation\":\"CREATE\",\"object\":{\"metadata\":"
        "{\"name\":\"train\",\"namespace\":\"ml\"},\"spec\":{\"schedulerName\":\"tessera-scheduler\",\"containers\":[{\"name\":"
        "\"main\",\"image\":\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"4\"}}}]}}}}";
    enum { N = 200 };
    double t[N];
    for (int i = -20; i < N; i++) {
        const char *resp;
        size_t rl;
        double t0 = now_ms();
        int st = call(c, "POST", "/webhook/mutate", review, sizeof review - 1, &resp, &rl);
        expect_ok(st, "webhook", resp);
        if (i >= 0) t[i] = now_ms() - t0;
    }
    const char *resp = NULL;
    size_t rl;
    int st = call(c, "GET", "/metrics", "", 0, &resp, &rl);
    expect_ok(st, "/metrics", resp);
    static const char key[] = "tessera_webhook_declarations_total{rule=\"cluster\",why=\"synced\"} ";
    const char *m = strstr(resp, key);
    long sized = m ? strtol(m + strlen(key), NULL, 10) : -1;
    (void)x;
    printf("H  webhook: a 4-GPU pod sized %s: p50 %.3f ms, p99 %.3f ms (%d admissions)\n",
           sized >= N ? "for the GPUs of the 5000 nodes" : "by the catalog (a build without the cluster's rule)",
           pct(t, N, 0.5), pct(t, N, 0.99), N);
}

static void bench_h(void) {
    static const char *policies[2] = {"binpack", "fgd-pack"};
    static const char *verbs[2] = {"/tessera/prioritize", "/tessera/filter"};
    const int cells = env_int("BENCH_CELLS", 7), target_ms = env_int("BENCH_H_MS", 1000);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t was, first;
    bool pin = env_int("BENCH_H_PIN", 1) && cpus >= 2 && sched_getaffinity(0, sizeof was, &was) == 0;
    if (pin) {
        CPU_ZERO(&first);
        CPU_SET(0, &first);
        pin = sched_setaffinity(0, sizeof first, &first) == 0;
        server_cpu = pin ? (int)cpus - 1 : -1;
    }
    char *body[5];
    size_t len[5];
    for (int k = 0; k < 5; k++) body[k] = args_whole(k + 1, &len[k]);
    printf("H  %d nodes alternating dgx-a100 and pcie8-nvlink-pairs, with the topo rows and without; extender CPU "
           "ms per call over all %d names, median of %d cells alternated; %s\n", NODES, NODES, cells,
           pin ? "both extenders on the last CPU, the bench on the first" : "not pinned (BENCH_H_PIN=0)");
    for (int p = 0; p < 2; p++) {
        xproc x[2];
        conn c[2];
        for (int t = 0; t < 2; t++) {   /* t 0: with topology, 1: without */
            const char *flags[] = {"--cluster", topo_cluster_file(t == 0), "--policy", policies[p], "--workload",
                                   workload_file(), NULL};
            x[t] = xstart(ext_bin, flags);
            conn_open_port(&c[t], x[t].port);
        }
        /* the two really differ: a 2-GPU pod scores an idle DGX and an idle PCIe server apart only with topology */
        for (int t = 0; t < 2; t++) {
            const char *resp = NULL;
            size_t rl;
            int st = call(&c[t], "POST", "/tessera/prioritize", body[1], len[1], &resp, &rl);
            expect_ok(st, "prioritize", resp);
            int dgx = reply_score(resp, "node-00000"), pcie = reply_score(resp, "node-00001");
            if (dgx < 0 || pcie < 0 || (dgx != pcie) != (t == 0)) {
                fprintf(stderr, "H %s: %s topology, a 2-GPU pod scores the DGX %d and the PCIe server %d\n",
                        policies[p], t ? "without" : "with", dgx, pcie);
                die("the topology cluster does not read as meant");
            }
        }
        for (int v = 0; v < 2; v++)
            for (int cold = 1; cold >= 0; cold--) {
                /* a cell: as many calls (a multiple of 5, each shape alike) as take about target_ms of CPU */
                int seq[2] = {0, 0};
                double probe = h_cell(x[1], &c[1], verbs[v], body, len, cold, 10, &seq[1]);
                h_cell(x[0], &c[0], verbs[v], body, len, cold, 10, &seq[0]);   /* (warms the cache alike) */
                int calls = probe > 0 ? 5 * (int)(target_ms / probe / 5 + 1) : 500;
                if (calls > 5000) calls = 5000;
                double cpu[2][64];
                for (int cell = 0; cell < cells && cell < 64; cell++)
                    for (int t = 0; t < 2; t++) cpu[t][cell] = h_cell(x[t], &c[t], verbs[v], body, len, cold, calls, &seq[t]);
                double with = median(cpu[0], cells), without = median(cpu[1], cells);
                printf("H  %-8s %-10s %s: with topology %.3f ms/call, without %.3f ms/call, with/without %.2f "
                       "(%d calls a cell)\n",
                       policies[p], verbs[v] + 9, cold ? "cold (1..5 GPUs in turn)" : "warm (answer cache)    ", with,
                       without, without > 0 ? with / without : 0, calls);
                fflush(stdout);
            }
        if (p == 0) h_webhook(x[0], &c[0]);
        for (int t = 0; t < 2; t++) {
            conn_close(&c[t]);
            xstop(x[t]);
        }
    }
    for (int k = 0; k < 5; k++) free(body[k]);
    if (pin) {
        server_cpu = -1;
        if (sched_setaffinity(0, sizeof was, &was) != 0) fprintf(stderr, "bench_extender: cannot unpin itself\n");
    }
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
    const char *old = getenv("TESSERA_EXTENDER_OLD");
    if (old && *old) snprintf(old_bin, sizeof old_bin, "%s", old);
    if (old_bin[0] && access(old_bin, X_OK) != 0) die("TESSERA_EXTENDER_OLD is not an executable");
    if (only && strchr(only, 'E')) bench_e();
    if (only && strchr(only, 'F')) bench_f();
    if (only && strchr(only, 'G')) bench_g();
    if (only && strchr(only, 'H')) bench_h();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "bench_extender: could not remove %s\n", tmpdir);
    return 0;
}
