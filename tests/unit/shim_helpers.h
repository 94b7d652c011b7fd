/* shim_helpers.h -- a fake GPU node for the tests of libtessera-cuda.so and the fake driver: a temporary directory
 * with the node's memory ledger (FAKE_CUDA_STATE), pods installed by the real `tessera-reserve --install-shim`
 * (DIR/lib/libtessera-cuda.so, DIR/state/), and tessera-cuda-probe processes run in them with the library preloaded
 * as /etc/ld.so.preload does in a pod (LD_PRELOAD here: the tests cannot write /etc). Static functions, so each test
 * file stands alone.
 */
#ifndef TEST_SHIM_HELPERS_H
#define TEST_SHIM_HELPERS_H

#include "ext_proc.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SHIM_HELPER static __attribute__((unused))

#define GPU_A "GPU-8c0a1f2e-3b4d-4e5f-8a6b-7c8d9e0f1a2b"
#define GPU_B "GPU-1d2e3f40-5a6b-4c7d-9e8f-0a1b2c3d4e5f"

typedef struct fake_node {
    char root[128];            /* temporary directory */
    char state[192];           /* FAKE_CUDA_STATE */
    char devices[256];         /* FAKE_CUDA_DEVICES */
    char visible[200];         /* NVIDIA_VISIBLE_DEVICES */
    char build[256];           /* the directory of this test binary: build/ or build-asan/ */
} fake_node;

/* A node with the given FAKE_CUDA_DEVICES (NVIDIA_VISIBLE_DEVICES: every GPU); false if the build lacks the fake
 * driver, the probe or the library. */
SHIM_HELPER bool node_new(fake_node *n, const char *devices) {
    memset(n, 0, sizeof *n);
    char probe[600];
    /* beside the tests (build/), or one up from the benches (build/bench/) */
    if (!sibling_binary_path("fake-cuda/tessera-cuda-probe", probe, sizeof probe) &&
        !sibling_binary_path("../fake-cuda/tessera-cuda-probe", probe, sizeof probe))
        return false;
    snprintf(n->build, sizeof n->build, "%.*s", (int)(strlen(probe) - strlen("/fake-cuda/tessera-cuda-probe")), probe);
    snprintf(n->root, sizeof n->root, "/tmp/tessera-shim-XXXXXX");
    if (!mkdtemp(n->root)) return false;
    snprintf(n->state, sizeof n->state, "%s/node-memory", n->root);
    snprintf(n->devices, sizeof n->devices, "%s", devices);
    snprintf(n->visible, sizeof n->visible, "all");
    return true;
}

SHIM_HELPER void node_free(fake_node *n) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", n->root, n->root);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", n->root);
}

/* Run argv (NULL-terminated) with envp; its stdout and stderr (each up to len) and its exit status (-1: it could
 * not run, 128+N: killed by signal N). */
SHIM_HELPER int run_capture(const char *const *argv, const char *const *envp, char *out, size_t outlen, char *err,
                            size_t errlen) {
    int po[2], pe[2];
    if (pipe(po) != 0) return -1;
    if (pipe(pe) != 0) {
        close(po[0]);
        close(po[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(po[1]);
        close(pe[0]);
        close(pe[1]);
        execve(argv[0], (char *const *)argv, (char *const *)envp);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    size_t no = 0, ne = 0;
    struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    int open_fds = 2;
    while (open_fds > 0) {
        if (poll(fds, 2, 60000) <= 0) break;
        for (int k = 0; k < 2; k++) {
            if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP))) continue;
            char buf[4096];
            ssize_t r = read(fds[k].fd, buf, sizeof buf);
            if (r <= 0) {
                close(fds[k].fd);
                fds[k].fd = -1;
                open_fds--;
                continue;
            }
            char *dst = k ? err : out;
            size_t *used = k ? &ne : &no, cap = k ? errlen : outlen;
            size_t take = cap > *used + 1 ? cap - *used - 1 : 0;
            if ((size_t)r < take) take = (size_t)r;
            memcpy(dst + *used, buf, take);
            *used += take;
        }
    }
    for (int k = 0; k < 2; k++)
        if (fds[k].fd >= 0) close(fds[k].fd);
    if (outlen) out[no] = 0;
    if (errlen) err[ne] = 0;
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Install a pod's copy of the library with the real tessera-reserve --install-shim into root/<name>; its directory
 * in dir. */
SHIM_HELPER bool pod_install(const fake_node *n, const char *name, char *dir, size_t len) {
    char bin[700], lib[700], out[512], err[512];
    snprintf(bin, sizeof bin, "%s/tessera-reserve", n->build);
    snprintf(lib, sizeof lib, "%s/libtessera-cuda.so", n->build);
    snprintf(dir, len, "%s/%s", n->root, name);
    const char *argv[] = {bin, "--install-shim", dir, "--shim-source", lib, NULL};
    const char *envp[] = {"PATH=/usr/bin:/bin", NULL};
    int rc = run_capture(argv, envp, out, sizeof out, err, sizeof err);
    if (rc != 0) fprintf(stdout, "    tessera-reserve --install-shim %s: exit %d: %s\n", dir, rc, err);
    return rc == 0;
}

/* The environment of a process in pod (NULL: no shim) with share_mib (NULL: no TESSERA_GPU_MEMORY_MIB), plus
 * extra entries (NULL-terminated list, may be NULL). Strings live in buf. */
typedef struct proc_env {
    char buf[16][1024];
    const char *envp[24];
} proc_env;

/* Whether extra sets the variable that entry ("NAME=value") sets: then extra's wins. */
SHIM_HELPER bool overridden(const char *entry, const char *const *extra) {
    size_t n = strcspn(entry, "=") + 1;
    for (int i = 0; extra && extra[i]; i++)
        if (!strncmp(extra[i], entry, n)) return true;
    return false;
}

SHIM_HELPER void env_for(proc_env *e, const fake_node *n, const char *pod, const char *share_mib,
                         const char *const *extra) {
    int k = 0, m = 0;
    snprintf(e->buf[k], sizeof e->buf[k], "LD_LIBRARY_PATH=%s/fake-cuda:%s/fake-nvml", n->build, n->build);
    e->envp[m++] = e->buf[k++];
    snprintf(e->buf[k], sizeof e->buf[k], "FAKE_CUDA_DEVICES=%s", n->devices);
    e->envp[m++] = e->buf[k++];
    snprintf(e->buf[k], sizeof e->buf[k], "FAKE_CUDA_STATE=%s", n->state);
    e->envp[m++] = e->buf[k++];
    snprintf(e->buf[k], sizeof e->buf[k], "NVIDIA_VISIBLE_DEVICES=%s", n->visible);
    e->envp[m++] = e->buf[k++];
    /* never the machine's /tmp/nvidia-mps: a daemon someone else runs there would make these processes MPS clients */
    snprintf(e->buf[k], sizeof e->buf[k], "CUDA_MPS_PIPE_DIRECTORY=%s/no-mps", n->root);
    e->envp[m++] = e->buf[k++];
    if (pod) {
        snprintf(e->buf[k], sizeof e->buf[k], "LD_PRELOAD=%s/lib/libtessera-cuda.so", pod);
        e->envp[m++] = e->buf[k++];
    }
    if (share_mib) {
        snprintf(e->buf[k], sizeof e->buf[k], "TESSERA_GPU_MEMORY_MIB=%s", share_mib);
        e->envp[m++] = e->buf[k++];
    }
    e->envp[m++] = "PATH=/usr/bin:/bin";
    int kept = 0;
    for (int i = 0; i < m; i++)
        if (!overridden(e->envp[i], extra)) e->envp[kept++] = e->envp[i];
    m = kept;
    for (int i = 0; extra && extra[i] && m < 23; i++) e->envp[m++] = extra[i];
    e->envp[m] = NULL;
}

/* argv of the probe with args (NULL-terminated), its path in probe. */
SHIM_HELPER void probe_argv(const fake_node *n, const char *const *args, char *probe, size_t len, const char **argv,
                            int max) {
    snprintf(probe, len, "%s/fake-cuda/tessera-cuda-probe", n->build);
    int k = 0;
    argv[k++] = probe;
    for (int i = 0; args && args[i] && k < max - 1; i++) argv[k++] = args[i];
    argv[k] = NULL;
}

/* Run the probe with args (NULL-terminated) in pod with share_mib; exit status, stdout and stderr. */
SHIM_HELPER int probe_run(const fake_node *n, const char *pod, const char *share_mib, const char *const *extra_env,
                          const char *const *args, char *out, size_t outlen, char *err, size_t errlen) {
    char probe[700];
    const char *argv[48];
    probe_argv(n, args, probe, sizeof probe, argv, 48);
    proc_env e;
    env_for(&e, n, pod, share_mib, extra_env);
    return run_capture(argv, e.envp, out, outlen, err, errlen);
}

/* A probe left running: its pid and its stdout, read line by line. */
typedef struct bg_probe { pid_t pid; FILE *out; } bg_probe;

SHIM_HELPER bool probe_start(bg_probe *b, const fake_node *n, const char *pod, const char *share_mib,
                             const char *const *extra_env, const char *const *args) {
    char probe[700];
    const char *argv[48];
    probe_argv(n, args, probe, sizeof probe, argv, 48);
    proc_env e;
    env_for(&e, n, pod, share_mib, extra_env);
    int po[2];
    if (pipe(po) != 0) return false;
    b->pid = fork();
    if (b->pid == 0) {
        dup2(po[1], 1);
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 2);
        close(po[0]);
        close(po[1]);
        execve(argv[0], (char *const *)argv, (char *const *)e.envp);
        _exit(127);
    }
    close(po[1]);
    b->out = fdopen(po[0], "r");
    return b->pid > 0 && b->out;
}

/* Read the running probe's lines until one starts with want (true) or it ends (false); the line in got. */
SHIM_HELPER bool probe_wait_line(bg_probe *b, const char *want, char *got, size_t len) {
    while (fgets(got, (int)len, b->out)) {
        got[strcspn(got, "\n")] = 0;
        if (!strncmp(got, want, strlen(want))) return true;
    }
    return false;
}

/* Kill (signal sig) and reap; its exit status as run_capture reports it. */
SHIM_HELPER int probe_stop(bg_probe *b, int sig) {
    if (sig) kill(b->pid, sig);
    int st = 0;
    waitpid(b->pid, &st, 0);
    if (b->out) fclose(b->out);
    b->out = NULL;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif
