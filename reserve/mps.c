/* mps.c -- the MPS control daemon of a reservation pod (reserve/mps.h). */
#include "reserve/mps.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define QUIT_WAIT_MS  3000  /* under the reservation pod's terminationGracePeriodSeconds (5) */
#define PROBE_MS      2000  /* one client-mode command */
#define POLL_MS       100
#define TAIL_LINES    5

struct reserve_mps {
    char uuid[128];
    char pipe_dir[PATH_MAX], log_dir[PATH_MAX];
    char program[PATH_MAX];
    pid_t pid;      /* the daemon; 0 once reaped */
    int timeout_ms; /* how long a (re)started daemon may take to answer */
    char **envp;    /* the daemon's (and client mode's) environment */
};

void reserve_mps_config_defaults(reserve_mps_config *cfg) {
    cfg->root = RESERVE_MPS_ROOT;
    cfg->shm_dir = NULL;
    cfg->program = RESERVE_MPS_PROGRAM;
    cfg->timeout_ms = RESERVE_MPS_TIMEOUT_MS;
}

const char *reserve_mps_pipe_dir(const reserve_mps *m) { return m->pipe_dir; }
const char *reserve_mps_log_dir(const reserve_mps *m) { return m->log_dir; }
pid_t reserve_mps_pid(const reserve_mps *m) { return m->pid; }

static void nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void reserve_mps_tail(const char *path, int n, char *out, size_t outlen) {
    if (outlen) out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f || outlen == 0) {
        if (f) fclose(f);
        return;
    }
    enum { WINDOW = 65536 }; /* the end of the file is enough: its last lines */
    char *buf = malloc(WINDOW);
    if (!buf) {
        fclose(f);
        return;
    }
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    long from = size > WINDOW - 1 ? size - WINDOW + 1 : 0;
    size_t len = 0;
    if (size > 0 && fseek(f, from, SEEK_SET) == 0) len = fread(buf, 1, WINDOW - 1, f);
    fclose(f);
    buf[len] = 0;
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) buf[--len] = 0;
    /* walk back over n line breaks */
    size_t start = len;
    for (int lines = 0; start > 0; start--)
        if (buf[start - 1] == '\n' && ++lines == n) break;
    size_t o = 0;
    for (size_t i = start; i < len && o + 4 < outlen; i++) {
        if (buf[i] == '\r') continue;
        if (buf[i] == '\n') {
            o += (size_t)snprintf(out + o, outlen - o, " | ");
            continue;
        }
        out[o++] = buf[i];
    }
    out[o < outlen ? o : outlen - 1] = 0;
    free(buf);
}

/* why += "; control.log: <last lines>" when the daemon wrote any. */
static void add_tail(const reserve_mps *m, char *why, size_t whylen) {
    char path[PATH_MAX + 16], tail[1024];
    snprintf(path, sizeof path, "%s/control.log", m->log_dir);
    reserve_mps_tail(path, TAIL_LINES, tail, sizeof tail);
    size_t used = strlen(why);
    if (tail[0] && used < whylen) snprintf(why + used, whylen - used, "; control.log: %s", tail);
}

static void status_text(int st, char *out, size_t len) {
    if (WIFEXITED(st)) snprintf(out, len, "exited with status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st)) snprintf(out, len, "was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else snprintf(out, len, "stopped (wait status %d)", st);
}

/* The process environment without the variables we set, then ours. */
static char **make_env(const char *uuid, const char *pipe_dir, const char *log_dir) {
    static const char *const ours[] = {"CUDA_VISIBLE_DEVICES=", "CUDA_MPS_PIPE_DIRECTORY=", "CUDA_MPS_LOG_DIRECTORY="};
    size_t n = 0;
    while (environ && environ[n]) n++;
    char **envp = calloc(n + 4, sizeof *envp);
    if (!envp) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool skip = false;
        for (int j = 0; j < 3 && !skip; j++) skip = strncmp(environ[i], ours[j], strlen(ours[j])) == 0;
        if (!skip && !(envp[k++] = strdup(environ[i]))) goto oom;
    }
    const char *vals[3] = {uuid, pipe_dir, log_dir};
    for (int j = 0; j < 3; j++) {
        size_t len = strlen(ours[j]) + strlen(vals[j]) + 1;
        if (!(envp[k] = malloc(len))) goto oom;
        snprintf(envp[k++], len, "%s%s", ours[j], vals[j]);
    }
    return envp;
oom:
    for (size_t i = 0; i < k; i++) free(envp[i]);
    free(envp);
    return NULL;
}

static void free_env(char **envp) {
    for (size_t i = 0; envp && envp[i]; i++) free(envp[i]);
    free(envp);
}

/* In a forked child: the signals tessera-reserve blocks are unblocked (a mask survives exec), and the child goes
 * when its parent does. */
static void child_setup(pid_t parent) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(1); /* the parent went before prctl took effect */
}

static int wait_child(pid_t pid, int *st, int ms) {
    for (long long end = now_ms() + ms;;) {
        pid_t r = waitpid(pid, st, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR)) return r == pid ? 0 : -1;
        if (now_ms() >= end) return 1;
        nap_ms(10);
    }
}

static int run_command(const char *program, char **envp, const char *command, char *out, size_t outlen, int ms) {
    if (outlen) out[0] = 0;
    int in[2], outp[2];
    if (pipe2(in, O_CLOEXEC) != 0) return -1;
    if (pipe2(outp, O_CLOEXEC) != 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        child_setup(parent);
        dup2(in[0], 0);
        dup2(outp[1], 1);
        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (null >= 0) dup2(null, 2); /* "Cannot find MPS control daemon process" while it starts: not news */
        char *argv[] = {(char *)program, NULL};
        execvpe(program, argv, envp);
        _exit(127);
    }
    close(in[0]);
    close(outp[1]);
    if (pid < 0) {
        close(in[1]);
        close(outp[0]);
        return -1;
    }
    /* a command line is far below the pipe's capacity: this write never blocks */
    size_t clen = strlen(command);
    bool wrote = write(in[1], command, clen) == (ssize_t)clen && write(in[1], "\n", 1) == 1;
    close(in[1]);
    size_t got = 0;
    long long end = now_ms() + ms;
    bool timed_out = false;
    for (;;) {
        long long left = end - now_ms();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd p = {.fd = outp[0], .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            timed_out = r == 0;
            break;
        }
        char buf[512];
        ssize_t n = read(outp[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        for (ssize_t i = 0; i < n && got + 1 < outlen; i++) out[got++] = buf[i];
        if (outlen) out[got] = 0;
    }
    close(outp[0]);
    int st = 0;
    if (timed_out || wait_child(pid, &st, 500) != 0) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
        return -1;
    }
    if (!wrote) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int reserve_mps_command(const reserve_mps *m, const char *command, char *out, size_t outlen, int timeout_ms) {
    return run_command(m->program, m->envp, command, out, outlen, timeout_ms);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) == 0 || errno == ENOENT ? 0 : -1;
}

static int rm_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
    return nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* mkdir (EEXIST is fine) and chmod to mode: the umask must not narrow it. */
static int make_dir(const char *path, mode_t mode, char *why, size_t whylen) {
    if (mkdir(path, mode) != 0 && errno != EEXIST) {
        snprintf(why, whylen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(why, whylen, "%s is not a directory", path);
        return -1;
    }
    if ((st.st_mode & 07777) != mode && chmod(path, mode) != 0) {
        snprintf(why, whylen, "cannot make %s mode %04o: %s", path, (unsigned)mode, strerror(errno));
        return -1;
    }
    return 0;
}

/* Step 1 of mps.h. */
static int prepare_dirs(const reserve_mps_config *cfg, reserve_mps *m, char *why, size_t whylen) {
    char base[PATH_MAX], prev[PATH_MAX + 16], pidfile[PATH_MAX + 32];
    if (make_dir(cfg->root, 0755, why, whylen) != 0) return -1;
    snprintf(base, sizeof base, "%s/%s", cfg->root, m->uuid);
    if (make_dir(base, 0755, why, whylen) != 0) return -1;
    snprintf(pidfile, sizeof pidfile, "%s/nvidia-cuda-mps-control.pid", m->pipe_dir);
    if (access(pidfile, F_OK) == 0) {
        char out[64];
        if (run_command(m->program, m->envp, "get_server_list", out, sizeof out, PROBE_MS) == 0) {
            char pid[32] = "";
            FILE *f = fopen(pidfile, "r");
            if (f) {
                if (!fgets(pid, sizeof pid, f)) pid[0] = 0;
                fclose(f);
            }
            pid[strcspn(pid, "\r\n")] = 0;
            snprintf(why, whylen, "an MPS control daemon (pid %s) already answers in %s: another reservation of GPU %s "
                     "runs one, and tessera-reserve does not stop a daemon it did not start",
                     pid[0] ? pid : "unknown", m->pipe_dir, m->uuid);
            return -1;
        }
    }
    if (rm_tree(m->pipe_dir) != 0) {
        snprintf(why, whylen, "cannot remove the stale pipe directory %s: %s", m->pipe_dir, strerror(errno));
        return -1;
    }
    snprintf(prev, sizeof prev, "%s.previous", m->log_dir);
    if (access(m->log_dir, F_OK) == 0 && (rm_tree(prev) != 0 || rename(m->log_dir, prev) != 0)) {
        snprintf(why, whylen, "cannot keep the previous run's log %s as %s: %s", m->log_dir, prev, strerror(errno));
        return -1;
    }
    if (make_dir(m->pipe_dir, 01777, why, whylen) != 0 || make_dir(m->log_dir, 01777, why, whylen) != 0) return -1;
    char shm[PATH_MAX];
    if (cfg->shm_dir) snprintf(shm, sizeof shm, "%s", cfg->shm_dir);
    else snprintf(shm, sizeof shm, "%s/shm", cfg->root);
    return make_dir(shm, 01777, why, whylen); /* MPS clients of every uid write there */
}

/* What to tell when execvp found no program. */
static void not_found(const reserve_mps *m, int err, char *why, size_t whylen) {
    const char *caps = getenv("NVIDIA_DRIVER_CAPABILITIES"), *path = getenv("PATH");
    if (err == ENOENT && !strchr(m->program, '/'))
        snprintf(why, whylen, "%s was not found on PATH (%s): the NVIDIA container runtime mounts it only into "
                 "containers whose NVIDIA_DRIVER_CAPABILITIES include compute (this container's: %s)", m->program,
                 path ? path : "unset", caps ? caps : "unset");
    else
        snprintf(why, whylen, "cannot run %s: %s", m->program, strerror(err));
}

/* Step 2: fork and exec `program -f`. The exec's errno comes back over a close-on-exec pipe (nothing read: it ran). */
static int spawn_daemon(reserve_mps *m, char *why, size_t whylen) {
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) != 0) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        child_setup(parent);
        close(ep[0]);
        int null = open("/dev/null", O_RDONLY);
        if (null >= 0) dup2(null, 0);
        char *argv[] = {m->program, "-f", NULL};
        execvpe(m->program, argv, m->envp);
        int e = errno;
        if (write(ep[1], &e, sizeof e) != (ssize_t)sizeof e) {}
        _exit(127);
    }
    close(ep[1]);
    if (pid < 0) {
        close(ep[0]);
        snprintf(why, whylen, "fork: %s", strerror(errno));
        return -1;
    }
    int e = 0;
    ssize_t n;
    while ((n = read(ep[0], &e, sizeof e)) < 0 && errno == EINTR) {}
    close(ep[0]);
    if (n == (ssize_t)sizeof e) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
        not_found(m, e, why, whylen);
        return -1;
    }
    m->pid = pid;
    return 0;
}

static void reap_or_kill(reserve_mps *m) {
    if (!m->pid) return;
    int st;
    kill(m->pid, SIGTERM);
    if (wait_child(m->pid, &st, QUIT_WAIT_MS) != 0) {
        kill(m->pid, SIGKILL);
        while (waitpid(m->pid, &st, 0) < 0 && errno == EINTR) {}
    }
    m->pid = 0;
}

static void mps_free(reserve_mps *m) {
    if (!m) return;
    free_env(m->envp);
    free(m);
}

/* Step 3: until the daemon (just spawned) answers get_default_active_thread_percentage, exits, or timeout_ms is up.
 * 0, or -1 with why (the daemon reaped or killed: m->pid is 0). */
static int await_answer(reserve_mps *m, char *why, size_t whylen) {
    for (long long end = now_ms() + m->timeout_ms;;) {
        int st;
        pid_t r = waitpid(m->pid, &st, WNOHANG);
        if (r == m->pid) {
            char how[128];
            status_text(st, how, sizeof how);
            snprintf(why, whylen, "the MPS control daemon (%s -f, pid %ld) %s before it answered", m->program,
                     (long)m->pid, how);
            add_tail(m, why, whylen);
            m->pid = 0;
            return -1;
        }
        char out[64], *end_num;
        if (run_command(m->program, m->envp, "get_default_active_thread_percentage", out, sizeof out, PROBE_MS) == 0) {
            double pct = strtod(out, &end_num);
            if (end_num != out && pct > 0) return 0;
        }
        if (now_ms() >= end) {
            snprintf(why, whylen, "the MPS control daemon (%s -f, pid %ld) did not answer "
                     "get_default_active_thread_percentage within %d s", m->program, (long)m->pid,
                     (m->timeout_ms + 999) / 1000);
            add_tail(m, why, whylen);
            reap_or_kill(m);
            return -1;
        }
        nap_ms(POLL_MS);
    }
}

reserve_mps *reserve_mps_start(const reserve_mps_config *cfg, const char *uuids, char *why, size_t whylen) {
    if (!uuids || strchr(uuids, ',')) {
        snprintf(why, whylen, "--mps runs the MPS control daemon of exactly one GPU, and the device plugin gave this "
                 "container %s", uuids ? uuids : "none");
        return NULL;
    }
    if (strncmp(uuids, "GPU-", 4) != 0 || strchr(uuids, '/') || strlen(uuids) >= sizeof ((reserve_mps *)0)->uuid) {
        snprintf(why, whylen, "--mps runs MPS on whole GPUs only (a GPU UUID, GPU-...), and this container got %s",
                 uuids);
        return NULL;
    }
    reserve_mps *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    snprintf(m->uuid, sizeof m->uuid, "%s", uuids);
    snprintf(m->program, sizeof m->program, "%s", cfg->program);
    int a = snprintf(m->pipe_dir, sizeof m->pipe_dir, "%s/%s/pipe", cfg->root, m->uuid);
    int b = snprintf(m->log_dir, sizeof m->log_dir, "%s/%s/log", cfg->root, m->uuid);
    if (a < 0 || b < 0 || (size_t)a >= sizeof m->pipe_dir || (size_t)b >= sizeof m->log_dir) {
        snprintf(why, whylen, "the MPS directory %s is too long", cfg->root);
        mps_free(m);
        return NULL;
    }
    if (!(m->envp = make_env(m->uuid, m->pipe_dir, m->log_dir))) {
        snprintf(why, whylen, "out of memory");
        mps_free(m);
        return NULL;
    }
    m->timeout_ms = cfg->timeout_ms;
    if (prepare_dirs(cfg, m, why, whylen) != 0 || spawn_daemon(m, why, whylen) != 0 || await_answer(m, why, whylen) != 0) {
        mps_free(m);
        return NULL;
    }
    return m;
}

int reserve_mps_restart(reserve_mps *m, char *why, size_t whylen) {
    if (m->pid) return 0;
    /* The dead daemon's socket and pid file (ours: reserve_mps_alive reaped it); its log stays, so control.log tells the
     * whole story. A new daemon would refuse to start over a pid file that looks like another instance's. */
    static const char *const stale[] = {"control", "control_lock", "nvidia-cuda-mps-control.pid"};
    for (size_t i = 0; i < sizeof stale / sizeof stale[0]; i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "%s/%s", m->pipe_dir, stale[i]);
        if (unlink(path) != 0 && errno != ENOENT) {
            snprintf(why, whylen, "cannot remove the dead MPS control daemon's %s: %s", path, strerror(errno));
            return -1;
        }
    }
    if (spawn_daemon(m, why, whylen) != 0) return -1;
    return await_answer(m, why, whylen);
}

bool reserve_mps_alive(reserve_mps *m, char *why, size_t whylen) {
    if (!m->pid) {
        snprintf(why, whylen, "the MPS control daemon of GPU %s is not running", m->uuid);
        return false;
    }
    int st;
    if (waitpid(m->pid, &st, WNOHANG) != m->pid) return true;
    char how[128];
    status_text(st, how, sizeof how);
    snprintf(why, whylen, "the MPS control daemon of GPU %s (pid %ld) %s: the MPS shares of this GPU lost their server",
             m->uuid, (long)m->pid, how);
    add_tail(m, why, whylen);
    m->pid = 0;
    return false;
}

void reserve_mps_stop(reserve_mps *m) {
    if (!m) return;
    if (m->pid) {
        char out[256];
        run_command(m->program, m->envp, "quit", out, sizeof out, PROBE_MS);
        int st;
        if (wait_child(m->pid, &st, QUIT_WAIT_MS) != 0) {
            kill(m->pid, SIGKILL);
            while (waitpid(m->pid, &st, 0) < 0 && errno == EINTR) {}
        }
        m->pid = 0;
    }
    mps_free(m);
}
