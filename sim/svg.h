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

/* Line chart of ns series. ideal_diagonal draws the y = x line (the "ideal" of the FGD
 * paper's allocation chart, both axes in %). 0, or -1 with err (cannot write path). */
int sim_svg_lines(const char *path, const char *title, const char *xlabel, const char *ylabel,
                  const sim_series *s, int ns, bool ideal_diagonal, char *err, size_t errlen);

/* Grouped bars: ncat categories along x (e.g. policies), nseries bars in each (e.g.
 * "wait p95 inference", ...); values[series * ncat + cat]. 0, or -1 with err. */
int sim_svg_bars(const char *path, const char *title, const char *ylabel,
                 const char *const *categories, int ncat, const char *const *series, int nseries,
                 const double *values, char *err, size_t errlen);

#endif
