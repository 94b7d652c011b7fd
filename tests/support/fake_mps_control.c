/* fake_mps_control.c -- a stand-in for NVIDIA's nvidia-cuda-mps-control, built by the Makefile as
 * $(BUILD)/fake-cuda/bin/nvidia-cuda-mps-control. Tests put that directory on PATH, so tessera-reserve --mps finds
 * it by the same execvp() search it uses in a container where the NVIDIA container runtime mounted the real one.
 *
 * What it does, as nvidia-cuda-mps-control(1) and docs.nvidia.com/deploy/mps describe the real program:
 *   -d          start the control daemon in the background (returns once it listens; 1 if it cannot start)
 *   -f          run the control daemon in the foreground (exits 0 after `quit` or SIGTERM/SIGINT)
 *   (none)      client mode: commands on stdin, one a line, their answers on stdout; exit 1 with "Cannot find MPS
 *               control daemon process" when no daemon answers
 * The daemon listens on $CUDA_MPS_PIPE_DIRECTORY/control (default /tmp/nvidia-mps), writes its pid to
 * nvidia-cuda-mps-control.pid there, and logs to $CUDA_MPS_LOG_DIRECTORY/control.log and server.log (default
 * /var/log/nvidia-mps) in the documented line shape "[YYYY-MM-DD HH:MM:SS.mmm Control PID] text". Commands:
 * get_server_list, get_client_list PID, start_server -uid UID, set_default_active_thread_percentage P,
 * get_default_active_thread_percentage, set_default_device_pinned_mem_limit DEV NG|NM,
 * get_default_device_pinned_mem_limit DEV, quit.
 *
 * CUDA clients (the fake driver build/fake-cuda/libcuda.so.1, in cuInit) register on the same socket. One server
 * runs at a time, for one uid; a client of another uid waits until that server's clients are all gone, then the
 * daemon replaces the server (the man page's rule). A server takes the defaults in force when it starts and admits
 * at most 48 clients (the Volta+ limit). The socket protocol is the fake's own: /work/plan/fake-mps-protocol.md
 * at the time of writing, restated here so the repository stands alone:
 *   client -> "CLIENT <pid> <uid>\n"; daemon -> "READY <server_pid> <pct> <limits>\n" (limits "-" or
 *   "<dev>=<MiB>,..."), or "WAIT <server_pid> <server_uid>\n" and READY later on the same connection, or
 *   "REFUSED <reason>\n" and close. A READY client keeps the connection open for its life: its close unregisters.
 *   client mode -> "COMMAND <text>\n"; daemon -> the command's output lines, then close.
 *
 * Test knobs (daemon environment): FAKE_MPS_MAX_CLIENTS=N (the per-server cap, default 48);
 * FAKE_MPS_FAIL_START=TEXT (log TEXT to control.log and exit 1 without listening: a daemon that cannot start);
 * FAKE_MPS_START_DELAY_MS=N (wait N ms before listening: a daemon slow to start).
 * A daemon that dies later: the test kills the pid in nvidia-cuda-mps-control.pid.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_PIPE_DIR "/tmp/nvidia-mps"
#define DEFAULT_LOG_DIR  "/var/log/nvidia-mps"
#define PID_FILE         "nvidia-cuda-mps-control.pid"
#define MAX_CLIENTS      48   /* per server on Volta and later (the MPS documentation's limit) */
#define MAX_CONNS        256
#define LINE_MAX_LEN     4096
#define MAX_LIMITS       16

typedef enum { C_NEW, C_WAITING, C_READY } conn_kind;

typedef struct conn {
    int fd;
    conn_kind kind;
    long pid, uid;          /* a CUDA client's */
    char buf[LINE_MAX_LEN + 1];
    size_t len;
} conn;

typedef struct limit { char dev[128]; long mib; } limit;

typedef struct server {
    pid_t pid;              /* 0: none runs */
    long uid;
    int pipe_w;             /* the server process lives until this closes */
    double pct;
    limit limits[MAX_LIMITS];
    int nlimits;
} server;

static struct {
    char pipe_dir[PATH_MAX], log_dir[PATH_MAX], sock[PATH_MAX + 16], pidfile[PATH_MAX + 32];
    FILE *control_log, *server_log;
    int listen_fd;
    conn conns[MAX_CONNS];
    int nconns;
    server srv;
    double pct;                     /* the defaults the next server takes */
    limit limits[MAX_LIMITS];
    int nlimits;
    int max_clients;
    bool quitting;
    bool bound;                     /* the socket and pid file are ours to remove (not another daemon's) */
} D;

/* ---- logs ---------------------------------------------------------------------------------------------- */

static void logf_to(FILE *f, const char *who, long pid, const char *fmt, va_list ap) {
    if (!f) return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(f, "[%s.%03ld %s %ld] ", when, (long)(tv.tv_usec / 1000), who, pid);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    fflush(f);
}

__attribute__((format(printf, 1, 2))) static void clog_(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    logf_to(D.control_log, "Control", (long)getpid(), fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 2, 3))) static void slog_(long server_pid, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    logf_to(D.server_log, "Server", server_pid, fmt, ap);
    va_end(ap);
}

/* ---- small helpers ------------------------------------------------------------------------------------- */

static void send_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void send_line(int fd, const char *fmt, ...) {
    char line[LINE_MAX_LEN + 2];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n > sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    for (int off = 0; off < n;) { /* a client that went away: MSG_NOSIGNAL, and the close is seen by poll */
        ssize_t w = send(fd, line + off, (size_t)(n - off), MSG_NOSIGNAL);
        if (w <= 0) {
            if (w < 0 && errno == EINTR) continue;
            return;
        }
        off += (int)w;
    }
}

static bool parse_long(const char *s, long *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end) return false;
    *out = v;
    return true;
}

static void mkdir_p(const char *path) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        mkdir(tmp, 0755);
        *p = '/';
    }
    mkdir(tmp, 0755);
}

static int connect_control(const char *sock) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(sock);
    if (len >= sizeof sa.sun_path) return -1;
    memcpy(sa.sun_path, sock, len + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- the server process -------------------------------------------------------------------------------- */

static int clients_of_server(void) {
    int n = 0;
    for (int i = 0; i < D.nconns; i++) n += D.conns[i].kind == C_READY;
    return n;
}

/* A real child process, so get_server_list prints a pid that exists. It only waits for the daemon to close its
 * pipe (or to die: PR_SET_PDEATHSIG), then exits 0. */
static bool server_start(long uid) {
    int p[2];
    if (pipe(p) != 0) return false;
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return false;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        prctl(PR_SET_NAME, "nvidia-cuda-mps-server");
        for (int fd = 0; fd < 1024; fd++)
            if (fd != p[0]) close(fd);
        char c;
        while (read(p[0], &c, 1) != 0 && errno == EINTR) {}
        _exit(0);
    }
    close(p[0]);
    fcntl(p[1], F_SETFD, FD_CLOEXEC);
    D.srv.pid = pid;
    D.srv.uid = uid;
    D.srv.pipe_w = p[1];
    D.srv.pct = D.pct;
    memcpy(D.srv.limits, D.limits, sizeof D.limits);
    D.srv.nlimits = D.nlimits;
    clog_("Starting new server %ld for user %ld", (long)pid, uid);
    clog_("NEW SERVER %ld: Ready", (long)pid);
    return true;
}

static void server_stop(void) {
    if (!D.srv.pid) return;
    close(D.srv.pipe_w);
    int st = 0;
    while (waitpid(D.srv.pid, &st, 0) < 0 && errno == EINTR) {}
    clog_("Server %ld exited with status %d", (long)D.srv.pid, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    D.srv.pid = 0;
}

/* ---- CUDA clients -------------------------------------------------------------------------------------- */

static void send_ready(conn *c) {
    char lim[LINE_MAX_LEN] = "-";
    size_t off = 0;
    for (int i = 0; i < D.srv.nlimits && off < sizeof lim - 1; i++)
        off += (size_t)snprintf(lim + off, sizeof lim - off, "%s%s=%ld", i ? "," : "", D.srv.limits[i].dev,
                                D.srv.limits[i].mib);
    send_line(c->fd, "READY %ld %.1f %s", (long)D.srv.pid, D.srv.pct, lim);
    c->kind = C_READY;
    slog_(D.srv.pid, "New client %ld connected", c->pid);
}

static void drop_conn(int i) {
    close(D.conns[i].fd);
    D.conns[i] = D.conns[--D.nconns];
}

/* Admit a client of the running server's uid, or refuse it at the cap. Returns false when it was refused (and
 * dropped: the caller must not touch index i any more). */
static bool admit(int i) {
    conn *c = &D.conns[i];
    if (clients_of_server() >= D.max_clients) {
        clog_("NEW CLIENT %ld from user %ld: server %ld has its maximum of %d clients", c->pid, c->uid,
              (long)D.srv.pid, D.max_clients);
        send_line(c->fd, "REFUSED max-clients %d", D.max_clients);
        drop_conn(i);
        return false;
    }
    send_ready(c);
    return true;
}

static bool anyone_waiting(void) {
    for (int i = 0; i < D.nconns; i++)
        if (D.conns[i].kind == C_WAITING) return true;
    return false;
}

/* The server has no clients and someone waits: replace it with a server for the longest waiter's uid (connections
 * are kept in arrival order except after a drop, which is close enough for a fake) and admit its waiters. */
static void serve_waiters(void) {
    if (clients_of_server() > 0 || !anyone_waiting()) return;
    long uid = -1;
    for (int i = 0; i < D.nconns && uid < 0; i++)
        if (D.conns[i].kind == C_WAITING) uid = D.conns[i].uid;
    server_stop();
    if (!server_start(uid)) {
        clog_("Failed to start a server for user %ld", uid);
        return;
    }
    for (int i = 0; i < D.nconns;) {
        if (D.conns[i].kind == C_WAITING && D.conns[i].uid == uid && !admit(i)) continue;
        i++;
    }
}

static void on_client(int i, long pid, long uid) {
    conn *c = &D.conns[i];
    c->pid = pid;
    c->uid = uid;
    if (D.quitting) {
        send_line(c->fd, "REFUSED shutting-down");
        drop_conn(i);
        return;
    }
    if (D.srv.pid && D.srv.uid != uid && clients_of_server() == 0) server_stop(); /* idle: replace it now */
    if (!D.srv.pid) {
        clog_("NEW CLIENT %ld from user %ld: Server is not ready, push client to pending list", pid, uid);
        if (!server_start(uid)) {
            clog_("Failed to start a server for user %ld", uid);
            send_line(c->fd, "REFUSED server-start-failed");
            drop_conn(i);
            return;
        }
        admit(i);
        return;
    }
    /* one of another uid already waits: this one queues behind it, whatever its uid, so nobody starves */
    if (D.srv.uid == uid && !anyone_waiting()) {
        clog_("NEW CLIENT %ld from user %ld: Server already exists", pid, uid);
        admit(i);
        return;
    }
    clog_("NEW CLIENT %ld from user %ld: server %ld of user %ld has clients; waiting until they are done", pid, uid,
          (long)D.srv.pid, D.srv.uid);
    c->kind = C_WAITING;
    send_line(c->fd, "WAIT %ld %ld", (long)D.srv.pid, D.srv.uid);
}

/* ---- operator commands ------------------------------------------------------------------------------------ */

static limit *find_limit(limit *list, int n, const char *dev) {
    for (int i = 0; i < n; i++)
        if (!strcmp(list[i].dev, dev)) return &list[i];
    return NULL;
}

/* "10G" or "512M" (the documented forms), as MiB. */
static bool parse_mem(const char *s, long *mib) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || v < 0 || end[1]) return false;
    if (*end == 'M') *mib = v;
    else if (*end == 'G' && v <= LONG_MAX / 1024) *mib = v * 1024;
    else return false;
    return true;
}

static void command(int fd, char *text) {
    clog_("Cmd:%s", text);
    char *save = NULL, *argv[8] = {0};
    int argc = 0;
    for (char *t = strtok_r(text, " \t\r", &save); t && argc < 8; t = strtok_r(NULL, " \t\r", &save)) argv[argc++] = t;
    if (!argc) return;
    const char *cmd = argv[0];
    long v;
    if (!strcmp(cmd, "get_server_list") && argc == 1) {
        if (D.srv.pid) send_line(fd, "%ld", (long)D.srv.pid);
    } else if (!strcmp(cmd, "get_client_list") && argc == 2 && parse_long(argv[1], &v)) {
        for (int i = 0; D.srv.pid == v && i < D.nconns; i++)
            if (D.conns[i].kind == C_READY) send_line(fd, "%ld", D.conns[i].pid);
    } else if (!strcmp(cmd, "start_server") && argc == 3 && !strcmp(argv[1], "-uid") && parse_long(argv[2], &v) &&
               v >= 0) {
        if (D.srv.pid && D.srv.uid != v && clients_of_server() == 0) server_stop();
        if (D.srv.pid && D.srv.uid != v)
            send_line(fd, "Cannot start a server for user %ld: server %ld of user %ld has clients", v,
                      (long)D.srv.pid, D.srv.uid);
        else if (!D.srv.pid && !server_start(v))
            send_line(fd, "Failed to start a server for user %ld", v);
    } else if (!strcmp(cmd, "set_default_active_thread_percentage") && argc == 2) {
        char *end;
        double p = strtod(argv[1], &end);
        if (end == argv[1] || *end || !(p > 0 && p <= 100))
            send_line(fd, "Invalid active thread percentage %s: a number above 0 and at most 100", argv[1]);
        else
            D.pct = p;
    } else if (!strcmp(cmd, "get_default_active_thread_percentage") && argc == 1) {
        send_line(fd, "%.1f", D.pct);
    } else if (!strcmp(cmd, "set_default_device_pinned_mem_limit") && argc == 3) {
        long mib;
        limit *l = find_limit(D.limits, D.nlimits, argv[1]);
        if (!parse_mem(argv[2], &mib) || strlen(argv[1]) >= sizeof l->dev)
            send_line(fd, "Invalid device pinned memory limit %s: an integer followed by G or M", argv[2]);
        else if (!l && D.nlimits == MAX_LIMITS)
            send_line(fd, "Too many devices");
        else {
            if (!l) {
                l = &D.limits[D.nlimits++];
                snprintf(l->dev, sizeof l->dev, "%s", argv[1]);
            }
            l->mib = mib;
        }
    } else if (!strcmp(cmd, "get_default_device_pinned_mem_limit") && argc == 2) {
        const limit *l = find_limit(D.limits, D.nlimits, argv[1]);
        if (l) send_line(fd, "%ldM", l->mib);
        else send_line(fd, "0");
    } else if (!strcmp(cmd, "quit") && argc == 1) {
        D.quitting = true;
    } else {
        send_line(fd, "Unrecognized command: %s", cmd);
    }
}

/* ---- the daemon -------------------------------------------------------------------------------------------- */

/* One complete first line from a new connection. Returns false when the connection is finished (dropped). */
static bool on_line(int i, char *line) {
    long pid, uid;
    if (!strncmp(line, "COMMAND ", 8)) {
        int fd = D.conns[i].fd;
        clog_("NEW UI");
        command(fd, line + 8);
        clog_("UI closed");
        drop_conn(i);
        return false;
    }
    char *save = NULL, *w = strtok_r(line, " ", &save), *a = strtok_r(NULL, " ", &save),
         *b = strtok_r(NULL, " ", &save);
    if (w && !strcmp(w, "CLIENT") && parse_long(a, &pid) && parse_long(b, &uid) && pid > 0 && uid >= 0 &&
        !strtok_r(NULL, " ", &save)) {
        on_client(i, pid, uid);
        return false; /* on_client may have dropped it; either way, nothing more to read from this line */
    }
    clog_("Unable to read new connection type information");
    drop_conn(i);
    return false;
}

/* Data (or EOF) on connection i. */
static void on_readable(int i) {
    conn *c = &D.conns[i];
    char tmp[LINE_MAX_LEN];
    ssize_t n = read(c->fd, tmp, sizeof tmp);
    if (n < 0 && errno == EINTR) return;
    if (n <= 0) {
        bool was_ready = c->kind == C_READY;
        long pid = c->pid;
        if (was_ready) slog_(D.srv.pid, "Client %ld disconnected", pid);
        drop_conn(i);
        if (was_ready) serve_waiters();
        return;
    }
    if (c->kind != C_NEW) return; /* a registered client has nothing more to say */
    size_t take = (size_t)n < sizeof c->buf - 1 - c->len ? (size_t)n : sizeof c->buf - 1 - c->len;
    memcpy(c->buf + c->len, tmp, take);
    c->len += take;
    c->buf[c->len] = 0;
    char *nl = strchr(c->buf, '\n');
    if (!nl && c->len < sizeof c->buf - 1) return;
    if (nl) *nl = 0;
    on_line(i, c->buf);
}

static void cleanup(void) {
    for (int i = D.nconns - 1; i >= 0; i--) {
        if (D.conns[i].kind == C_WAITING) send_line(D.conns[i].fd, "REFUSED shutting-down");
        drop_conn(i);
    }
    server_stop();
    if (D.listen_fd >= 0) close(D.listen_fd);
    if (D.bound) {
        unlink(D.sock);
        unlink(D.pidfile);
        clog_("Exit");
    }
    if (D.control_log) fclose(D.control_log);
    if (D.server_log) fclose(D.server_log);
    D.control_log = D.server_log = NULL;
}

/* Open the logs and the socket and write the pid file; on failure say why on stderr and in control.log. */
static bool daemon_setup(void) {
    mkdir_p(D.log_dir);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/control.log", D.log_dir);
    D.control_log = fopen(path, "ae");
    if (!D.control_log) {
        fprintf(stderr, "nvidia-cuda-mps-control: cannot open %s: %s\n", path, strerror(errno));
        return false;
    }
    snprintf(path, sizeof path, "%s/server.log", D.log_dir);
    D.server_log = fopen(path, "ae");
    const char *fail = getenv("FAKE_MPS_FAIL_START");
    if (fail && *fail) {
        clog_("%s", fail);
        fprintf(stderr, "nvidia-cuda-mps-control: %s\n", fail);
        return false;
    }
    long delay;
    if (parse_long(getenv("FAKE_MPS_START_DELAY_MS"), &delay) && delay > 0) {
        struct timespec ts = {delay / 1000, (delay % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    }
    mkdir_p(D.pipe_dir);
    int other = connect_control(D.sock);
    if (other >= 0) {
        close(other);
        clog_("An instance of this daemon is already running with socket %s", D.sock);
        fprintf(stderr, "An instance of this daemon is already running\n");
        return false;
    }
    unlink(D.sock); /* a socket a dead daemon left */
    D.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(D.sock) >= sizeof sa.sun_path) {
        clog_("Socket path %s is too long", D.sock);
        fprintf(stderr, "nvidia-cuda-mps-control: socket path %s is too long\n", D.sock);
        return false;
    }
    memcpy(sa.sun_path, D.sock, strlen(D.sock) + 1);
    if (D.listen_fd < 0 || bind(D.listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(D.listen_fd, 64) != 0) {
        int e = errno;
        clog_("Failed to create the control socket %s: %s", D.sock, strerror(e));
        fprintf(stderr, "nvidia-cuda-mps-control: cannot listen on %s: %s\n", D.sock, strerror(e));
        return false;
    }
    D.bound = true;
    chmod(D.sock, 0777); /* clients of every uid connect */
    FILE *pf = fopen(D.pidfile, "we");
    if (!pf) {
        clog_("Cannot write %s: %s", D.pidfile, strerror(errno));
        return false;
    }
    fprintf(pf, "%ld\n", (long)getpid());
    fclose(pf);
    clog_("Starting control daemon using socket %s", D.sock);
    clog_("To connect CUDA applications to this daemon, set env CUDA_MPS_PIPE_DIRECTORY=%s", D.pipe_dir);
    return true;
}

static int daemon_loop(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    while (!D.quitting) {
        struct pollfd pfd[MAX_CONNS + 2];
        int n = 0;
        pfd[n++] = (struct pollfd){.fd = sfd, .events = POLLIN};
        pfd[n++] = (struct pollfd){.fd = D.listen_fd, .events = POLLIN};
        int fds[MAX_CONNS];
        for (int i = 0; i < D.nconns; i++) {
            fds[i] = D.conns[i].fd;
            pfd[n++] = (struct pollfd){.fd = fds[i], .events = POLLIN};
        }
        int nconns = D.nconns;
        if (poll(pfd, (nfds_t)n, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (pfd[0].revents) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) > 0) clog_("Received signal %u, quitting", si.ssi_signo);
            break;
        }
        /* connections may be dropped (and the array compacted) while handling: find each by its fd */
        for (int k = 0; k < nconns && !D.quitting; k++) {
            if (!pfd[k + 2].revents) continue;
            for (int i = 0; i < D.nconns; i++)
                if (D.conns[i].fd == fds[k]) {
                    on_readable(i);
                    break;
                }
        }
        if (pfd[1].revents & POLLIN && !D.quitting) {
            int fd = accept4(D.listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0 && D.nconns == MAX_CONNS) {
                close(fd);
            } else if (fd >= 0) {
                clog_("Accepting connection...");
                D.conns[D.nconns++] = (conn){.fd = fd, .kind = C_NEW};
            }
        }
    }
    if (sfd >= 0) close(sfd);
    cleanup();
    return 0;
}

/* -d: fork; the child becomes the daemon and tells the parent over a pipe once it listens. */
static int run_background(void) {
    int ready[2];
    if (pipe(ready) != 0) return 1;
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid > 0) {
        close(ready[1]);
        char c;
        ssize_t n;
        while ((n = read(ready[0], &c, 1)) < 0 && errno == EINTR) {}
        close(ready[0]);
        return n == 1 ? 0 : 1;
    }
    close(ready[0]);
    setsid();
    if (!daemon_setup()) {
        cleanup();
        _exit(1);
    }
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        if (null > 2) close(null);
    }
    if (write(ready[1], "r", 1) != 1) {}
    close(ready[1]);
    _exit(daemon_loop());
}

/* Client mode: each stdin line is one command, sent over its own connection. */
static int run_client(void) {
    char line[LINE_MAX_LEN];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[strspn(line, " \t")]) continue;
        int fd = connect_control(D.sock);
        if (fd < 0) {
            fprintf(stderr, "Cannot find MPS control daemon process\n");
            return 1;
        }
        send_line(fd, "COMMAND %s", line);
        shutdown(fd, SHUT_WR);
        char buf[LINE_MAX_LEN];
        ssize_t n;
        while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
            if (n > 0) fwrite(buf, 1, (size_t)n, stdout);
        fflush(stdout);
        close(fd);
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *pipe_dir = getenv("CUDA_MPS_PIPE_DIRECTORY"), *log_dir = getenv("CUDA_MPS_LOG_DIRECTORY");
    snprintf(D.pipe_dir, sizeof D.pipe_dir, "%s", pipe_dir && *pipe_dir ? pipe_dir : DEFAULT_PIPE_DIR);
    snprintf(D.log_dir, sizeof D.log_dir, "%s", log_dir && *log_dir ? log_dir : DEFAULT_LOG_DIR);
    snprintf(D.sock, sizeof D.sock, "%s/control", D.pipe_dir);
    snprintf(D.pidfile, sizeof D.pidfile, "%s/%s", D.pipe_dir, PID_FILE);
    D.listen_fd = -1;
    D.pct = 100.0;
    long cap;
    D.max_clients = parse_long(getenv("FAKE_MPS_MAX_CLIENTS"), &cap) && cap > 0 && cap <= MAX_CONNS ? (int)cap
                                                                                                   : MAX_CLIENTS;
    /* SIGTERM/SIGINT are taken by the daemon loop's signalfd; SIGPIPE never kills it */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    signal(SIGPIPE, SIG_IGN);

    if (argc == 1) return run_client();
    if (argc == 2 && !strcmp(argv[1], "-d")) {
        sigprocmask(SIG_BLOCK, &set, NULL);
        return run_background();
    }
    if (argc == 2 && !strcmp(argv[1], "-f")) {
        sigprocmask(SIG_BLOCK, &set, NULL);
        if (!daemon_setup()) {
            cleanup();
            return 1;
        }
        return daemon_loop();
    }
    fprintf(stderr, "usage: nvidia-cuda-mps-control [-d | -f]\n"
                    "  -d  start the MPS control daemon in the background\n"
                    "  -f  run the MPS control daemon in the foreground\n"
                    "  (no option) send the commands read from stdin to the running daemon\n"
                    "(tessera's test fake of NVIDIA's program: tests/support/fake_mps_control.c)\n");
    return 1;
}
