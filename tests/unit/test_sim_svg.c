/* test_sim_svg.c -- the SVG charts (escaped text, gaps at NaN, the ideal line, bars)
 * and the progress counter, which must count every tick from every thread and stay
 * silent when stderr is not a terminal. */
#include "harness.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "sim/progress.h"
#include "sim/svg.h"

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
    (void)n;
    fclose(f);
    return buf;
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++) n++;
    return n;
}

TEST(sim_svg_lines_chart) {
    char path[] = "/tmp/tessera-svg-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    double x[] = {0, 50, 100, 130}, a[] = {0, 50, 95, 96}, b[] = {0, NAN, 90, 91};
    sim_series s[] = {{"fgd <exact>", x, a, 4}, {"a&b", x, b, 4}};
    char err[128];
    int rc = sim_svg_lines(path, "alloc \"openb\"", "arrived %", "allocated %", s, 2, true, err, sizeof err);
    char *svg = slurp(path);
    unlink(path);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK(svg != NULL);
    bool ok = strstr(svg, "<svg") && strstr(svg, "</svg>") && strstr(svg, "fgd &lt;exact&gt;") &&
              strstr(svg, "a&amp;b") && strstr(svg, "&quot;openb&quot;") && strstr(svg, ">ideal<");
    /* ideal + fgd + two pieces of a&b (split at the NaN) */
    int lines = count(svg, "<polyline");
    free(svg);
    CHECK(ok);
    CHECK_INT(lines, 4);
    CHECK_INT(sim_svg_lines("/nonexistent/dir/x.svg", "t", "x", "y", s, 2, false, err, sizeof err), -1);
    CHECK_CONTAINS(err, "/nonexistent/dir/x.svg");
    CHECK_INT(sim_svg_lines(path, "t", "x", "y", NULL, 2, false, err, sizeof err), -1);
}

TEST(sim_svg_bars_chart) {
    char path[] = "/tmp/tessera-svg-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    const char *cats[] = {"fgd", "bestfit", "random"}, *ser[] = {"p50", "p95"};
    double v[] = {1, 2, 3, 4, NAN, -1};
    char err[128];
    int rc = sim_svg_bars(path, "wait", "seconds", cats, 3, ser, 2, v, err, sizeof err);
    char *svg = slurp(path);
    unlink(path);
    CHECK_MSG(rc == 0, "%s", err);
    CHECK(svg != NULL);
    int bars = count(svg, "<rect x=");   /* the frame is a rect too */
    bool labels = strstr(svg, ">bestfit<") && strstr(svg, "p95: -1<");
    free(svg);
    CHECK_INT(bars, 5 + 1);
    CHECK(labels);
    CHECK_INT(sim_svg_bars(path, "t", "y", cats, 3, ser, 2, NULL, err, sizeof err), -1);
}

static void *ticker(void *arg) {
    for (int i = 0; i < 10000; i++) sim_progress_add(arg, 1);
    return NULL;
}

TEST(sim_progress_counts_every_tick) {
    sim_progress p;
    sim_progress_start(&p, "test", 40000);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, ticker, &p);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    sim_progress_end(&p);
    CHECK_INT(atomic_load(&p.done), 40000);
    CHECK(p.tty == (bool)isatty(2));
    sim_progress_start(&p, "off", 0);   /* no total: never drawn */
    CHECK(!p.tty);
}
