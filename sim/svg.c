/* svg.c -- placeholder until the charts land. */
#include <stdio.h>
#include "sim/svg.h"

int sim_svg_lines(const char *path, const char *title, const char *xlabel, const char *ylabel, const sim_series *s,
                  int ns, bool ideal_diagonal, char *err, size_t errlen) {
    snprintf(err, errlen, "charts not built yet");
    return -1;
}
int sim_svg_bars(const char *path, const char *title, const char *ylabel, const char *const *categories, int ncat,
                 const char *const *series, int nseries, const double *values, char *err, size_t errlen) {
    snprintf(err, errlen, "charts not built yet");
    return -1;
}
