/* test_sim_report.c -- the replay and plan reports: JSON that parses and carries the
 * numbers, CSV with one row per policy and kind, readable tables, SVG files. */
#include "sim_helpers.h"

#include <unistd.h>

#include "sim/report.h"

static char *render(void (*fn)(FILE *, sim_format, const void *, int), sim_format fmt, const void *r, int n) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fn(f, fmt, r, n);
    fclose(f);
    return buf;
}

static void replay_fn(FILE *f, sim_format fmt, const void *r, int n) { sim_report_replay(f, fmt, r, n); }
static void plan_fn(FILE *f, sim_format fmt, const void *r, int n) { sim_report_plan(f, fmt, r, n); }

static bool svg_ok(const char *path) {
    FILE *f = fopen(path, "r");
    char head[256] = "";
    size_t n = f ? fread(head, 1, sizeof head - 1, f) : 0;
    if (f) fclose(f);
    head[n] = 0;
    unlink(path);
    return strstr(head, "<svg") != NULL;
}

TEST(sim_report_replay_formats) {
    sim_cluster *c;
    sim_trace *t;
    CHECK(load_demo(&c, &t));
    sim_replay_result r[2];
    const char *names[2] = {"fgd", "bestfit"};
    char err[512];
    for (int i = 0; i < 2; i++) {
        sim_replay_opts o;
        sim_replay_defaults(&o);
        o.policy = names[i];
        o.samples = 10;
        CHECK_MSG(sim_replay(c, t, &o, &r[i], err, sizeof err) == 0, "%s", err);
    }
    char *json = render(replay_fn, SIM_FMT_JSON, r, 2);
    cJSON *root = cJSON_Parse(json);
    CHECK_MSG(root, "JSON does not parse: %.200s", json);
    cJSON *arr = cJSON_GetObjectItem(root, "replays");
    CHECK_INT(cJSON_GetArraySize(arr), 2);
    cJSON *first = cJSON_GetArrayItem(arr, 0);
    CHECK_STR(cJSON_GetObjectItem(first, "policy")->valuestring, "fgd");
    CHECK_INT(cJSON_GetObjectItem(first, "placed")->valueint, r[0].placed);
    cJSON *inf = cJSON_GetObjectItem(cJSON_GetObjectItem(first, "kinds"), "inference");
    CHECK_NEAR(cJSON_GetObjectItem(inf, "wait_p95_s")->valuedouble, r[0].kind[SIM_INFERENCE].wait_p95, 1e-3);
    CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(first, "series"), "alloc_pct")), 10);
    cJSON_Delete(root);
    free(json);

    char *csv = render(replay_fn, SIM_FMT_CSV, r, 2);
    int lines = 0;
    for (char *p = csv; *p; p++) lines += *p == '\n';
    CHECK_INT(lines, 1 + 2 * (SIM_NKINDS + 1));   /* header, then each kind and "all" per policy */
    CHECK(!strncmp(csv, "policy,kind,n,wait_p50_s", 24));
    CHECK_CONTAINS(csv, "\nbestfit,notebook,");
    free(csv);

    char *table = render(replay_fn, SIM_FMT_TABLE, r, 2);
    CHECK_CONTAINS(table, "wait p50/p95/p99");
    CHECK_CONTAINS(table, "\nbestfit ");
    free(table);

    char bars[] = "/tmp/tessera-test-XXXXXX", lines_path[] = "/tmp/tessera-test-XXXXXX";
    close(mkstemp(bars));
    close(mkstemp(lines_path));
    CHECK_MSG(sim_report_replay_svg(bars, lines_path, r, 2, err, sizeof err) == 0, "%s", err);
    CHECK(svg_ok(bars));
    CHECK(svg_ok(lines_path));
    CHECK(sim_report_replay_svg("/nonexistent-dir/x.svg", NULL, r, 2, err, sizeof err) != 0);
    for (int i = 0; i < 2; i++) sim_replay_result_free(&r[i]);
    sim_cluster_free(c);
    sim_trace_free(t);
}

TEST(sim_report_plan_formats) {
    sim_cluster *c;
    sim_trace *t;
    CHECK(load_demo(&c, &t));
    sim_plan_opts o = {0};
    char err[512];
    CHECK(sim_target_parse("wait.p95.inference<=30s", &o.targets[o.ntargets++], err, sizeof err) == 0);
    sim_plan_result p;
    CHECK_MSG(sim_plan(c, t, "bestfit", &o, &p, err, sizeof err) == 0, "%s", err);
    char *table = render(plan_fn, SIM_FMT_TABLE, &p, 1);
    CHECK_CONTAINS(table, "wait.p95.inference<=30s");
    CHECK_CONTAINS(table, "\nbestfit        yes");
    free(table);
    char *json = render(plan_fn, SIM_FMT_JSON, &p, 1);
    cJSON *root = cJSON_Parse(json);
    CHECK_MSG(root, "JSON does not parse: %.200s", json);
    cJSON *plan = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "plans"), 0);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(plan, "met")));
    CHECK_INT(cJSON_GetObjectItem(plan, "gpus")->valueint, sim_cluster_gpus(p.cluster));
    CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(plan, "groups")), 4);
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(plan, "measured"), "wait.p95.inference<=30s"));
    cJSON_Delete(root);
    free(json);
    char *csv = render(plan_fn, SIM_FMT_CSV, &p, 1);
    CHECK(!strncmp(csv, "policy,met,gpus,a100_count,a100_sharing", 39));
    free(csv);
    char path[] = "/tmp/tessera-test-XXXXXX";
    close(mkstemp(path));
    CHECK_MSG(sim_report_plan_svg(path, &p, 1, err, sizeof err) == 0, "%s", err);
    CHECK(svg_ok(path));
    sim_plan_result_free(&p);
    sim_cluster_free(c);
    sim_trace_free(t);
}

TEST(sim_report_seconds) {
    char b[32];
    sim_format_seconds(42, b, sizeof b);
    CHECK_STR(b, "42s");
    sim_format_seconds(90, b, sizeof b);
    CHECK_STR(b, "1.5m");
    sim_format_seconds(7200, b, sizeof b);
    CHECK_STR(b, "2.0h");
}
