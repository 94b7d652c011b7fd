/* test_reserve_mps.c -- tessera-reserve --mps and the fake nvidia-cuda-mps-control it starts.
 *
 * The fake daemon first (build/fake-cuda/bin/nvidia-cuda-mps-control, tests/support/fake_mps_control.c): its files,
 * commands and log lines as NVIDIA documents them, and the socket protocol the fake driver's MPS client side speaks
 * (one server uid at a time, the client cap, defaults taken when a server starts). Then the real build/tessera-reserve
 * --mps against the fake API server with the fake daemon on PATH: it publishes the UUID only once the daemon answers,
 * a daemon that does not start or never answers becomes tessera.io/reserve-error with its control.log, one that dies
 * later is started again (and becomes the error beside the UUID once --mps-restarts are spent),
 * stale directories of a previous run are cleaned, and SIGTERM quits the daemon.
 */
#include "harness.h"
#include "ext_proc.h"
#include "reserve_proc.h"
#include "reserve/mps.h"
#include "tests/support/fake_apiserver.h"

#include <errno.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define MPS_UUID "GPU-8f6d2c1e-0b1a-4c3d-9e8f-0123456789ab"
#define MPS_NS   "tessera-node"
#define MPS_POD  "tessera-rsv-n1-g0-1"

/* A temporary tree: pipe/ and log/ for a daemon the test starts itself, mps/ as tessera-reserve's --mps-root, and
 * mps/shm (mode 0755, as hostPath DirectoryOrCreate makes it) when a test makes it. */
typedef struct mtree {
    char root[256], pipe[300], log[300], shm[300], mps[300];
    char rpipe[400], rlog[400]; /* mps/<UUID>/pipe and /log: tessera-reserve's */
} mtree;

static void mtree_new(mtree *t) {
    snprintf(t->root, sizeof t->root, "/tmp/tessera-mps-XXXXXX");
    if (!mkdtemp(t->root)) abort();
    snprintf(t->pipe, sizeof t->pipe, "%s/pipe", t->root);
    snprintf(t->log, sizeof t->log, "%s/log", t->root);
    snprintf(t->shm, sizeof t->shm, "%s/mps/shm", t->root);
    snprintf(t->mps, sizeof t->mps, "%s/mps", t->root);
    snprintf(t->rpipe, sizeof t->rpipe, "%s/" MPS_UUID "/pipe", t->mps);
    snprintf(t->rlog, sizeof t->rlog, "%s/" MPS_UUID "/log", t->mps);
}

static void mtree_free(mtree *t) {
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->root);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", t->root);
}

static bool fake_mps_path(char *out, size_t len) {
    return sibling_binary_path("fake-cuda/bin/nvidia-cuda-mps-control", out, len);
}

static void put_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) abort();
    fputs(text, f);
    fclose(f);
}

static long read_pid_file(const char *pipe_dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/nvidia-cuda-mps-control.pid", pipe_dir);
    char *s = slurp(path);
    long pid = strtol(s, NULL, 10);
    free(s);
    return pid;
}

static char *read_in(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return slurp(path);
}

static bool exists_in(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static unsigned mode_of(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (unsigned)(st.st_mode & 07777) : 0;
}

/* The fake with args (NULL: client mode), the pipe/log directories given, input on stdin, stdout and stderr into
 * out. Its exit status, or -1 after 10 s. */
static int mps_run(const char *pipe_dir, const char *log_dir, const char *arg, const char *input, const char *extra_env,
                   char *out, size_t outlen) {
    char bin[600], pe[500], le[500];
    out[0] = 0;
    if (!fake_mps_path(bin, sizeof bin)) return -1;
    snprintf(pe, sizeof pe, "CUDA_MPS_PIPE_DIRECTORY=%s", pipe_dir);
    snprintf(le, sizeof le, "CUDA_MPS_LOG_DIRECTORY=%s", log_dir);
    char *envp[] = {pe, le, (char *)extra_env, NULL};
    char *argv[] = {bin, (char *)arg, NULL};
    int in[2], op[2];
    if (pipe(in) != 0) return -1;
    if (pipe(op) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(in[0], 0);
        dup2(op[1], 1);
        dup2(op[1], 2);
        close(in[0]), close(in[1]), close(op[0]), close(op[1]);
        execve(bin, argv, envp);
        _exit(127);
    }
    close(in[0]);
    close(op[1]);
    if (input && write(in[1], input, strlen(input)) < 0) {}
    close(in[1]);
    size_t got = 0;
    for (;;) {
        struct pollfd p = {.fd = op[0], .events = POLLIN};
        if (poll(&p, 1, TEST_PATIENCE_MS) <= 0) break;
        ssize_t n = read(op[0], out + got, outlen - 1 - got);
        if (n <= 0) break;
        got += (size_t)n;
        if (got == outlen - 1) break;
    }
    out[got] = 0;
    close(op[0]);
    return wait_exit(pid, TEST_PATIENCE_MS);
}

/* A CUDA client's socket to the daemon of pipe_dir, its CLIENT line sent. -1 when nothing listens. */
static int mps_client(const char *pipe_dir, long pid, long uid) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/control", pipe_dir);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    char line[64];
    int n = snprintf(line, sizeof line, "CLIENT %ld %ld\n", pid, uid);
    if (write(fd, line, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One line from fd (without its newline) within ms; false on EOF or timeout (then line holds "EOF"/"TIMEOUT"). */
static bool read_line(int fd, char *line, size_t len, int ms) {
    size_t got = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, ms) <= 0) {
            snprintf(line, len, "TIMEOUT");
            return false;
        }
        char c;
        if (read(fd, &c, 1) != 1) {
            snprintf(line, len, "EOF");
            return false;
        }
        if (c == '\n') break;
        if (got + 1 < len) line[got++] = c;
    }
    line[got] = 0;
    return true;
}

/* Every line of a log has the documented shape "[YYYY-MM-DD HH:MM:SS.mmm <who> <pid>] text". */
static bool log_lines_shaped(const char *text, const char *who) {
    char pattern[200];
    snprintf(pattern, sizeof pattern, "^\\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} %s "
             "[0-9]+\\] .+$", who);
    regex_t re;
    if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0) return false;
    char *copy = strdup(text), *save = NULL;
    bool ok = true;
    int lines = 0;
    for (char *l = strtok_r(copy, "\n", &save); l && ok; l = strtok_r(NULL, "\n", &save), lines++)
        ok = regexec(&re, l, 0, NULL, 0) == 0;
    free(copy);
    regfree(&re);
    return ok && lines > 0;
}

/* Gone, or a zombie (a -d daemon's parent has exited: whoever adopted it may reap it late). */
static bool pid_gone(long pid, int ms) {
    for (int64_t end = test_now_ms() + ms; test_now_ms() <= end;) {
        if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return true;
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        char *stat_line = slurp(path);
        const char *paren = strrchr(stat_line, ')');
        bool zombie = paren && paren[1] == ' ' && paren[2] == 'Z';
        free(stat_line);
        if (zombie) return true;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* ---- the fake daemon ---------------------------------------------------------------------------------------- */

TEST(mps_fake_daemon_files_commands_and_logs) {
    char bin[600], out[4096];
    CHECK_MSG(fake_mps_path(bin, sizeof bin), "the fake nvidia-cuda-mps-control is not built (run make)");
    mtree t;
    mtree_new(&t);
    CHECK_INT(mps_run(t.pipe, t.log, "-d", NULL, NULL, out, sizeof out), 0);
    long pid = read_pid_file(t.pipe);
    bool alive = pid > 0 && kill((pid_t)pid, 0) == 0;
    struct stat st;
    char sock[400];
    snprintf(sock, sizeof sock, "%s/control", t.pipe);
    bool is_sock = stat(sock, &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0777;
    int rc_get = mps_run(t.pipe, t.log, NULL,
                         "get_default_active_thread_percentage\nset_default_active_thread_percentage 37.5\n"
                         "get_default_active_thread_percentage\nset_default_active_thread_percentage 0\n"
                         "set_default_device_pinned_mem_limit 0 2G\nget_default_device_pinned_mem_limit 0\n"
                         "get_default_device_pinned_mem_limit 1\nset_default_device_pinned_mem_limit 1 2X\n"
                         "get_server_list\nbogus\n", NULL, out, sizeof out);
    char *expect_out = strdup(out);
    int rc_quit = mps_run(t.pipe, t.log, NULL, "quit", NULL, out, sizeof out); /* no newline, as Go's client writes */
    bool gone = pid_gone(pid, TEST_PATIENCE_MS);
    int rc_none = mps_run(t.pipe, t.log, NULL, "get_server_list\n", NULL, out, sizeof out);
    char *log = read_in(t.log, "control.log");
    bool pid_left = exists_in(t.pipe, "nvidia-cuda-mps-control.pid"), sock_left = exists_in(t.pipe, "control");
    mtree_free(&t);
    CHECK(alive);
    CHECK(is_sock);
    CHECK_INT(rc_get, 0);
    CHECK_STR(expect_out, "100.0\n37.5\nInvalid active thread percentage 0: a number above 0 and at most 100\n"
                          "2048M\n0\nInvalid device pinned memory limit 2X: an integer followed by G or M\n"
                          "Unrecognized command: bogus\n");
    free(expect_out);
    CHECK_INT(rc_quit, 0);
    CHECK(gone);
    CHECK(!pid_left && !sock_left);
    CHECK_INT(rc_none, 1);
    CHECK_CONTAINS(out, "Cannot find MPS control daemon process");
    CHECK_CONTAINS(log, "Starting control daemon using socket ");
    CHECK_CONTAINS(log, "] Cmd:set_default_active_thread_percentage 37.5\n");
    CHECK_CONTAINS(log, "] Cmd:quit\n");
    CHECK(log_lines_shaped(log, "Control"));
    free(log);
}

TEST(mps_fake_one_server_uid_at_a_time) {
    char bin[600], out[4096], line[256], first[256];
    CHECK_MSG(fake_mps_path(bin, sizeof bin), "the fake nvidia-cuda-mps-control is not built (run make)");
    mtree t;
    mtree_new(&t);
    CHECK_INT(mps_run(t.pipe, t.log, "-d", NULL, NULL, out, sizeof out), 0);
    int a = mps_client(t.pipe, 101, 1000), b = mps_client(t.pipe, 102, 1000), c = -1;
    bool ok_a = read_line(a, first, sizeof first, TEST_PATIENCE_MS), ok_b = read_line(b, line, sizeof line, TEST_PATIENCE_MS);
    long spid = 0;
    double pct = 0;
    char lim[64] = "";
    bool parsed = sscanf(first, "READY %ld %lf %63s", &spid, &pct, lim) == 3;
    bool same = strcmp(first, line) == 0;
    c = mps_client(t.pipe, 201, 2000);
    char wait_line[256], clients[256], later[256], ready2[256];
    bool ok_c = read_line(c, wait_line, sizeof wait_line, TEST_PATIENCE_MS);
    mps_run(t.pipe, t.log, NULL, "get_client_list 0\n", NULL, out, sizeof out); /* a pid that is no server */
    bool none_for_other = out[0] == 0;
    char cmd[64];
    snprintf(cmd, sizeof cmd, "get_client_list %ld\n", spid);
    mps_run(t.pipe, t.log, NULL, cmd, NULL, clients, sizeof clients);
    close(a);
    bool still_waiting = !read_line(c, later, sizeof later, 300); /* 102 of uid 1000 still runs */
    close(b);
    bool ok_r2 = read_line(c, ready2, sizeof ready2, TEST_PATIENCE_MS);
    long spid2 = 0;
    sscanf(ready2, "READY %ld", &spid2);
    bool old_gone = pid_gone(spid, TEST_PATIENCE_MS);
    mps_run(t.pipe, t.log, NULL, "get_server_list\n", NULL, out, sizeof out);
    char *list = strdup(out);
    close(c);
    mps_run(t.pipe, t.log, NULL, "quit\n", NULL, out, sizeof out);
    char *clog = read_in(t.log, "control.log"), *slog = read_in(t.log, "server.log");
    mtree_free(&t);
    CHECK_MSG(ok_a && ok_b && parsed, "first client: \"%s\"", first);
    CHECK(pct == 100.0);
    CHECK_STR(lim, "-");
    CHECK(same);
    CHECK(ok_c);
    char want[128];
    snprintf(want, sizeof want, "WAIT %ld 1000", spid);
    CHECK_STR(wait_line, want);
    CHECK(none_for_other);
    CHECK_STR(clients, "101\n102\n");
    CHECK_MSG(still_waiting, "the uid 2000 client got \"%s\" while a uid 1000 client still ran", later);
    CHECK_MSG(ok_r2 && spid2 > 0 && spid2 != spid, "after the uid 1000 clients left: \"%s\"", ready2);
    CHECK(old_gone);
    snprintf(want, sizeof want, "%ld\n", spid2);
    CHECK_STR(list, want);
    free(list);
    snprintf(want, sizeof want, "Server %ld exited with status 0", spid);
    CHECK_CONTAINS(clog, want);
    snprintf(want, sizeof want, "Starting new server %ld for user 2000", spid2);
    CHECK_CONTAINS(clog, want);
    CHECK_CONTAINS(clog, "NEW CLIENT 102 from user 1000: Server already exists");
    snprintf(want, sizeof want, "Server %ld] New client 101 connected", spid);
    CHECK_CONTAINS(slog, want);
    CHECK_CONTAINS(slog, "] Client 101 disconnected");
    CHECK(log_lines_shaped(slog, "Server"));
    CHECK(log_lines_shaped(clog, "Control"));
    free(clog);
    free(slog);
}

/* The cap per server; defaults are taken when a server starts (a set_default_* afterwards applies to the next). */
TEST(mps_fake_client_cap_and_defaults_at_server_start) {
    char bin[600], out[1024], l1[128], l2[128], l3[128], l4[128];
    CHECK_MSG(fake_mps_path(bin, sizeof bin), "the fake nvidia-cuda-mps-control is not built (run make)");
    mtree t;
    mtree_new(&t);
    CHECK_INT(mps_run(t.pipe, t.log, "-d", NULL, "FAKE_MPS_MAX_CLIENTS=2", out, sizeof out), 0);
    int a = mps_client(t.pipe, 11, 500), b = mps_client(t.pipe, 12, 500);
    read_line(a, l1, sizeof l1, TEST_PATIENCE_MS);
    read_line(b, l2, sizeof l2, TEST_PATIENCE_MS);
    mps_run(t.pipe, t.log, NULL, "set_default_active_thread_percentage 25\nset_default_device_pinned_mem_limit 0 3G\n",
            NULL, out, sizeof out);
    int c = mps_client(t.pipe, 13, 500);
    bool got3 = read_line(c, l3, sizeof l3, TEST_PATIENCE_MS);
    bool closed3 = !read_line(c, out, sizeof out, TEST_PATIENCE_MS);
    close(c);
    close(a);
    close(b);
    int d = mps_client(t.pipe, 21, 600); /* another uid on an idle server: a new server at once, new defaults */
    read_line(d, l4, sizeof l4, TEST_PATIENCE_MS);
    close(d);
    mps_run(t.pipe, t.log, NULL, "quit\n", NULL, out, sizeof out);
    mtree_free(&t);
    CHECK(!strncmp(l1, "READY ", 6) && !strncmp(l2, "READY ", 6));
    CHECK_CONTAINS(l2, " 100.0 -");
    CHECK(got3);
    CHECK_STR(l3, "REFUSED max-clients 2");
    CHECK(closed3);
    CHECK_CONTAINS(l4, " 25.0 0=3072");
}

TEST(mps_fake_quit_ends_clients_and_waiters) {
    char bin[600], out[1024], line[128];
    CHECK_MSG(fake_mps_path(bin, sizeof bin), "the fake nvidia-cuda-mps-control is not built (run make)");
    mtree t;
    mtree_new(&t);
    CHECK_INT(mps_run(t.pipe, t.log, "-d", NULL, NULL, out, sizeof out), 0);
    int a = mps_client(t.pipe, 31, 1), w = mps_client(t.pipe, 32, 2);
    read_line(a, line, sizeof line, TEST_PATIENCE_MS);
    read_line(w, line, sizeof line, TEST_PATIENCE_MS);
    bool waited = !strncmp(line, "WAIT ", 5);
    mps_run(t.pipe, t.log, NULL, "quit\n", NULL, out, sizeof out);
    char ra[128], rw[128];
    bool a_eof = !read_line(a, ra, sizeof ra, TEST_PATIENCE_MS) && !strcmp(ra, "EOF");
    read_line(w, rw, sizeof rw, TEST_PATIENCE_MS);
    close(a);
    close(w);
    mtree_free(&t);
    CHECK(waited);
    CHECK_MSG(a_eof, "a registered client read \"%s\" after quit", ra);
    CHECK_STR(rw, "REFUSED shutting-down");
}

TEST(mps_fake_refuses_second_daemon_and_failed_start) {
    char bin[600], out[1024];
    CHECK_MSG(fake_mps_path(bin, sizeof bin), "the fake nvidia-cuda-mps-control is not built (run make)");
    mtree t;
    mtree_new(&t);
    CHECK_INT(mps_run(t.pipe, t.log, "-d", NULL, NULL, out, sizeof out), 0);
    int second = mps_run(t.pipe, t.log, "-d", NULL, NULL, out, sizeof out);
    char *second_out = strdup(out);
    int rc_list = mps_run(t.pipe, t.log, NULL, "get_default_active_thread_percentage\n", NULL, out, sizeof out);
    char *first_still = strdup(out);
    mps_run(t.pipe, t.log, NULL, "quit\n", NULL, out, sizeof out);
    char other_pipe[400];
    snprintf(other_pipe, sizeof other_pipe, "%s/pipe2", t.root);
    int failed = mps_run(other_pipe, t.log, "-f", NULL, "FAKE_MPS_FAIL_START=MPS server failed to start", out,
                         sizeof out);
    bool no_socket = !exists_in(other_pipe, "control");
    char *log = read_in(t.log, "control.log");
    mtree_free(&t);
    CHECK_INT(second, 1);
    CHECK_CONTAINS(second_out, "An instance of this daemon is already running");
    free(second_out);
    CHECK_INT(rc_list, 0);
    CHECK_STR(first_still, "100.0\n");
    free(first_still);
    CHECK_INT(failed, 1);
    CHECK(no_socket);
    CHECK_CONTAINS(log, "] MPS server failed to start\n");
    free(log);
}

/* ---- tessera-reserve --mps ---------------------------------------------------------------------------------- */

typedef struct rsv {
    fake_api *f;
    pid_t pid;
    char out[400], err[400];
} rsv;

/* tessera-reserve --mps for MPS_UUID against a fresh fake API, the fake daemon's directory first on PATH unless
 * path_env is given; extra_env and extra_args are NULL-terminated (may be NULL). */
static bool rsv_start(rsv *r, const mtree *t, const char *path_env, const char *const *extra_env,
                      const char *const *extra_args) {
    char bin[600], fake[600], url[128], errbuf[256], path[900];
    memset(r, 0, sizeof *r);
    if (!reserve_path(bin, sizeof bin) || !fake_mps_path(fake, sizeof fake)) return false;
    *strrchr(fake, '/') = 0;
    r->f = fake_api_start(0, errbuf, sizeof errbuf);
    if (!r->f) return false;
    fake_api_url(r->f, url, sizeof url);
    fake_api_put(r->f, "pods", "{\"metadata\":{\"name\":\"" MPS_POD "\",\"namespace\":\"" MPS_NS "\"}}");
    snprintf(r->out, sizeof r->out, "%s/rsv.out", t->root);
    snprintf(r->err, sizeof r->err, "%s/rsv.err", t->root);
    if (path_env) snprintf(path, sizeof path, "PATH=%s", path_env);
    else snprintf(path, sizeof path, "PATH=%s:/usr/bin:/bin", fake);
    const char *argv[24] = {bin, "--kube-api", url, "--mps", "--mps-root", t->mps};
    int n = 6;
    for (int i = 0; extra_args && extra_args[i] && n < 23; i++) argv[n++] = extra_args[i];
    const char *envp[16] = {"NVIDIA_VISIBLE_DEVICES=" MPS_UUID, "POD_NAME=" MPS_POD, "POD_NAMESPACE=" MPS_NS, path};
    int e = 4;
    for (int i = 0; extra_env && extra_env[i] && e < 15; i++) envp[e++] = extra_env[i];
    r->pid = spawn((char *const *)argv, (char *const *)envp, r->out, r->err);
    return r->pid > 0;
}

/* SIGTERM; its exit status (-1: it did not exit within wait.h's patience, then killed). The log is printed when
 * asked. */
static int rsv_stop(rsv *r, bool show_log) {
    int rc = -1;
    if (r->pid > 0) {
        kill(r->pid, SIGTERM);
        rc = wait_exit(r->pid, TEST_PATIENCE_MS);
        if (rc < 0) kill(r->pid, SIGKILL), waitpid(r->pid, NULL, 0);
    }
    if (show_log || rc != 0) {
        char *log = slurp(r->err);
        fprintf(stdout, "    tessera-reserve log:\n%s", log);
        free(log);
    }
    fake_api_free(r->f);
    r->f = NULL;
    return rc;
}

/* The annotation once it is there (within ms), else NULL. */
static char *wait_annotation(rsv *r, const char *key, int ms) {
    for (int64_t end = test_now_ms() + ms; test_now_ms() <= end;) {
        char *v = pod_annotation(r->f, MPS_NS, MPS_POD, key);
        if (v) return v;
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* The daemon is slow to start (500 ms): the UUID appears only once it answers, with the daemon's directories; the
 * daemon runs for the GPU with the documented environment; SIGTERM quits it and exits 0. */
TEST(reserve_mps_publishes_once_the_daemon_answers_and_quits_on_sigterm) {
    mtree t;
    mtree_new(&t);
    mkdir(t.mps, 0755);
    mkdir(t.shm, 0755);
    rsv r;
    const char *env[] = {"FAKE_MPS_START_DELAY_MS=500", NULL};
    CHECK_MSG(rsv_start(&r, &t, NULL, env, NULL), "tessera-reserve or the fake daemon is not built (run make)");
    char *uuid = wait_annotation(&r, "tessera.io/gpu-uuid", TEST_PATIENCE_MS);
    /* at the moment the UUID is visible, a client can already reach the daemon */
    char out[256];
    int rc_answer = mps_run(t.rpipe, t.rlog, NULL, "get_default_active_thread_percentage\n", NULL, out, sizeof out);
    char *pipe_ann = pod_annotation(r.f, MPS_NS, MPS_POD, RESERVE_ANN_MPS_PIPE);
    char *log_ann = pod_annotation(r.f, MPS_NS, MPS_POD, RESERVE_ANN_MPS_LOG);
    char *err_ann = pod_annotation(r.f, MPS_NS, MPS_POD, "tessera.io/reserve-error");
    long dpid = read_pid_file(t.rpipe);
    char envpath[64];
    snprintf(envpath, sizeof envpath, "/proc/%ld/environ", dpid);
    bool vis = false, pipe_env = false, log_env = false;
    char want_pipe[500], want_log[500];
    snprintf(want_pipe, sizeof want_pipe, "CUDA_MPS_PIPE_DIRECTORY=%s", t.rpipe);
    snprintf(want_log, sizeof want_log, "CUDA_MPS_LOG_DIRECTORY=%s", t.rlog);
    FILE *ef = fopen(envpath, "r");
    char var[1024];
    size_t vl = 0;
    for (int ch; ef && (ch = fgetc(ef)) != EOF;) {
        if (ch && vl + 1 < sizeof var) { var[vl++] = (char)ch; continue; }
        var[vl] = 0;
        vis = vis || !strcmp(var, "CUDA_VISIBLE_DEVICES=" MPS_UUID);
        pipe_env = pipe_env || !strcmp(var, want_pipe);
        log_env = log_env || !strcmp(var, want_log);
        vl = 0;
    }
    if (ef) fclose(ef);
    unsigned pipe_mode = mode_of(t.rpipe), log_mode = mode_of(t.rlog), shm_mode = mode_of(t.shm);
    int rc = rsv_stop(&r, false);
    bool daemon_gone = pid_gone(dpid, TEST_PATIENCE_MS);
    bool sock_left = exists_in(t.rpipe, "control");
    char *clog = read_in(t.rlog, "control.log");
    char *rlog = slurp(r.err);
    mtree_free(&t);
    CHECK_STR(uuid, MPS_UUID);
    free(uuid);
    CHECK_INT(rc_answer, 0);
    CHECK_STR(out, "100.0\n");
    CHECK_STR(pipe_ann, t.rpipe);
    CHECK_STR(log_ann, t.rlog);
    CHECK(err_ann == NULL);
    free(pipe_ann);
    free(log_ann);
    CHECK(dpid > 0);
    CHECK(vis && pipe_env && log_env);
    CHECK_INT(pipe_mode, 01777);
    CHECK_INT(log_mode, 01777);
    CHECK_INT(shm_mode, 01777);
    CHECK_INT(rc, 0);
    CHECK(daemon_gone);
    CHECK(!sock_left);
    CHECK_CONTAINS(clog, "] Cmd:quit\n");
    free(clog);
    /* the order in tessera-reserve's own log: the daemon answered, then the annotation went out */
    const char *ready = strstr(rlog, "event=mps-ready"), *pub = strstr(rlog, "event=publishing");
    CHECK(ready && pub && ready < pub);
    free(rlog);
}

/* The daemon cannot start: the error, with its control.log, instead of the UUID; still alive until SIGTERM. */
TEST(reserve_mps_daemon_that_fails_to_start_is_a_reserve_error) {
    mtree t;
    mtree_new(&t);
    rsv r;
    const char *env[] = {"FAKE_MPS_FAIL_START=MPS is only supported on 64-bit Linux platforms", NULL};
    CHECK_MSG(rsv_start(&r, &t, NULL, env, NULL), "tessera-reserve or the fake daemon is not built (run make)");
    char *err = wait_annotation(&r, "tessera.io/reserve-error", TEST_PATIENCE_MS);
    char *uuid = pod_annotation(r.f, MPS_NS, MPS_POD, "tessera.io/gpu-uuid");
    bool alive = wait_exit(r.pid, 300) < 0;
    int rc = rsv_stop(&r, false);
    mtree_free(&t);
    CHECK_CONTAINS(err, "the MPS control daemon (nvidia-cuda-mps-control -f, pid ");
    CHECK_CONTAINS(err, "exited with status 1 before it answered; control.log: [");
    CHECK_CONTAINS(err, " Control ");
    CHECK_CONTAINS(err, "] MPS is only supported on 64-bit Linux platforms");
    free(err);
    CHECK(uuid == NULL);
    CHECK(alive);
    CHECK_INT(rc, 0);
}

TEST(reserve_mps_without_the_program_on_path_names_the_capability) {
    mtree t;
    mtree_new(&t);
    rsv r;
    const char *env[] = {"NVIDIA_DRIVER_CAPABILITIES=utility", NULL};
    CHECK_MSG(rsv_start(&r, &t, "/usr/bin:/bin", env, NULL), "tessera-reserve is not built (run make)");
    char *err = wait_annotation(&r, "tessera.io/reserve-error", TEST_PATIENCE_MS);
    int rc = rsv_stop(&r, false);
    mtree_free(&t);
    CHECK_CONTAINS(err, "nvidia-cuda-mps-control was not found on PATH (/usr/bin:/bin)");
    CHECK_CONTAINS(err, "NVIDIA_DRIVER_CAPABILITIES include compute (this container's: utility)");
    free(err);
    CHECK_INT(rc, 0);
}

/* With --mps-restarts 0, a daemon killed after the UUID was published is not started again: the error is published
 * beside the UUID (the pod still holds that device, and shares that run on it still use it), the directories go. */
TEST(reserve_mps_daemon_that_dies_later_is_a_reserve_error) {
    mtree t;
    mtree_new(&t);
    rsv r;
    const char *args[] = {"--mps-restarts", "0", NULL};
    CHECK_MSG(rsv_start(&r, &t, NULL, NULL, args), "tessera-reserve or the fake daemon is not built (run make)");
    char *uuid = wait_annotation(&r, "tessera.io/gpu-uuid", TEST_PATIENCE_MS);
    long dpid = read_pid_file(t.rpipe);
    if (dpid > 0) kill((pid_t)dpid, SIGKILL);
    char *err = wait_annotation(&r, "tessera.io/reserve-error", TEST_PATIENCE_MS);
    char *uuid_after = pod_annotation(r.f, MPS_NS, MPS_POD, "tessera.io/gpu-uuid");
    char *pipe_after = pod_annotation(r.f, MPS_NS, MPS_POD, RESERVE_ANN_MPS_PIPE);
    bool alive = wait_exit(r.pid, 300) < 0;
    int rc = rsv_stop(&r, false);
    mtree_free(&t);
    CHECK_STR(uuid, MPS_UUID);
    free(uuid);
    CHECK(dpid > 0);
    char want[200];
    snprintf(want, sizeof want, "the MPS control daemon of GPU " MPS_UUID " (pid %ld) was killed by signal 9", dpid);
    CHECK_CONTAINS(err, want);
    CHECK_CONTAINS(err, "control.log: [");
    CHECK_CONTAINS(err, "(not restarted: --mps-restarts 0)");
    free(err);
    CHECK_STR(uuid_after, MPS_UUID);
    free(uuid_after);
    CHECK(pipe_after == NULL);
    CHECK(alive);
    CHECK_INT(rc, 0);
}

/* A daemon killed under a running client is started again in the same directories: the client of the dead one sees
 * its connection end (its server is gone: CUDA's behaviour), a new client gets READY from the new daemon, the UUID and
 * the pipe directory stay published with no error, and the restart is logged with why (signal 9, control.log). Once
 * --mps-restarts (1 here) are spent, the next death is published as tessera.io/reserve-error, the UUID kept. */
TEST(reserve_mps_restarts_a_daemon_that_dies_under_running_clients) {
    mtree t;
    mtree_new(&t);
    rsv r;
    const char *args[] = {"--mps-restarts", "1", NULL};
    CHECK_MSG(rsv_start(&r, &t, NULL, NULL, args), "tessera-reserve or the fake daemon is not built (run make)");
    char *uuid = wait_annotation(&r, "tessera.io/gpu-uuid", TEST_PATIENCE_MS);
    char before[128] = "", lost[128] = "", after[128] = "";
    int c1 = mps_client(t.rpipe, 4101, 1000);
    bool ready1 = c1 >= 0 && read_line(c1, before, sizeof before, TEST_PATIENCE_MS);
    long dpid = read_pid_file(t.rpipe);
    if (dpid > 0) kill((pid_t)dpid, SIGKILL);
    bool c1_lost = c1 >= 0 && !read_line(c1, lost, sizeof lost, TEST_PATIENCE_MS) && !strcmp(lost, "EOF");
    if (c1 >= 0) close(c1);
    const char *restarted[] = {"event=mps-daemon-restarted"};
    bool logged = wait_log(r.err, restarted, 1, TEST_PATIENCE_MS) == 0;
    long dpid2 = read_pid_file(t.rpipe);
    int c2 = mps_client(t.rpipe, 4102, 1000);
    bool ready2 = c2 >= 0 && read_line(c2, after, sizeof after, TEST_PATIENCE_MS);
    if (c2 >= 0) close(c2);
    char *err_mid = pod_annotation(r.f, MPS_NS, MPS_POD, "tessera.io/reserve-error");
    char *uuid_mid = pod_annotation(r.f, MPS_NS, MPS_POD, "tessera.io/gpu-uuid");
    char *pipe_mid = pod_annotation(r.f, MPS_NS, MPS_POD, RESERVE_ANN_MPS_PIPE);
    char *log = slurp(r.err);
    /* the restart is spent: the next death is final */
    if (dpid2 > 0 && dpid2 != dpid) kill((pid_t)dpid2, SIGKILL);
    char *err = wait_annotation(&r, "tessera.io/reserve-error", TEST_PATIENCE_MS);
    char *uuid_end = pod_annotation(r.f, MPS_NS, MPS_POD, "tessera.io/gpu-uuid");
    char *clog = read_in(t.rlog, "control.log");
    int rc = rsv_stop(&r, false);
    mtree_free(&t);
    CHECK_STR(uuid, MPS_UUID);
    free(uuid);
    CHECK_MSG(ready1, "first client: \"%s\"", before);
    CHECK(dpid > 0);
    CHECK_MSG(c1_lost, "the dead daemon's client read \"%s\"", lost);
    CHECK_MSG(logged, "no event=mps-daemon-restarted in the log:\n%s", log);
    CHECK(dpid2 > 0 && dpid2 != dpid);
    CHECK_MSG(ready2 && !strncmp(after, "READY ", 6), "a client after the restart: \"%s\"", after);
    CHECK_MSG(err_mid == NULL, "an error while the daemon was restarted: %s", err_mid);
    free(err_mid);
    CHECK_STR(uuid_mid, MPS_UUID);
    free(uuid_mid);
    CHECK_STR(pipe_mid, t.rpipe);
    free(pipe_mid);
    char want[200];
    snprintf(want, sizeof want, "(pid %ld) was killed by signal 9", dpid);
    CHECK_CONTAINS(log, want);   /* the restart line says why */
    CHECK_CONTAINS(log, "control.log: [");
    free(log);
    snprintf(want, sizeof want, "(pid %ld) was killed by signal 9", dpid2);
    CHECK_CONTAINS(err, want);
    CHECK_CONTAINS(err, "(restarted 1 time in a row, at most 1: given up)");
    free(err);
    CHECK_STR(uuid_end, MPS_UUID);
    free(uuid_end);
    CHECK_CONTAINS(clog, "Starting control daemon");   /* one log across both daemons: the history stays */
    free(clog);
    CHECK_INT(rc, 0);
}

/* A previous run's pipe directory (a stale pid file, a leftover) is removed; its log is kept as log.previous. */
TEST(reserve_mps_cleans_a_previous_runs_directories) {
    mtree t;
    mtree_new(&t);
    char dir[400];
    snprintf(dir, sizeof dir, "%s/" MPS_UUID, t.mps);
    mkdir(t.mps, 0755);
    mkdir(dir, 0755);
    mkdir(t.rpipe, 0700);
    mkdir(t.rlog, 0700);
    char p[600];
    snprintf(p, sizeof p, "%s/nvidia-cuda-mps-control.pid", t.rpipe);
    put_file(p, "999999\n");
    snprintf(p, sizeof p, "%s/leftover", t.rpipe);
    put_file(p, "x");
    snprintf(p, sizeof p, "%s/control.log", t.rlog);
    put_file(p, "[2026-01-01 00:00:00.000 Control 1] the previous run\n");
    rsv r;
    CHECK_MSG(rsv_start(&r, &t, NULL, NULL, NULL), "tessera-reserve or the fake daemon is not built (run make)");
    char *uuid = wait_annotation(&r, "tessera.io/gpu-uuid", TEST_PATIENCE_MS);
    bool leftover = exists_in(t.rpipe, "leftover");
    long dpid = read_pid_file(t.rpipe);
    char prev[500];
    snprintf(prev, sizeof prev, "%s.previous", t.rlog);
    char *old = read_in(prev, "control.log"), *cur = read_in(t.rlog, "control.log");
    unsigned pipe_mode = mode_of(t.rpipe);
    int rc = rsv_stop(&r, false);
    mtree_free(&t);
    CHECK_STR(uuid, MPS_UUID);
    free(uuid);
    CHECK(!leftover);
    CHECK(dpid != 999999 && dpid > 0);
    CHECK_CONTAINS(old, "the previous run");
    CHECK(!strstr(cur, "the previous run"));
    CHECK_CONTAINS(cur, "Starting control daemon");
    free(old);
    free(cur);
    CHECK_INT(pipe_mode, 01777);
    CHECK_INT(rc, 0);
}

/* A daemon that still answers in the GPU's pipe directory is not ours to stop: refused, and it keeps running. */
TEST(reserve_mps_refuses_a_daemon_it_did_not_start) {
    char out[256];
    mtree t;
    mtree_new(&t);
    char dir[400];
    snprintf(dir, sizeof dir, "%s/" MPS_UUID, t.mps);
    mkdir(t.mps, 0755);
    mkdir(dir, 0755);
    int started = mps_run(t.rpipe, t.log, "-d", NULL, NULL, out, sizeof out);
    long other = read_pid_file(t.rpipe);
    rsv r;
    bool ok = rsv_start(&r, &t, NULL, NULL, NULL);
    char *err = ok ? wait_annotation(&r, "tessera.io/reserve-error", TEST_PATIENCE_MS) : NULL;
    int rc = ok ? rsv_stop(&r, false) : -1;
    int still = mps_run(t.rpipe, t.log, NULL, "get_default_active_thread_percentage\n", NULL, out, sizeof out);
    mps_run(t.rpipe, t.log, NULL, "quit\n", NULL, out, sizeof out);
    pid_gone(other, TEST_PATIENCE_MS);
    mtree_free(&t);
    CHECK_INT(started, 0);
    CHECK_MSG(ok, "tessera-reserve or the fake daemon is not built (run make)");
    char want[300];
    snprintf(want, sizeof want, "an MPS control daemon (pid %ld) already answers in ", other);
    CHECK_CONTAINS(err, want);
    CHECK_CONTAINS(err, "does not stop a daemon it did not start");
    free(err);
    CHECK_INT(rc, 0);
    CHECK_INT(still, 0);
}

/* A daemon that starts but never answers: refused after --mps-timeout, and killed. */
TEST(reserve_mps_daemon_that_never_answers_times_out) {
    mtree t;
    mtree_new(&t);
    char bindir[400], script[500];
    snprintf(bindir, sizeof bindir, "%s/bin", t.root);
    mkdir(bindir, 0755);
    snprintf(script, sizeof script, "%s/nvidia-cuda-mps-control", bindir);
    /* -f: hangs without listening; client mode: finds nobody */
    put_file(script, "#!/bin/sh\nif [ \"$1\" = -f ]; then exec sleep 60; fi\n"
                     "echo 'Cannot find MPS control daemon process' >&2\nexit 1\n");
    chmod(script, 0755);
    char path[600];
    snprintf(path, sizeof path, "%s:/usr/bin:/bin", bindir);
    rsv r;
    const char *args[] = {"--mps-timeout", "1", NULL};
    CHECK_MSG(rsv_start(&r, &t, path, NULL, args), "tessera-reserve is not built (run make)");
    char *err = wait_annotation(&r, "tessera.io/reserve-error", TEST_PATIENCE_MS);
    long hung = 0;
    const char *at = err ? strstr(err, "pid ") : NULL;
    if (at) hung = strtol(at + 4, NULL, 10);
    bool killed = hung > 0 && pid_gone(hung, TEST_PATIENCE_MS);
    int rc = rsv_stop(&r, false);
    mtree_free(&t);
    CHECK_CONTAINS(err, "did not answer get_default_active_thread_percentage within 1 s");
    free(err);
    CHECK(killed);
    CHECK_INT(rc, 0);
}

TEST(reserve_mps_flags_are_checked) {
    char bin[600], out[400], errp[400];
    CHECK_MSG(reserve_path(bin, sizeof bin), "tessera-reserve is not built (run make)");
    mtree t;
    mtree_new(&t);
    snprintf(out, sizeof out, "%s/out", t.root);
    snprintf(errp, sizeof errp, "%s/err", t.root);
    char *envp[] = {"NVIDIA_VISIBLE_DEVICES=" MPS_UUID, NULL};
    char *a1[] = {bin, "--once", "--mps", NULL};
    int rc1 = wait_exit(spawn(a1, envp, out, errp), TEST_PATIENCE_MS);
    char *e1 = slurp(errp);
    char *a2[] = {bin, "--mps", "--mps-timeout", "0", NULL};
    int rc2 = wait_exit(spawn(a2, envp, out, errp), TEST_PATIENCE_MS);
    char *e2 = slurp(errp);
    char *a4[] = {bin, "--mps", "--mps-restarts", "-1", NULL};
    int rc4 = wait_exit(spawn(a4, envp, out, errp), TEST_PATIENCE_MS);
    char *e4 = slurp(errp);
    char *a3[] = {bin, "--help", NULL};
    int rc3 = wait_exit(spawn(a3, envp, out, errp), TEST_PATIENCE_MS);
    char *help = slurp(out);
    mtree_free(&t);
    CHECK_INT(rc1, 2);
    CHECK_CONTAINS(e1, "--once and --mps do not go together");
    CHECK_INT(rc2, 2);
    CHECK_CONTAINS(e2, "--mps-timeout: \"0\" is not a whole number of seconds from 1 to 3600");
    CHECK_INT(rc4, 2);
    CHECK_CONTAINS(e4, "--mps-restarts: \"-1\" is not a whole number from 0 to 100");
    free(e4);
    CHECK_INT(rc3, 0);
    CHECK_CONTAINS(help, "--mps ");
    CHECK_CONTAINS(help, "--mps-restarts N");
    CHECK_CONTAINS(help, "CUDA_MPS_PIPE_DIRECTORY=");
    CHECK_CONTAINS(help, RESERVE_ANN_MPS_PIPE);
    free(e1);
    free(e2);
    free(help);
}

/* In process: what reserve_mps_start refuses before it starts anything. */
TEST(reserve_mps_needs_exactly_one_whole_gpu) {
    reserve_mps_config cfg;
    reserve_mps_config_defaults(&cfg);
    cfg.root = "/nonexistent/tessera-mps-test";
    char why[512];
    CHECK(reserve_mps_start(&cfg, "GPU-a,GPU-b", why, sizeof why) == NULL);
    CHECK_CONTAINS(why, "exactly one GPU, and the device plugin gave this container GPU-a,GPU-b");
    CHECK(reserve_mps_start(&cfg, "MIG-5c0a9e3b-7d41-5b8e-a0f2-3e9d1c2b4a60", why, sizeof why) == NULL);
    CHECK_CONTAINS(why, "whole GPUs only");
    CHECK(reserve_mps_start(&cfg, "GPU-../../etc", why, sizeof why) == NULL);
    CHECK_CONTAINS(why, "whole GPUs only");
}

TEST(reserve_mps_tail_joins_the_last_lines) {
    mtree t;
    mtree_new(&t);
    char path[400], out[256], small[12];
    snprintf(path, sizeof path, "%s/control.log", t.root);
    put_file(path, "one\ntwo\nthree\nfour\nfive\nsix\nseven\n\n");
    reserve_mps_tail(path, 5, out, sizeof out);
    reserve_mps_tail(path, 5, small, sizeof small);
    char missing[400];
    snprintf(missing, sizeof missing, "%s/none.log", t.root);
    char none[16] = "x";
    reserve_mps_tail(missing, 5, none, sizeof none);
    put_file(path, "only\n");
    char one[64];
    reserve_mps_tail(path, 5, one, sizeof one);
    mtree_free(&t);
    CHECK_STR(out, "three | four | five | six | seven");
    CHECK(strlen(small) < sizeof small && !strncmp(small, "three", 5));
    CHECK_STR(none, "");
    CHECK_STR(one, "only");
}

/* ---- in a reservation pod, run by the fake kubelet's exec mode ------------------------------------------------- */

#include "tests/support/fake_kubelet.h"

static void nap_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static cJSON *pod_of(fake_api *f, const char *ns, const char *name) {
    char *s = fake_api_get(f, "pods", ns, name);
    cJSON *o = s ? cJSON_Parse(s) : NULL;
    free(s);
    return o;
}

static const char *str_at(const cJSON *o, const char *a, const char *b) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The reservation pod of an MPS GPU as the round 4 contract describes it (namespace tessera-node, hostPath
 * /run/tessera/mps at the same path and /run/tessera/mps/shm as /dev/shm, --mps) runs the real tessera-reserve,
 * which starts the fake daemon the NVIDIA runtime stand-in puts on PATH; a share pod of uid 1000 with the
 * ConfigMap's CUDA_MPS_PIPE_DIRECTORY reaches it; deleting the reservation quits the daemon. */
TEST(reserve_mps_in_a_reservation_pod_under_the_fake_kubelet) {
    char bin[600], fake[600], url[128], errbuf[256];
    CHECK_MSG(reserve_path(bin, sizeof bin) && fake_mps_path(fake, sizeof fake),
              "tessera-reserve or the fake daemon is not built (run make)");
    *strrchr(fake, '/') = 0; /* .../fake-cuda/bin */
    *strrchr(fake, '/') = 0; /* .../fake-cuda */
    mtree t;
    mtree_new(&t);
    char host[400];
    snprintf(host, sizeof host, "%s/host", t.root);
    fake_api *f = fake_api_start(0, errbuf, sizeof errbuf);
    CHECK_MSG(f, "fake API: %s", errbuf);
    fake_api_url(f, url, sizeof url);
    fake_kubelet *k = fake_kubelet_start(f);
    fake_kubelet_add_node(k, "n1", "nvidia.com/gpu", 1, "GPU-n1");
    fake_kubelet_set_exec(k, "n1", &(fake_kubelet_exec){.node_root = t.root, .host_root = host,
                                                        .fake_cuda_dir = fake, .cuda_devices = "GPU-n1-0:81920"});
    const char *api_args[] = {"--kube-api", url, NULL};
    fake_kubelet_add_program(k, "/usr/local/bin/tessera-reserve", bin, api_args);
    fake_api_put(f, "pods",
        "{\"metadata\":{\"name\":\"" MPS_POD "\",\"namespace\":\"" MPS_NS "\","
        "\"labels\":{\"tessera.io/reservation\":\"true\"},\"annotations\":{\"tessera.io/reservation-mps\":\"true\"}},"
        "\"spec\":{\"nodeName\":\"n1\",\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":5,"
        "\"volumes\":[{\"name\":\"mps\",\"hostPath\":{\"path\":\"/run/tessera/mps\",\"type\":\"DirectoryOrCreate\"}},"
        "{\"name\":\"mps-shm\",\"hostPath\":{\"path\":\"/run/tessera/mps/shm\",\"type\":\"DirectoryOrCreate\"}}],"
        "\"containers\":[{\"name\":\"reserve\",\"image\":\"tessera:dev\","
        "\"command\":[\"/usr/local/bin/tessera-reserve\",\"--mps\",\"--mps-root\",\"/run/tessera/mps\"],"
        "\"env\":[{\"name\":\"POD_NAME\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"metadata.name\"}}},"
        "{\"name\":\"POD_NAMESPACE\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"metadata.namespace\"}}}],"
        "\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"}},\"securityContext\":{\"runAsUser\":0},"
        "\"volumeMounts\":[{\"name\":\"mps\",\"mountPath\":\"/run/tessera/mps\"},"
        "{\"name\":\"mps-shm\",\"mountPath\":\"/dev/shm\"}]}]}}");
    char *uuid = NULL;
    WAIT_FOR((uuid = pod_annotation(f, MPS_NS, MPS_POD, "tessera.io/gpu-uuid")) != NULL);
    char *pipe_ann = pod_annotation(f, MPS_NS, MPS_POD, RESERVE_ANN_MPS_PIPE);
    char pipe_dir[600], log_dir[600], shm[600];
    snprintf(pipe_dir, sizeof pipe_dir, "%s/run/tessera/mps/GPU-n1-0/pipe", host);
    snprintf(log_dir, sizeof log_dir, "%s/run/tessera/mps/GPU-n1-0/log", host);
    snprintf(shm, sizeof shm, "%s/run/tessera/mps/shm", host);
    unsigned shm_mode = mode_of(shm);
    long dpid = read_pid_file(pipe_dir);

    /* a share of uid 1000: the ConfigMap's variables, the webhook's hostPath mounts */
    fake_api_put(f, "pods",
        "{\"metadata\":{\"name\":\"share\",\"namespace\":\"default\"},\"spec\":{\"nodeName\":\"n1\","
        "\"restartPolicy\":\"Never\",\"securityContext\":{\"runAsUser\":1000},"
        "\"volumes\":[{\"name\":\"mps\",\"hostPath\":{\"path\":\"/run/tessera/mps\"}}],"
        "\"containers\":[{\"name\":\"app\",\"command\":[\"/bin/sh\",\"-c\","
        "\"echo get_default_active_thread_percentage | nvidia-cuda-mps-control; echo uid=$FAKE_CUDA_UID\"],"
        "\"env\":[{\"name\":\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"GPU-n1-0\"},"
        "{\"name\":\"CUDA_MPS_PIPE_DIRECTORY\",\"value\":\"/run/tessera/mps/GPU-n1-0/pipe\"},"
        "{\"name\":\"CUDA_MPS_LOG_DIRECTORY\",\"value\":\"/run/tessera/mps/GPU-n1-0/log\"}],"
        "\"volumeMounts\":[{\"name\":\"mps\",\"mountPath\":\"/run/tessera/mps\"}]}]}}");
    char *share_out = NULL;
    for (int64_t end = test_now_ms() + TEST_PATIENCE_MS; test_now_ms() < end;) {
        cJSON *o = pod_of(f, "default", "share");
        const char *ph = str_at(o, "status", "phase"), *uid = str_at(o, "metadata", "uid");
        bool done = ph && !strcmp(ph, "Succeeded");
        if (done) share_out = fake_kubelet_log(k, uid, "app", 1);
        cJSON_Delete(o);
        if (done) break;
        nap_ms(10);
    }

    fake_api_delete(f, "pods", MPS_NS, MPS_POD);
    bool quit = dpid > 0 && pid_gone(dpid, TEST_PATIENCE_MS);
    char *clog = read_in(log_dir, "control.log");
    fake_kubelet_stop(k);
    fake_api_free(f);
    mtree_free(&t);
    CHECK_STR(uuid, "GPU-n1-0");
    free(uuid);
    CHECK_STR(pipe_ann, pipe_dir); /* the host's path: what the stand-in gave the process */
    free(pipe_ann);
    CHECK_INT(shm_mode, 01777);
    CHECK(dpid > 0);
    CHECK_STR(share_out, "100.0\nuid=1000\n");
    free(share_out);
    CHECK(quit);
    CHECK_CONTAINS(clog, "] Cmd:quit\n"); /* tessera-reserve's SIGTERM path, not a kill */
    free(clog);
}
