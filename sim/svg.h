/* svg.h -- self-contained SVG charts for tessera-sim reports: a line chart (allocation
 * against arrived %, with an optional ideal line) and a grouped bar chart (one group per
 * category, one bar per series). No dependencies; the files open in any browser.
 *
 *   sim_series s[] = {{"fgd", xs, ys, n}, {"bestfit", xs, ys2, n}};
 *   sim_svg_lines("out/alloc.svg", "GPU allocation", "arrived %", "allocated GPU %",
 *                 s, 2, true, err, sizeof err);
 */
#ifndef SIM_SVG_H
#define SIM_SVG_H

#include <stdbool.h>
#include <stddef.h>

typedef struct sim_series {
    const char *name;      /* legend label */
    const double *x, *y;   /* n points, x ascending */
    int n;
} sim_series;

/* Line chart of ns series. ideal_diagonal draws the "ideal" of the FGD paper's
 * allocation chart, y = min(x, 100) (both axes in %). 0, or -1 with err (cannot write
 * path). */
int sim_svg_lines(const char *path, const char *title, const char *xlabel, const char *ylabel,
                  const sim_series *s, int ns, bool ideal_diagonal, char *err, size_t errlen);

/* The same with a fixed window and a choice of ideal line, for zoomed views such as the
 * paper's Fig. 9(a) (unallocated % for arrived 75..120 %, y 0..25). A range with x1 <= x0
 * (or y1 <= y0) fits that axis to the data; lines are clipped to the window. */
typedef enum sim_ideal {
    SIM_IDEAL_NONE = 0,
    SIM_IDEAL_ALLOC,     /* y = min(x, 100): everything that arrived is allocated until full */
    SIM_IDEAL_UNALLOC    /* y = max(100 - x, 0): the unallocated share under that ideal */
} sim_ideal;
typedef struct sim_svg_window {
    double x0, x1, y0, y1;
} sim_svg_window;
int sim_svg_lines_win(const char *path, const char *title, const char *xlabel, const char *ylabel,
                      const sim_series *s, int ns, sim_ideal ideal, const sim_svg_window *win, char *err,
                      size_t errlen);

/* Grouped bars: ncat categories along x (e.g. policies), nseries bars in each (e.g.
 * "wait p95 inference", ...); values[series * ncat + cat]. 0, or -1 with err. */
int sim_svg_bars(const char *path, const char *title, const char *ylabel,
                 const char *const *categories, int ncat, const char *const *series, int nseries,
                 const double *values, char *err, size_t errlen);

#endif
