/* test_fake_cuda.c -- the fake driver's own behaviour the other tests lean on: which GPUs a container sees, and the
 * MPS client side against a control daemon speaking /work/plan/fake-mps-protocol.md (a small one in this file, so
 * the client is tested on its own; the fake nvidia-cuda-mps-control is tested with the deployed configuration).
 */
#include "harness.h"
#include "shim_helpers.h"

#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>

#define OUT 4096

/* A control daemon that answers every CLIENT line with reply, then (after delay_ms) with later if set, and keeps
 * the connections open until stopped. */
typedef struct mini_mps {
    char dir[96];
    const char *reply, *later;
    int delay_ms;
    int listen_fd, stop;
    int clients[8], nclients;
    char seen[256];
    pthread_t thread;
} mini_mps;

static void *mini_mps_run(void *arg) {
    mini_mps *m = arg;
    while (!__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE)) {
        struct pollfd p = {m->listen_fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        int c = accept(m->listen_fd, NULL, NULL);
        if (c < 0) continue;
        char line[256];
        size_t n = 0;
        while (n + 1 < sizeof line && read(c, line + n, 1) == 1 && line[n] != '\n') n++;
        line[n] = 0;
        snprintf(m->seen, sizeof m->seen, "%s", line);
        if (write(c, m->reply, strlen(m->reply)) < 0) {}
        if (m->later) {
            usleep((useconds_t)m->delay_ms * 1000);
            if (write(c, m->later, strlen(m->later)) < 0) {}
        }
        if (m->nclients < 8) m->clients[m->nclients++] = c;
        else close(c);
    }
    return NULL;
}

static bool mini_mps_start(mini_mps *m, const fake_node *n, const char *reply, const char *later, int delay_ms) {
    memset(m, 0, sizeof *m);
    snprintf(m->dir, sizeof m->dir, "%.80s/mps-pipe", n->root);
    mkdir(m->dir, 0777);
    m->reply = reply;
    m->later = later;
    m->delay_ms = delay_ms;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/control", m->dir);
    unlink(sa.sun_path);
    m->listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (m->listen_fd < 0 || bind(m->listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(m->listen_fd, 8) < 0)
        return false;
    return pthread_create(&m->thread, NULL, mini_mps_run, m) == 0;
}

static void mini_mps_stop(mini_mps *m) {
    __atomic_store_n(&m->stop, 1, __ATOMIC_RELEASE);
    pthread_join(m->thread, NULL);
    for (int i = 0; i < m->nclients; i++) close(m->clients[i]);
    close(m->listen_fd);
}

TEST(fake_cuda_shows_what_the_container_is_given) {
    fake_node n;
    char out[OUT], err[OUT];
    CHECK_MSG(node_new(&n, GPU_A ":81920," GPU_B ":40960:132"), "build/fake-cuda is not built (run make)");
    const char *ops[] = {"total-mem", "sm-count", NULL};
    CHECK_INT(probe_run(&n, NULL, NULL, NULL, ops, out, sizeof out, err, sizeof err), 0);
    CHECK_CONTAINS(out, "init ok devices=2\ntotal-mem 81920\nsm-count 108\n");
    snprintf(n.visible, sizeof n.visible, "1"); /* an index, as deviceIDStrategy=index writes it */
    CHECK_INT(probe_run(&n, NULL, NULL, NULL, ops, out, sizeof out, err, sizeof err), 0);
    CHECK_CONTAINS(out, "init ok devices=1\ntotal-mem 40960\nsm-count 132\n");
    snprintf(n.visible, sizeof n.visible, "void");
    CHECK_INT(probe_run(&n, NULL, NULL, NULL, ops, out, sizeof out, err, sizeof err), 3);
    CHECK_CONTAINS(out, "init error 100\n"); /* CUDA_ERROR_NO_DEVICE */
    snprintf(n.visible, sizeof n.visible, "all");
    snprintf(n.devices, sizeof n.devices, "GPU-123:80");
    CHECK_INT(probe_run(&n, NULL, NULL, NULL, ops, out, sizeof out, err, sizeof err), 3);
    CHECK_CONTAINS(err, "FAKE_CUDA_DEVICES entry \"GPU-123:80\" is not GPU-<uuid>:<MiB>[:<SMs>]");
    node_free(&n);
}

/* An MPS client obeys the pinned memory limit (its own allocations; the device's total stays) and reports the SM
 * count the active thread percentage leaves it, the client's own value only lowering the server's. */
TEST(fake_cuda_mps_client_obeys_its_limits) {
    fake_node n;
    char out[OUT], err[OUT], pipe_env[400];
    CHECK_MSG(node_new(&n, GPU_A ":81920"), "build/fake-cuda is not built (run make)");
    mini_mps m;
    CHECK(mini_mps_start(&m, &n, "READY 4242 50.0 0=2048\n", NULL, 0));
    snprintf(pipe_env, sizeof pipe_env, "CUDA_MPS_PIPE_DIRECTORY=%s", m.dir);
    const char *ops[] = {"sm-count", "alloc", "1000", "alloc", "100", "meminfo", NULL};
    const char *own[] = {pipe_env, "FAKE_CUDA_UID=1000", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25",
                         "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1G", NULL};
    CHECK_INT(probe_run(&n, NULL, NULL, own, ops, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(out, "sm-count 27\nalloc 1000 ok\nalloc 100 error 2\nmeminfo free=24 total=81920\n");
    CHECK_MSG(!strncmp(m.seen, "CLIENT ", 7) && strstr(m.seen, " 1000"), "the client said \"%s\"", m.seen);
    /* no variables of its own: the server's defaults (50 percent of 108 SMs, 2048 MiB) */
    const char *defaults[] = {pipe_env, NULL};
    const char *more[] = {"sm-count", "alloc", "2000", "alloc", "100", NULL};
    CHECK_INT(probe_run(&n, NULL, NULL, defaults, more, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(out, "sm-count 54\nalloc 2000 ok\nalloc 100 error 2\n");
    /* a client asking for more than the server's default gets the default */
    const char *greedy[] = {pipe_env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100", NULL};
    const char *sm[] = {"sm-count", NULL};
    CHECK_INT(probe_run(&n, NULL, NULL, greedy, sm, out, sizeof out, err, sizeof err), 0);
    CHECK_CONTAINS(out, "sm-count 54\n");
    /* a malformed limit fails cuInit, loudly */
    const char *bad[] = {pipe_env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=lots", NULL};
    CHECK_INT(probe_run(&n, NULL, NULL, bad, sm, out, sizeof out, err, sizeof err), 3);
    CHECK_CONTAINS(out, "init error 1\n");
    CHECK_CONTAINS(err, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=lots is not");
    mini_mps_stop(&m);
    /* no daemon: not an MPS client, the whole GPU */
    CHECK_INT(probe_run(&n, NULL, NULL, defaults, sm, out, sizeof out, err, sizeof err), 0);
    CHECK_CONTAINS(out, "sm-count 108\n");
    node_free(&n);
}

/* With the shim on top the two limits hold together: the driver's per-process pinned limit and the pod's share,
 * and the share is what the device reports as its total. */
TEST(fake_cuda_mps_client_under_the_shim) {
    fake_node n;
    char out[OUT], err[OUT], pipe_env[400], pod[300];
    CHECK_MSG(node_new(&n, GPU_A ":81920"), "build/fake-cuda is not built (run make)");
    CHECK(pod_install(&n, "pod", pod, sizeof pod));
    mini_mps m;
    CHECK(mini_mps_start(&m, &n, "READY 4242 100.0 -\n", NULL, 0));
    snprintf(pipe_env, sizeof pipe_env, "CUDA_MPS_PIPE_DIRECTORY=%s", m.dir);
    const char *env[] = {pipe_env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=3000M", NULL};
    const char *ops[] = {"alloc", "2500", "meminfo", "alloc", "1000", NULL};
    CHECK_INT(probe_run(&n, pod, "4096", env, ops, out, sizeof out, err, sizeof err), 1);
    CHECK_CONTAINS(out, "alloc 2500 ok\nmeminfo free=500 total=4096\nalloc 1000 error 2\n");
    CHECK_MSG(!strstr(err, "tessera:"), "the driver's limit, not the share, refused 1000 MiB: %s", err);
    mini_mps_stop(&m);
    node_free(&n);
}

/* A server of another uid has clients: cuInit blocks until the daemon says READY, as nvidia-cuda-mps-control(1)
 * describes; a full server refuses with CUDA_ERROR_MPS_MAX_CLIENTS_REACHED. */
TEST(fake_cuda_mps_client_waits_for_its_server) {
    fake_node n;
    char out[OUT], err[OUT], pipe_env[400];
    CHECK_MSG(node_new(&n, GPU_A ":81920"), "build/fake-cuda is not built (run make)");
    mini_mps m;
    CHECK(mini_mps_start(&m, &n, "WAIT 4242 1000\n", "READY 4343 100.0 -\n", 400));
    snprintf(pipe_env, sizeof pipe_env, "CUDA_MPS_PIPE_DIRECTORY=%s", m.dir);
    const char *env[] = {pipe_env, "FAKE_CUDA_UID=2000", NULL};
    const char *ops[] = {"sm-count", NULL};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_INT(probe_run(&n, NULL, NULL, env, ops, out, sizeof out, err, sizeof err), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK_CONTAINS(out, "init ok devices=1\nsm-count 108\n");
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    CHECK_MSG(ms >= 350, "cuInit returned after %ld ms, before the daemon's READY (400 ms)", ms);
    mini_mps_stop(&m);
    CHECK(mini_mps_start(&m, &n, "REFUSED max-clients 48\n", NULL, 0));
    CHECK_INT(probe_run(&n, NULL, NULL, env, ops, out, sizeof out, err, sizeof err), 3);
    CHECK_CONTAINS(out, "init error 808\n");
    CHECK_CONTAINS(err, "MPS refused this client: max-clients 48");
    mini_mps_stop(&m);
    node_free(&n);
}
