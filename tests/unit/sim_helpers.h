/* sim_helpers.h -- shared by the test_sim_*.c files: a float check, and clusters and
 * traces written inline. */
#ifndef TEST_SIM_HELPERS_H
#define TEST_SIM_HELPERS_H

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sim/cluster.h"
#include "sim/trace.h"

#define CHECK_NEAR(a, b, tol)                                                           \
    do {                                                                                \
        double a_ = (a), b_ = (b);                                                      \
        if (!(fabs(a_ - b_) <= (tol))) {                                                \
            test_fail(__FILE__, __LINE__, "%s == %.6f, expected %.6f +/- %g", #a, a_, b_, (double)(tol)); \
            return;                                                                     \
        }                                                                               \
    } while (0)

/* The demo inputs compiled into the binaries (data/sim/). */
extern const unsigned char sim_demo_sim_cluster_json[];
extern const size_t sim_demo_sim_cluster_json_len;
extern const unsigned char sim_demo_sim_trace_json[];
extern const size_t sim_demo_sim_trace_json_len;

static inline sim_cluster *cluster_of(const char *json, char *err, size_t errlen) {
    return sim_cluster_from_json(json, strlen(json), NULL, err, errlen);
}

static inline sim_trace *trace_of(const char *json, char *err, size_t errlen) {
    return sim_trace_from_json(json, strlen(json), err, errlen);
}

/* The bundled demo cluster and trace; false, with the reason printed, if either fails. */
static inline bool load_demo(sim_cluster **c, sim_trace **t) {
    char err[512];
    *c = sim_cluster_from_json((const char *)sim_demo_sim_cluster_json, sim_demo_sim_cluster_json_len, NULL, err,
                               sizeof err);
    *t = *c ? sim_trace_from_json((const char *)sim_demo_sim_trace_json, sim_demo_sim_trace_json_len, err, sizeof err)
            : NULL;
    if (!*t) fprintf(stdout, "    load_demo: %s\n", err);
    return *c && *t;
}

/* A reader was given bad input: it must have refused it with a message containing needle. */
#define CHECK_REFUSED(accepted, input, err, needle)                                     \
    do {                                                                                \
        if (accepted) test_fail(__FILE__, __LINE__, "accepted %s", (input));            \
        else if (!strstr((err), (needle)))                                              \
            test_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"", (err), (needle)); \
    } while (0)

/* One group of `count` nodes with `gpus` GPUs of product, sharing as given. */
static inline sim_cluster *one_group(const char *product, int count, int gpus, const char *sharing) {
    char json[512], err[512];
    snprintf(json, sizeof json,
             "{\"nodeGroups\": [{\"name\": \"g\", \"count\": %d, \"gpuProduct\": \"%s\", \"gpusPerNode\": %d,"
             " \"sharing\": \"%s\"}]}", count, product, gpus, sharing);
    sim_cluster *c = cluster_of(json, err, sizeof err);
    if (!c) fprintf(stdout, "    one_group: %s\n", err);
    return c;
}

#endif
