/* svg.c -- the line and bar charts of svg.h, written as plain SVG 1.1 with inline
 * styles: axes with round-number ticks, a legend, one colour per series (a fixed
 * palette that stays readable in print). NaN points are skipped (a gap in the line).
 */
#include "sim/svg.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define W 820
#define H 500
#define ML 70    /* margins: left, right (legend), top, bottom */
#define MR 170
#define MT 40
#define MB 55

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define NPAL (int)(sizeof palette / sizeof palette[0])

/* Text with the XML specials escaped. */
static void esc(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A "nice" tick step (1, 2 or 5 x 10^k) giving about 5-10 ticks over span. */
static double nice_step(double span) {
    if (!(span > 0)) return 1;
    double raw = span / 8, mag = pow(10, floor(log10(raw))), r = raw / mag;
    return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * mag;
}

typedef struct frame {
    double x0, x1, y0, y1;
} frame;

static double px(const frame *fr, double x) { return ML + (x - fr->x0) / (fr->x1 - fr->x0) * (W - ML - MR); }
static double py(const frame *fr, double y) { return H - MB - (y - fr->y0) / (fr->y1 - fr->y0) * (H - MT - MB); }

static FILE *open_svg(const char *path, const char *title, char *err, size_t errlen) {
    FILE *f = fopen(path, "w");
    if (!f) {
        if (err) snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return NULL;
    }
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"%d\" y=\"24\" font-size=\"15\" font-weight=\"bold\">",
            W, H, W, H, ML);
    esc(f, title);
    fputs("</text>\n", f);
    return f;
}

static int close_svg(FILE *f, const char *path, char *err, size_t errlen) {
    fputs("</svg>\n", f);
    if (fclose(f) != 0) {
        if (err) snprintf(err, errlen, "cannot write %s", path);
        return -1;
    }
    return 0;
}

/* Axes, grid and tick labels; x ticks only when xticks. */
static void axes(FILE *f, const frame *fr, const char *xlabel, const char *ylabel, bool xticks) {
    double sy = nice_step(fr->y1 - fr->y0);
    for (double y = ceil(fr->y0 / sy) * sy; y <= fr->y1 + 1e-9; y += sy) {
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n", ML, py(fr, y), W - MR,
                py(fr, y));
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", ML - 6, py(fr, y) + 4, y);
    }
    if (xticks) {
        double sx = nice_step(fr->x1 - fr->x0);
        for (double x = ceil(fr->x0 / sx) * sx; x <= fr->x1 + 1e-9; x += sx) {
            fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e5e5e5\"/>\n", px(fr, x), MT,
                    px(fr, x), H - MB);
            fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", px(fr, x), H - MB + 16, x);
        }
    }
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#333\"/>\n", ML, MT,
            W - ML - MR, H - MT - MB);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", (ML + W - MR) / 2, H - 12);
    esc(f, xlabel);
    fprintf(f, "</text>\n<text x=\"16\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 16 %d)\">",
            (MT + H - MB) / 2, (MT + H - MB) / 2);
    esc(f, ylabel);
    fputs("</text>\n", f);
}

static void legend_entry(FILE *f, int i, const char *name, const char *colour, bool dashed) {
    int y = MT + 10 + 20 * i;
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.5\"%s/>\n", W - MR + 14,
            y, W - MR + 40, y, colour, dashed ? " stroke-dasharray=\"5,4\"" : "");
    fprintf(f, "<text x=\"%d\" y=\"%d\">", W - MR + 46, y + 4);
    esc(f, name);
    fputs("</text>\n", f);
}

int sim_svg_lines(const char *path, const char *title, const char *xlabel, const char *ylabel, const sim_series *s,
                  int ns, bool ideal_diagonal, char *err, size_t errlen) {
    if (!path || (ns > 0 && !s) || ns < 0) {
        if (err) snprintf(err, errlen, "sim_svg_lines: bad argument");
        return -1;
    }
    frame fr = {INFINITY, -INFINITY, 0, -INFINITY};
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < s[k].n; i++) {
            if (isnan(s[k].x[i]) || isnan(s[k].y[i])) continue;
            fr.x0 = fmin(fr.x0, s[k].x[i]);
            fr.x1 = fmax(fr.x1, s[k].x[i]);
            fr.y0 = fmin(fr.y0, s[k].y[i]);
            fr.y1 = fmax(fr.y1, s[k].y[i]);
        }
    if (!isfinite(fr.x0)) fr = (frame){0, 1, 0, 1};
    if (ideal_diagonal) fr.y1 = fmax(fr.y1, fmin(fr.x1, 100));
    if (fr.x1 <= fr.x0) fr.x1 = fr.x0 + 1;
    if (fr.y1 <= fr.y0) fr.y1 = fr.y0 + 1;
    fr.y1 = fr.y0 + ceil((fr.y1 - fr.y0) / nice_step(fr.y1 - fr.y0)) * nice_step(fr.y1 - fr.y0);

    FILE *f = open_svg(path, title ? title : "", err, errlen);
    if (!f) return -1;
    axes(f, &fr, xlabel ? xlabel : "", ylabel ? ylabel : "", true);
    int li = 0;
    if (ideal_diagonal) {
        /* the ideal: everything that arrived is allocated, until the cluster is full */
        double knee = fmin(fmax(100, fr.x0), fr.x1);
        fprintf(f, "<polyline fill=\"none\" stroke=\"#444\" stroke-width=\"1.5\" stroke-dasharray=\"5,4\" "
                   "points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"/>\n",
                px(&fr, fr.x0), py(&fr, fmax(fr.x0, fr.y0)), px(&fr, knee), py(&fr, fmin(knee, fr.y1)), px(&fr, fr.x1),
                py(&fr, fmin(knee, fr.y1)));
        legend_entry(f, li++, "ideal", "#444", true);
    }
    for (int k = 0; k < ns; k++) {
        const char *col = palette[k % NPAL];
        bool open = false;
        for (int i = 0; i < s[k].n; i++) {
            if (isnan(s[k].x[i]) || isnan(s[k].y[i])) {
                if (open) fputs("\"/>\n", f);
                open = false;
                continue;
            }
            if (!open) fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
            fprintf(f, "%s%.1f,%.1f", open ? " " : "", px(&fr, s[k].x[i]), py(&fr, s[k].y[i]));
            open = true;
        }
        if (open) fputs("\"/>\n", f);
        legend_entry(f, li++, s[k].name ? s[k].name : "", col, false);
    }
    return close_svg(f, path, err, errlen);
}

int sim_svg_bars(const char *path, const char *title, const char *ylabel, const char *const *categories, int ncat,
                 const char *const *series, int nseries, const double *values, char *err, size_t errlen) {
    if (!path || ncat < 0 || nseries < 0 || (ncat && nseries && !values) || (ncat && !categories) ||
        (nseries && !series)) {
        if (err) snprintf(err, errlen, "sim_svg_bars: bad argument");
        return -1;
    }
    frame fr = {0, ncat > 0 ? ncat : 1, 0, 0};
    for (int i = 0; i < ncat * nseries; i++)
        if (!isnan(values[i])) {
            fr.y0 = fmin(fr.y0, values[i]);
            fr.y1 = fmax(fr.y1, values[i]);
        }
    if (fr.y1 <= fr.y0) fr.y1 = fr.y0 + 1;
    double st = nice_step(fr.y1 - fr.y0);
    fr.y1 = ceil(fr.y1 / st) * st;
    fr.y0 = floor(fr.y0 / st) * st;

    FILE *f = open_svg(path, title ? title : "", err, errlen);
    if (!f) return -1;
    axes(f, &fr, "", ylabel ? ylabel : "", false);
    double slot = (px(&fr, 1) - px(&fr, 0)), bw = slot * 0.8 / (nseries > 0 ? nseries : 1);
    for (int c = 0; c < ncat; c++) {
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">", px(&fr, c + 0.5), H - MB + 16);
        esc(f, categories[c]);
        fputs("</text>\n", f);
        for (int k = 0; k < nseries; k++) {
            double v = values[k * ncat + c];
            if (isnan(v)) continue;
            double x = px(&fr, c) + slot * 0.1 + k * bw, top = py(&fr, fmax(v, 0)), bot = py(&fr, fmin(v, 0));
            fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>", x, top,
                    bw * 0.95, bot - top, palette[k % NPAL]);
            esc(f, series[k]);
            fprintf(f, ": %g</title></rect>\n", v);
        }
    }
    for (int k = 0; k < nseries; k++) legend_entry(f, k, series[k], palette[k % NPAL], false);
    return close_svg(f, path, err, errlen);
}
