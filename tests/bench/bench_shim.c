/* bench_shim.c -- what libtessera-cuda.so costs. (1) One cuMemAlloc_v2/cuMemFree_v2 pair through the shim against
 * the same pair straight to the driver (the fake driver, whose own cost is a few hundred nanoseconds, so the
 * shim's part shows): the probe's bench-alloc loop, without the shim, with it preloaded but no share (the pass-through
 * every process outside a share would pay if it were preloaded), and enforcing a share (the ledger's file lock and
 * liveness checks), alone and with other processes of the pod holding memory. (2) What preloading it costs a process
 * that never touches CUDA (a shell, kubectl exec): spawn + exec of /bin/true, with and without the preload.
 * Prints figures; it is not a test.
 *
 *   make build/bench/bench_shim && build/bench/bench_shim
 *   BENCH_PAIRS=N (default 20000) alloc/free pairs per run, BENCH_SPAWNS=N (default 1000) spawns per run
 */
#include "tests/unit/shim_helpers.h"

#include <spawn.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long env_long(const char *name, long def) {
    const char *v = getenv(name);
    return v && *v ? atol(v) : def;
}

/* ns per pair from the probe's "bench-alloc N ns-per-pair=X" line, or -1 */
static double pairs(const fake_node *n, const char *pod, const char *share, long count) {
    char cnt[32], out[4096], err[4096];
    snprintf(cnt, sizeof cnt, "%ld", count);
    const char *args[] = {"bench-alloc", cnt, "1", NULL};
    if (probe_run(n, pod, share, NULL, args, out, sizeof out, err, sizeof err) != 0) {
        fprintf(stderr, "probe failed:\n%s%s", out, err);
        return -1;
    }
    const char *p = strstr(out, "ns-per-pair=");
    return p ? atof(p + strlen("ns-per-pair=")) : -1;
}

/* microseconds per spawn + exec + wait of /bin/true with envp. posix_spawn (vfork underneath), not fork: copying
 * this large process's page tables would cost more than the exec it measures. */
static double spawns(const char *const *envp, long count) {
    const char *argv[] = {"/bin/true", NULL};
    double t0 = now_s();
    for (long i = 0; i < count; i++) {
        pid_t pid;
        int st;
        if (posix_spawn(&pid, argv[0], NULL, NULL, (char *const *)argv, (char *const *)envp) != 0) return -1;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return -1;
    }
    return (now_s() - t0) * 1e6 / (double)count;
}

int main(void) {
    long npairs = env_long("BENCH_PAIRS", 20000), nspawn = env_long("BENCH_SPAWNS", 1000);
    fake_node n;
    char pod[300];
    if (!node_new(&n, GPU_A ":81920") || !pod_install(&n, "pod", pod, sizeof pod)) {
        fprintf(stderr, "bench_shim: build/fake-cuda or tessera-reserve is not built (make)\n");
        return 1;
    }
    printf("cuMemAlloc_v2 + cuMemFree_v2 of 1 MiB on the fake driver, %ld pairs (ns per pair, best of 3):\n", npairs);
    struct { const char *what, *pod, *share; } runs[] = {
        {"driver alone", NULL, NULL},
        {"shim preloaded, no share (pass-through)", pod, NULL},
        {"shim enforcing a share", pod, "40960"},
    };
    double base = 0;
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        double best = -1;
        for (int k = 0; k < 3; k++) {
            double v = pairs(&n, runs[r].pod, runs[r].share, npairs);
            if (v >= 0 && (best < 0 || v < best)) best = v;
        }
        if (r == 0) base = best;
        printf("  %-52s %8.0f  (+%.0f)\n", runs[r].what, best, best - base);
    }
    /* other processes of the pod holding memory: the ledger checks their slots' liveness on each allocation */
    bg_probe holders[4];
    const char *hold[] = {"alloc", "100", "hold", "120", NULL};
    char line[128];
    int nh = 0;
    for (; nh < 4; nh++) {
        if (!probe_start(&holders[nh], &n, pod, "40960", NULL, hold) ||
            !probe_wait_line(&holders[nh], "alloc", line, sizeof line))
            break;
    }
    double best = -1;
    for (int k = 0; k < 3; k++) {
        double v = pairs(&n, pod, "40960", npairs);
        if (v >= 0 && (best < 0 || v < best)) best = v;
    }
    printf("  %-52s %8.0f  (+%.0f)\n", "shim enforcing, 4 other processes of the pod holding", best, best - base);
    for (int i = 0; i < nh; i++) probe_stop(&holders[i], SIGKILL);

    printf("\nspawn + exec + wait of /bin/true, %ld times (microseconds each, best of 3):\n", nspawn);
    char preload[600];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s/lib/libtessera-cuda.so", pod);
    const char *plain[] = {"PATH=/usr/bin:/bin", NULL};
    const char *pre[] = {"PATH=/usr/bin:/bin", preload, NULL};
    const char *share[] = {"PATH=/usr/bin:/bin", preload, "TESSERA_GPU_MEMORY_MIB=40960", NULL};
    const char *const *envs[] = {plain, pre, share};
    const char *names[] = {"no preload", "libtessera-cuda.so preloaded", "preloaded, TESSERA_GPU_MEMORY_MIB set"};
    double first = 0;
    for (int e = 0; e < 3; e++) {
        double b = -1;
        for (int k = 0; k < 3; k++) {
            double v = spawns(envs[e], nspawn);
            if (v >= 0 && (b < 0 || v < b)) b = v;
        }
        if (e == 0) first = b;
        printf("  %-52s %8.1f  (+%.1f)\n", names[e], b, b - first);
    }
    node_free(&n);
    return 0;
}
