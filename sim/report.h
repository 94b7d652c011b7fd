/* report.h -- how replay and plan results are shown: a table a person reads on stdout,
 * JSON or CSV for tools, and SVG charts (sim/svg.h). Formatting only; no simulation. */
#ifndef SIM_REPORT_H
#define SIM_REPORT_H

#include <stdio.h>

#include "sim/plan.h"
#include "sim/replay.h"

typedef enum sim_format { SIM_FMT_TABLE = 0, SIM_FMT_JSON, SIM_FMT_CSV } sim_format;

/* One row per policy: GPUs, placed / unschedulable, allocation and fragmentation means,
 * GPU-hours, and per kind the wait p50/p95/p99 and the mean slowdown. */
void sim_report_replay(FILE *f, sim_format fmt, const sim_replay_result *r, int n);

/* Charts for a replay: bars of the p95 wait per kind for each policy (path), and the
 * allocation over time per policy (alloc_path, may be NULL). -1 with err. */
int sim_report_replay_svg(const char *path, const char *alloc_path, const sim_replay_result *r, int n, char *err,
                          size_t errlen);

/* One row per policy: the node count and sharing per group, GPUs, whether the targets
 * are met, and each target's value at that cluster. */
void sim_report_plan(FILE *f, sim_format fmt, const sim_plan_result *p, int n);

/* Bars: GPUs per group for each policy's plan. -1 with err. */
int sim_report_plan_svg(const char *path, const sim_plan_result *p, int n, char *err, size_t errlen);

/* "42s", "3.5m", "2.1h": a duration a person reads at a glance. */
void sim_format_seconds(double s, char *buf, size_t len);

#endif
