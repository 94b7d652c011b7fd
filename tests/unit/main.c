/* main.c -- runs every registered unit test (optionally those whose name contains
 * argv[1]) and prints "N passed, N failed" as its last line. */
#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <time.h>

typedef struct { const char *name, *file; test_fn fn; } test_case;

static test_case *cases;
static int ncases, capcases;
static bool current_failed;

void test_register(const char *name, const char *file, test_fn fn) {
    if (ncases == capcases) {
        capcases = capcases ? 2 * capcases : 64;
        cases = realloc(cases, (size_t)capcases * sizeof *cases);
        if (!cases) abort();
    }
    cases[ncases++] = (test_case){name, file, fn};
}

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

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0;
    qsort(cases, (size_t)ncases, sizeof *cases, by_file_then_name);
    for (int i = 0; i < ncases; i++) {
        if (filter && !strstr(cases[i].name, filter) && !strstr(cases[i].file, filter)) continue;
        current_failed = false;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        cases[i].fn();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
        printf("%s %s (%s, %.0f ms)\n", current_failed ? "FAIL" : "ok  ", cases[i].name, cases[i].file, ms);
        fflush(stdout);
        if (current_failed) failed++; else passed++;
    }
    free(cases);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
