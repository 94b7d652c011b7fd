/* main.c -- runs the registered unit tests and prints "N passed, N failed" as its last line.
 *
 *   tessera-tests [-j N] [--timeout S] [--list] [NAME]
 *
 * NAME keeps the tests whose name or file contains it. With -j 1 (the default) the tests run one after another
 * in this process, their output as it comes: what a debugger wants. With -j N each test runs in a child process
 * of its own (fork), N at a time; a test's output (stdout and stderr) is kept until it ends and then printed
 * whole with its "ok"/"FAIL" line, so the output of tests that ran at once is never interleaved, and a crash or
 * a hang fails that test alone (a test still running after --timeout seconds is killed with everything it
 * started). Tests registered with TEST_SERIAL run alone, before the others: they cannot share the machine.
 * The others start longest first, by the durations of the last -j run (kept in test-times beside the binary;
 * tests it does not know start first), so that no long test starts last and keeps the run waiting for it.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *name, *file;
    test_fn fn;
    bool serial;
    int64_t last_ms;   /* -j: how long it took last time (test-times beside the binary); -1 unknown */
} test_case;

static test_case *cases;
static int ncases, capcases;
static bool current_failed;

void test_register_as(const char *name, const char *file, test_fn fn, bool serial) {
    if (ncases == capcases) {
        capcases = capcases ? 2 * capcases : 64;
        cases = realloc(cases, (size_t)capcases * sizeof *cases);
        if (!cases) abort();
    }
    cases[ncases++] = (test_case){name, file, fn, serial, -1};
}

void test_register(const char *name, const char *file, test_fn fn) { test_register_as(name, file, fn, false); }

void test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    current_failed = true;
    fprintf(stdout, "    %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
}

bool test_failed(void) { return current_failed; }

char *test_fixture(const char *rel, size_t *len) {
    const char *dir = getenv("TESSERA_FIXTURES");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/fixtures", rel);
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "missing fixture %s (run from the repository root)\n", path); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) { fprintf(stderr, "cannot read %s\n", path); exit(2); }
    buf[n] = 0;
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}

static int by_file_then_name(const void *a, const void *b) {
    const test_case *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : strcmp(x->name, y->name);
}

/* ---- the durations of the last run (-j), to start the longest tests first ---- */

static void times_path(char *buf, size_t len) {
    const char *env = getenv("TESSERA_TEST_TIMES");
    char self[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
    char *slash = strrchr(self, '/');
    if (slash) *slash = 0;
    if (env && env[0]) snprintf(buf, len, "%s", env);
    else snprintf(buf, len, "%s/test-times", slash ? self : ".");
}

static test_case *case_named(const char *name) {
    for (int i = 0; i < ncases; i++)
        if (!strcmp(cases[i].name, name)) return &cases[i];
    return NULL;
}

/* Lines "<ms> <name>"; a missing or odd file only means that the order is the files' order. */
static void times_load(void) {
    char path[1100], line[512];
    times_path(path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        long long ms;
        char name[400];
        if (sscanf(line, "%lld %399s", &ms, name) != 2 || ms < 0) continue;
        test_case *c = case_named(name);
        if (c) c->last_ms = ms;
    }
    fclose(f);
}

static void times_save(void) {
    char path[1100], tmp[1200];
    times_path(path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return;   /* a read-only build directory: the next run keeps the files' order */
    for (int i = 0; i < ncases; i++)
        if (cases[i].last_ms >= 0) fprintf(f, "%lld %s\n", (long long)cases[i].last_ms, cases[i].name);
    if (fclose(f) != 0 || rename(tmp, path) != 0) unlink(tmp);
}

/* Unknown first (a new test may be long), then the longest; the files' order among equals. */
static int by_last_duration(const void *a, const void *b) {
    const test_case *x = *(const test_case *const *)a, *y = *(const test_case *const *)b;
    int64_t dx = x->last_ms < 0 ? INT64_MAX : x->last_ms, dy = y->last_ms < 0 ? INT64_MAX : y->last_ms;
    if (dx != dy) return dx > dy ? -1 : 1;
    return by_file_then_name(x, y);
}

static int64_t mono_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void result_line(const test_case *c, bool failed, int64_t ms, const char *why) {
    printf("%s %s (%s, %lld ms)%s%s\n", failed ? "FAIL" : "ok  ", c->name, c->file, (long long)ms, why[0] ? ": " : "", why);
    fflush(stdout);
}

/* ---- one after another, in this process ---- */

static bool run_here(const test_case *c) {
    current_failed = false;
    int64_t t0 = mono_ms();
    c->fn();
    result_line(c, current_failed, mono_ms() - t0, "");
    return !current_failed;
}

/* ---- N at a time, a child process each ---- */

typedef struct slot {
    const test_case *c;
    pid_t pid;              /* 0: free */
    int out;                /* the child's stdout and stderr: an unlinked temporary file */
    int64_t t0;
} slot;

static slot *slots;
static int nslots;

/* Ctrl-C or a kill of the runner: take every running test down with it (each leads a process group). */
static void on_signal(int sig) {
    for (int i = 0; i < nslots; i++)
        if (slots[i].pid > 0) kill(-slots[i].pid, SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

static int temp_file(void) {
    const char *dir = getenv("TMPDIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tessera-tests-XXXXXX", dir && dir[0] ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd >= 0) unlink(path);
    return fd;
}

static bool start_child(slot *s, const test_case *c) {
    char why[256];
    int out = temp_file();
    if (out < 0) {
        snprintf(why, sizeof why, "not started: cannot create a temporary file: %s", strerror(errno));
        result_line(c, true, 0, why);
        return false;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, sizeof why, "not started: fork: %s", strerror(errno));
        result_line(c, true, 0, why);
        close(out);
        return false;
    }
    if (pid == 0) {
        setpgid(0, 0);   /* its own group: a timeout kills what it started too */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        dup2(out, 1);
        dup2(out, 2);
        close(out);
        setvbuf(stdout, NULL, _IOLBF, 0);   /* what it printed survives a crash */
        current_failed = false;
        c->fn();
        fflush(NULL);
        exit(current_failed ? 1 : 0);   /* exit, not _exit: LeakSanitizer checks each test's leaks here */
    }
    setpgid(pid, pid);   /* also here, so that a kill before the child ran its setpgid finds the group */
    *s = (slot){c, pid, out, mono_ms()};
    return true;
}

/* Print what the child wrote, then its result line. */
static bool finish_child(slot *s, int status, bool timed_out, int timeout_s) {
    int64_t ms = mono_ms() - s->t0;
    fflush(stdout);
    char buf[65536];
    ssize_t n;
    bool ended_with_newline = true;
    lseek(s->out, 0, SEEK_SET);
    while ((n = read(s->out, buf, sizeof buf)) > 0) {
        if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n) break;
        ended_with_newline = buf[n - 1] == '\n';
    }
    if (!ended_with_newline) putchar('\n');
    close(s->out);
    char why[128] = "";
    bool failed;
    if (timed_out) {
        snprintf(why, sizeof why, "still running after %d s, killed", timeout_s);
        failed = true;
    } else if (WIFSIGNALED(status)) {
        snprintf(why, sizeof why, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
        failed = true;
    } else {
        failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
        if (WIFEXITED(status) && WEXITSTATUS(status) > 1) snprintf(why, sizeof why, "exit status %d", WEXITSTATUS(status));
    }
    result_line(s->c, failed, ms, why);
    ((test_case *)s->c)->last_ms = ms;
    s->pid = 0;
    return !failed;
}

/* Wait for one child to end (or the first timeout); its slot is free again. */
static bool reap_one(int timeout_s, int *passed, int *failed) {
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid < 0 && errno != EINTR && errno != ECHILD) return false;
        for (int i = 0; pid > 0 && i < nslots; i++) {
            if (slots[i].pid != pid) continue;
            kill(-pid, SIGKILL);   /* what the test started and left running (a fake server's helper...) */
            if (finish_child(&slots[i], status, false, timeout_s)) (*passed)++;
            else (*failed)++;
            return true;
        }
        if (pid > 0) continue;   /* not one of ours */
        int64_t now = mono_ms();
        for (int i = 0; i < nslots; i++) {
            if (slots[i].pid <= 0 || now - slots[i].t0 < (int64_t)timeout_s * 1000) continue;
            kill(-slots[i].pid, SIGKILL);
            waitpid(slots[i].pid, &status, 0);
            (*failed)++;
            finish_child(&slots[i], status, true, timeout_s);
            return true;
        }
        struct timespec nap = {0, 10 * 1000000L};
        nanosleep(&nap, NULL);
    }
}

static int running(void) {
    int n = 0;
    for (int i = 0; i < nslots; i++) n += slots[i].pid > 0;
    return n;
}

static slot *free_slot(void) {
    for (int i = 0; i < nslots; i++)
        if (slots[i].pid <= 0) return &slots[i];
    return NULL;
}

static void run_forked(const test_case **sel, int nsel, int jobs, int timeout_s, int *passed, int *failed) {
    times_load();
    qsort(sel, (size_t)nsel, sizeof *sel, by_last_duration);
    nslots = jobs;
    slots = calloc((size_t)jobs, sizeof *slots);
    if (!slots) abort();
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
    /* the serial tests first, each alone; then the others, jobs at a time */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < nsel; i++) {
            if (sel[i]->serial != (pass == 0)) continue;
            while (running() >= (pass == 0 ? 1 : jobs)) reap_one(timeout_s, passed, failed);
            if (!start_child(free_slot(), sel[i])) (*failed)++;
        }
        while (running() > 0) reap_one(timeout_s, passed, failed);
    }
    free(slots);
    slots = NULL;
    nslots = 0;
    times_save();
}

static void usage(FILE *f) {
    fprintf(f, "usage: tessera-tests [-j N] [--timeout S] [--list] [NAME]\n"
               "  NAME         run only the tests whose name or file contains NAME\n"
               "  -j N         run N tests at once, each in a process of its own, its output printed whole when it\n"
               "               ends (default 1: one after another in this process, output as it comes)\n"
               "  --timeout S  with -j above 1: a test still running after S seconds fails, killed (default 600)\n"
               "  --list       print the selected tests (name, file, and \"serial\" for those that run alone)\n"
               "Ends with the line \"N passed, N failed\"; exit status 1 when a test failed.\n");
}

static bool parse_int(const char *s, int min, int *out) {
    char *end = NULL;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || end == s || *end || v < min || v > 100000) return false;
    *out = (int)v;
    return true;
}

int main(int argc, char **argv) {
    const char *filter = NULL;
    int jobs = 1, timeout_s = 600;
    bool list = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-j") || !strcmp(a, "--jobs")) {
            if (!parse_int(i + 1 < argc ? argv[++i] : NULL, 1, &jobs)) {
                fprintf(stderr, "tessera-tests: -j wants a number of tests to run at once, 1 or more\n");
                return 2;
            }
        } else if (!strncmp(a, "-j", 2) && a[2]) {
            if (!parse_int(a + 2, 1, &jobs)) {
                fprintf(stderr, "tessera-tests: -j wants a number of tests to run at once, 1 or more, not '%s'\n", a + 2);
                return 2;
            }
        } else if (!strcmp(a, "--timeout")) {
            if (!parse_int(i + 1 < argc ? argv[++i] : NULL, 1, &timeout_s)) {
                fprintf(stderr, "tessera-tests: --timeout wants a number of seconds, 1 or more\n");
                return 2;
            }
        } else if (!strcmp(a, "--list")) {
            list = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (a[0] == '-' || filter) {
            fprintf(stderr, "tessera-tests: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        } else {
            filter = a;
        }
    }
    qsort(cases, (size_t)ncases, sizeof *cases, by_file_then_name);
    const test_case **sel = calloc((size_t)ncases + 1, sizeof *sel);
    if (!sel) abort();
    int nsel = 0;
    for (int i = 0; i < ncases; i++)
        if (!filter || strstr(cases[i].name, filter) || strstr(cases[i].file, filter)) sel[nsel++] = &cases[i];
    int passed = 0, failed = 0;
    if (list) {
        for (int i = 0; i < nsel; i++) printf("%s %s%s\n", sel[i]->name, sel[i]->file, sel[i]->serial ? " serial" : "");
    } else if (jobs == 1) {
        for (int i = 0; i < nsel; i++) {
            if (run_here(sel[i])) passed++;
            else failed++;
        }
    } else {
        run_forked(sel, nsel, jobs, timeout_s, &passed, &failed);
    }
    free(sel);
    free(cases);
    if (list) return 0;
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
