/* test_sim_gen.c -- the generator is seeded and follows its documented distributions. */
#include "sim_helpers.h"

#include "sim/gen.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

TEST(sim_gen_is_seeded) {
    sim_gen_opts o;
    sim_gen_defaults(&o);
    o.workloads = 500;
    char err[256];
    sim_trace *a = sim_gen(&o, err, sizeof err), *b = sim_gen(&o, err, sizeof err);
    o.seed = 2;
    sim_trace *c = sim_gen(&o, err, sizeof err);
    CHECK(a && b && c);
    CHECK(!memcmp(a->w, b->w, (size_t)a->n * sizeof *a->w));
    CHECK(memcmp(a->w, c->w, (size_t)a->n * sizeof *a->w) != 0);
    sim_trace_free(a);
    sim_trace_free(b);
    sim_trace_free(c);
}

TEST(sim_gen_distributions) {
    sim_gen_opts o;
    sim_gen_defaults(&o);
    o.workloads = 40000;
    o.hours = 10;
    char err[256];
    sim_trace *t = sim_gen(&o, err, sizeof err);
    CHECK_MSG(t, "%s", err);
    CHECK_INT(t->n, 40000);
    int kinds[SIM_NKINDS] = {0}, first_half[SIM_NKINDS] = {0};
    double *dur = malloc(sizeof(double) * 40000);
    int ntrain = 0, whole8 = 0;
    for (int i = 0; i < t->n; i++) {
        const sim_workload *w = &t->w[i];
        if (i) CHECK(w->arrival >= t->w[i - 1].arrival);
        CHECK(w->arrival >= 0 && w->arrival < 36000);
        kinds[w->kind]++;
        if (w->arrival < 18000) first_half[w->kind]++;
        if (w->kind == SIM_TRAINING) {
            CHECK(w->duration >= 300 && w->duration <= 48 * 3600);
            CHECK(w->util >= 0.6f && w->util <= 0.95f);
            CHECK_INT(w->priority, 100);
            dur[ntrain++] = w->duration;
            const model_request *r = &t->shapes[w->shape].req;
            CHECK_INT(r->kind, MODEL_REQ_WHOLE);
            whole8 += r->count == 8;
            CHECK_INT(r->cpu_milli, 8000 * r->count);
        }
        if (w->kind == SIM_NOTEBOOK) {
            CHECK(w->util <= 0.1f);
            CHECK_INT(t->shapes[w->shape].req.kind, MODEL_REQ_FRACTION);
            CHECK_INT(t->shapes[w->shape].req.isolation, MODEL_ISO_ANY);
        }
    }
    /* mix 0.2 / 0.4 / 0.3 / 0.1 within 1.5 points; arrivals uniform: half in each half */
    CHECK_NEAR(kinds[SIM_TRAINING] / 40000.0, 0.2, 0.015);
    CHECK_NEAR(kinds[SIM_INFERENCE] / 40000.0, 0.4, 0.015);
    CHECK_NEAR(kinds[SIM_NOTEBOOK] / 40000.0, 0.3, 0.015);
    CHECK_NEAR(kinds[SIM_BATCH] / 40000.0, 0.1, 0.015);
    for (int k = 0; k < SIM_NKINDS; k++) CHECK_NEAR((double)first_half[k] / kinds[k], 0.5, 0.03);
    /* training: median 2 h (log-normal), 5 % ask for 8 GPUs */
    qsort(dur, (size_t)ntrain, sizeof *dur, cmp_d);
    CHECK_NEAR(dur[ntrain / 2], 7200, 400);
    CHECK_NEAR((double)whole8 / ntrain, 0.05, 0.012);
    free(dur);
    sim_trace_free(t);
}

TEST(sim_gen_bad_options) {
    sim_gen_opts o;
    sim_gen_defaults(&o);
    char err[256];
    CHECK(sim_gen_parse_mix("training=1,serving=2", &o, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "--mix");
    CHECK(sim_gen_parse_mix("inference=1", &o, err, sizeof err) == 0);
    CHECK_NEAR(o.mix[SIM_TRAINING], 0, 0);
    sim_trace *t = sim_gen(&o, err, sizeof err);
    CHECK(t);
    for (int i = 0; i < t->n; i++) CHECK_INT(t->w[i].kind, SIM_INFERENCE);
    sim_trace_free(t);
    o.hours = 0;
    CHECK(!sim_gen(&o, err, sizeof err));
    CHECK_CONTAINS(err, "--hours");
}

TEST(sim_gen_training_sizes) {
    sim_gen_opts o;
    sim_gen_defaults(&o);
    char err[256];
    CHECK(sim_gen_parse_training_sizes("3=1", &o, err, sizeof err) != 0);
    CHECK_CONTAINS(err, "--training-sizes \"3=1\": expected gpus=share pairs for 1, 2, 4 and 8 GPUs");
    CHECK(sim_gen_parse_training_sizes("1=0,2=0", &o, err, sizeof err) != 0);   /* nothing to draw */
    CHECK(sim_gen_parse_training_sizes("2=1,8=1", &o, err, sizeof err) == 0);
    o.mix[SIM_TRAINING] = 1;
    o.mix[SIM_INFERENCE] = o.mix[SIM_NOTEBOOK] = o.mix[SIM_BATCH] = 0;
    o.workloads = 400;
    sim_trace *t = sim_gen(&o, err, sizeof err);
    CHECK_MSG(t, "%s", err);
    int n2 = 0, n8 = 0;
    for (int i = 0; i < t->n; i++) {
        int g = t->shapes[t->w[i].shape].req.count;
        CHECK_MSG(g == 2 || g == 8, "a %d-GPU training pod", g);
        n2 += g == 2;
        n8 += g == 8;
    }
    CHECK(n2 > 150 && n8 > 150);   /* half each: 200 +- 3 sigma (30) */
    sim_trace_free(t);
}
